# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Run by `tests/test_vllm.py` (in a process of its own: one vLLM engine per process): SR-PPO with
`prompt_sampling="pass_at_k"` through vLLM colocate, 4 steps of 8 rollouts, 2 steps per generated batch. Records each
draw (the pool's and the drawn prompts, the drawn prompts tokenised as GRPO tokenises them for generation) and the
prompt token ids of every request vLLM was given. Writes `<output_dir>/prompt_sampling.json`.

    python vllm_prompt_sampling.py <model_dir> <output_dir>
"""

import copy
import json
import os
import sys

from helpers import cpu_config, small_digit_reward  # tests/helpers.py, on PYTHONPATH (helpers.script_env)

from trl_srppo import SRPPOTrainer
from trl_srppo.tasks.toy import build_tokenizer, make_dataset


def main(model_dir: str, output_dir: str) -> None:
    args = cpu_config(
        output_dir,
        use_vllm=True,
        vllm_mode="colocate",
        max_steps=4,
        steps_per_generation=2,
        logging_steps=1,
        prompt_sampling="pass_at_k",
        prompt_pool_factor=2,
        prompt_sampling_floor=0.3,
    )
    trainer = SRPPOTrainer(
        model=model_dir,
        reward_funcs=small_digit_reward,
        args=args,
        train_dataset=make_dataset(64, seed=0),
        processing_class=build_tokenizer(),
    )
    draws, requests = [], []
    draw, generate = trainer._prompt_sampler.draw, trainer.vllm_generation.llm.generate

    def spy_draw(trainer_, inputs):
        drawn, result = draw(trainer_, inputs)
        prompt_ids, _, _ = trainer_._tokenize_prompts(copy.deepcopy([x["prompt"] for x in drawn]))
        draws.append(
            {
                "pool": [x["prompt"] for x in inputs],
                "drawn": [x["prompt"] for x in drawn],
                "indices": result["indices"].tolist(),
                "drawn_prompt_ids": [list(ids) for ids in prompt_ids],
            }
        )
        return drawn, result

    def spy_generate(prompts, *args, **kwargs):
        outputs = generate(prompts, *args, **kwargs)
        requests.append([list(output.prompt_token_ids) for output in outputs])
        return outputs

    trainer._prompt_sampler.draw = spy_draw
    trainer.vllm_generation.llm.generate = spy_generate
    trainer.train()
    with open(os.path.join(output_dir, "prompt_sampling.json"), "w") as f:
        json.dump({"draws": draws, "requests": requests, "log_history": trainer.state.log_history}, f)


if __name__ == "__main__":
    main(*sys.argv[1:3])
