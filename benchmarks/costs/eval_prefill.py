# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The evaluation's shared prompt cache, timed: `TransformersEngine` with and without `prefill_once`.

    python -m benchmarks.costs.eval_prefill  # SmolLM2-135M-Instruct (converted once, as make bench-real)
    python -m benchmarks.costs.eval_prefill --model DIR --prompts 8 --samples 8 --repeats 3

`prompts` arithmetic problems of `benchmarks.smollm2.task` rendered with the chat template, `samples` completions each
at temperature 1 (at most 32 tokens), one torch thread; the two ways run in turn, `repeats` times each, and the
command prints each one's median seconds, their ratio and whether the seeded draws were the same.
"""

import argparse
import statistics
import time
from unittest import mock

from ..common.runs import quiet_offline_command, torch_threads
from ..smollm2.model import load_model, resolve_model
from ..smollm2.task import LEVELS, as_example, level_problems


def timed_generate(model, tokenizer, prompts, samples: int, shared: bool) -> tuple[float, list]:
    from trl_srppo.evaluation import engines
    from trl_srppo.evaluation.sampling import SamplingConfig

    sampling = SamplingConfig(temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=32, seed=0)
    engine = engines.TransformersEngine(model, tokenizer, batch_size=len(prompts) * samples)
    with mock.patch.object(engines, "prefill_once", engines.prefill_once if shared else lambda *args: {}):
        start = time.perf_counter()
        out = engine.generate(prompts, samples, sampling, seed=0)
    return time.perf_counter() - start, [[c.token_ids for c in completions] for completions in out]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="a causal LM folder with a chat template (default: SmolLM2)")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    from trl_srppo.evaluation.prompts import render_prompt, tokenize_prompts

    quiet_offline_command()
    path = resolve_model(args.model, "eval_prefill")
    if path is None:
        return 1
    with torch_threads(1):
        tokenizer, model = load_model(path)
        rows = [row for level in LEVELS for row in level_problems(level)[::7]][: args.prompts]
        texts = [render_prompt(tokenizer, as_example(row)["prompt"], None, True, None) for row in rows]
        prompts = tokenize_prompts(tokenizer, texts, True)
        seconds = {True: [], False: []}
        draws = {}
        for _ in range(args.repeats):
            for shared in (False, True):
                elapsed, draws[shared] = timed_generate(model, tokenizer, prompts, args.samples, shared)
                seconds[shared].append(elapsed)
    plain, shared = statistics.median(seconds[False]), statistics.median(seconds[True])
    length = statistics.mean(len(p) for p in prompts)
    print(f"{args.prompts} prompts of {length:.0f} tokens x {args.samples} samples, {args.repeats} repeats each:")
    print(f"  prompt encoded per sample: {plain:.2f} s (median)")
    print(f"  prompt encoded once:       {shared:.2f} s (median)")
    print(f"  ratio: {plain / shared:.2f}x; same draws: {draws[True] == draws[False]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
