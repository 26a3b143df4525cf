# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""GRPOConfig options and GRPOTrainer arguments through SRPPOTrainer: each trains, and both policy and critic learn.

One or two steps of the toy task per case; a case fails if SRPPOTrainer refuses or crashes on something GRPOTrainer
accepts, or if either model stays unchanged.
"""

import asyncio
from unittest.mock import patch

import pytest
import torch
from conftest import cpu_config, tiny_reward_model
from datasets import IterableDataset
from helpers import small_digit_reward
from peft import LoraConfig, get_peft_model

from trl_srppo import SRPPOTrainer


def even_digit_reward(completions, **kwargs):
    return [1.0 if c.split() and c.split()[0] in "02468" else 0.0 for c in completions]


async def async_digit_reward(completions, **kwargs):
    await asyncio.sleep(0)
    return small_digit_reward(completions)


LORA = dict(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])

# case name -> (SRPPOConfig overrides, trainer options)
CASES = {
    **{f"loss_type={t}": (dict(loss_type=t), {}) for t in ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo")},
    "loss_type=luspo": (dict(loss_type="luspo", importance_sampling_level="sequence"), {}),
    "loss_type=vespo": (dict(loss_type="vespo"), {}),
    "importance_sampling_level=sequence": (dict(importance_sampling_level="sequence", loss_type="grpo"), {}),
    "top_entropy_quantile": (dict(top_entropy_quantile=0.5), {}),
    "delta": (dict(delta=1.5), {}),
    "epsilon_high": (dict(epsilon_high=0.28), {}),
    "off_policy_mask_threshold": (dict(off_policy_mask_threshold=0.5), {}),
    "num_iterations": (dict(num_iterations=2, max_steps=2), {}),
    "beta": (dict(beta=0.1), {"model_from_path": True}),
    "sync_ref_model": (
        dict(beta=0.1, sync_ref_model=True, ref_model_sync_steps=1, max_steps=2),
        {"model_from_path": True},
    ),
    "async_reward": (dict(), {"reward_funcs": async_digit_reward}),
    "two_reward_funcs_normalized": (
        dict(srppo_outcome="normalized_sum"),
        {"reward_funcs": [small_digit_reward, even_digit_reward]},
    ),
    "reward_weights_threshold": (
        dict(reward_weights=[1.0, 2.0], srppo_outcome_threshold=1.0),
        {"reward_funcs": [small_digit_reward, even_digit_reward]},
    ),
    "reward_model_threshold": (dict(srppo_outcome_threshold=0.0), {"reward_model": True}),
    "num_generations=2": (dict(num_generations=2), {}),
    "num_generations_eval": (
        dict(num_generations_eval=2, eval_strategy="steps", eval_steps=1, per_device_eval_batch_size=4),
        {"eval_dataset": True},
    ),
    "iterable_dataset": (dict(), {"iterable": True}),
    "peft_config": (dict(learning_rate=3e-2), {"peft_config": LoraConfig(**LORA)}),
    "peft_instance": (dict(learning_rate=3e-2), {"peft_instance": True}),
    "mask_truncated_completions": (dict(mask_truncated_completions=True, max_completion_length=2), {}),
    "linear_critic": (dict(srppo_method="ppo"), {}),
}


def build(toy, tmp_path, overrides, options):
    tokenizer, build_model, dataset = toy
    fields = dict(max_steps=1, per_device_train_batch_size=8)
    fields.update(overrides)
    model = build_model()
    if options.get("model_from_path"):  # a reference model loaded from the policy's checkpoint
        model.save_pretrained(tmp_path / "policy")
        tokenizer.save_pretrained(tmp_path / "policy")
        model = str(tmp_path / "policy")
    if options.get("peft_instance"):
        model = get_peft_model(model, LoraConfig(**LORA))
    reward_funcs = options.get("reward_funcs", small_digit_reward)
    if options.get("reward_model"):  # a sequence-classification model from a folder, as GRPOTrainer loads one
        torch.manual_seed(0)
        reward_funcs = [small_digit_reward, tiny_reward_model(tmp_path, tokenizer)]
    train_dataset = dataset
    if options.get("iterable"):
        rows = [dataset[i] for i in range(len(dataset))]
        train_dataset = IterableDataset.from_generator(lambda: iter(rows))
    return SRPPOTrainer(
        model=model,
        reward_funcs=reward_funcs,
        args=cpu_config(tmp_path / "out", **fields),
        train_dataset=train_dataset,
        eval_dataset=dataset.select(range(8)) if options.get("eval_dataset") else None,
        processing_class=tokenizer,
        peft_config=options.get("peft_config"),
    )


def snapshot(module):
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def changed(module, before):
    return [k for k, v in module.state_dict().items() if k in before and not torch.equal(v, before[k])]


@pytest.mark.parametrize("case", list(CASES))
def test_grpo_option_trains_policy_and_critic(toy, tmp_path, case):
    overrides, options = CASES[case]
    trainer = build(toy, tmp_path, overrides, options)
    policy_before, critic_before = snapshot(trainer.model), snapshot(trainer.critic)
    trainer.train()
    assert changed(trainer.critic, critic_before), f"the critic did not learn with {case}"
    assert changed(trainer.model, policy_before), f"the policy did not learn with {case}"
    logs = {k for entry in trainer.state.log_history for k in entry}
    assert {"critic/loss", "advantages/mean", "reward"} <= logs, f"metrics missing with {case}"
    if "num_generations_eval" in case:
        assert any("eval_frac_reward_zero_std" in entry for entry in trainer.state.log_history)


# ---- tools ----------------------------------------------------------------------------------------------------------

QWEN_SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"]
QWEN_SPECIAL_TOKENS += ["<tool_response>", "</tool_response>", "<think>", "</think>"]


def qwen_chat_tokenizer():
    """A byte-level tokenizer (256 byte tokens and Qwen's chat tokens) with TRL's copy of Qwen3's chat template, which
    TRL recognises for parsing tool calls."""
    import os

    import trl
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    tokenizer = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(sorted(alphabet))}, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in QWEN_SPECIAL_TOKENS])
    wrapped = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    with open(os.path.join(os.path.dirname(trl.__file__), "chat_templates", "qwen3.jinja")) as f:
        wrapped.chat_template = f.read()
    return wrapped


def multiply_tool(a: int, b: int) -> int:
    """
    Multiplies two integers.

    Args:
        a: The first integer.
        b: The second integer.

    Returns:
        The product of the two integers.
    """
    return a * b


def found_twelve(completions, **kwargs):
    return [1.0 if "12" in str(completion) else 0.0 for completion in completions]


def test_tools_train_policy_and_critic_with_no_advantage_on_tool_output(tmp_path):
    """GRPOTrainer's `tools=`: the first completion calls the tool, whose result (not generated by the policy) is
    appended before the model goes on; the policy gets no advantage on those tokens, the critic still sees them."""
    from datasets import Dataset
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tokenizer = qwen_chat_tokenizer()
    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, tie_word_embeddings=False, pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id, bos_token_id=None,
    )  # fmt: skip
    model = Qwen3ForCausalLM(config)
    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": "What is 3 times 4?"}]}] * 4)
    trainer = SRPPOTrainer(
        model=model,
        reward_funcs=found_twelve,
        args=cpu_config(tmp_path / "out", max_steps=1, per_device_train_batch_size=2, max_completion_length=128),
        train_dataset=dataset,
        processing_class=tokenizer,
        tools=[multiply_tool],
    )

    def encode(texts):
        ids = [tokenizer.encode(t, add_special_tokens=False) for t in texts]
        width = max(len(i) for i in ids)
        return torch.tensor([i + [tokenizer.pad_token_id] * (width - len(i)) for i in ids])

    calls = []

    def fake_generate(input_ids, **kwargs):  # the policy's turns: a tool call and a plain answer, then "12" after it
        calls.append(input_ids.shape[0])
        if len(calls) == 1:
            turns = ['<tool_call>\n{"name": "multiply_tool", "arguments": {"a": 3, "b": 4}}\n</tool_call><|im_end|>']
            turns.append("I do not know.<|im_end|>")
        else:
            turns = ["It is 12.<|im_end|>"] * input_ids.shape[0]
        return torch.cat([input_ids, encode(turns).to(input_ids.device)], dim=1)

    outputs = []
    score = trainer._generate_and_score_completions

    def recording_score(inputs):
        outputs.append(score(inputs))
        return outputs[-1]

    trainer._generate_and_score_completions = recording_score
    policy_before, critic_before = snapshot(trainer.model), snapshot(trainer.critic)
    with patch.object(trainer.model, "generate", side_effect=fake_generate):
        trainer.train()

    assert calls == [2, 1]  # a second turn for the rollout that called the tool
    out = outputs[0]
    tool_output = (out["completion_mask"] * (1 - out["tool_mask"])).bool()  # (B, C), the tool's result
    assert tool_output[0].sum() > 0 and tool_output[1].sum() == 0
    assert torch.all(out["advantages"][tool_output] == 0)
    own_tokens = (out["completion_mask"] * out["tool_mask"]).bool()  # (B, C), generated by the policy
    assert torch.all(out["advantages"][own_tokens] != 0)
    logs = {k: v for entry in trainer.state.log_history for k, v in entry.items()}
    assert logs["tools/call_frequency"] == pytest.approx(1 / 2)
    assert changed(trainer.critic, critic_before), "the critic did not learn with tools"
    assert changed(trainer.model, policy_before), "the policy did not learn with tools"
