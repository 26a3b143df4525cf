# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Generation of an evaluation's missing samples: render the prompts, record them in `problems/<bench>.jsonl`, call
the engine chunk by chunk, and append each chunk's samples to `samples/<bench>.jsonl` (so an interrupted run resumes
where it stopped)."""

from __future__ import annotations

import inspect
import json
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from . import progress
from .benchmarks import Problem
from .config import EvalConfig
from .engines import Completion, GenerationEngine, build_engine
from .prompts import render_prompt, tokenize_prompts, uses_chat_template
from .storage import prompt_sha, write_jsonl

__all__ = ["call_seed", "generate_missing", "group_by_missing", "sample_records"]


def call_seed(base_seed: int, benchmark: str, problem_id: str, start_index: int) -> int:
    """Seed of one engine call: depends on the run's seed and on the first (problem, sample index) it generates, so
    that resuming never draws the same random numbers twice for a problem."""
    return (base_seed * 1_000_003 + zlib.crc32(f"{benchmark}/{problem_id}/{start_index}".encode())) % (2**31 - 1)


def generate_missing(
    config: EvalConfig,
    engine: GenerationEngine | None,
    engine_factory: Callable[[EvalConfig], GenerationEngine] | None,
    problems: dict[str, list[Problem]],
    stored: dict[str, dict[str, list[dict]]],
    missing: dict[str, dict[str, int]],
) -> GenerationEngine:
    """Render the prompts, write `problems/<bench>.jsonl` and generate the missing samples (appended to `stored` and
    to the samples files).

    Returns:
        [`~evaluation.engines.GenerationEngine`]: the engine used; one built here (with `engine_factory`, by default
        [`build_engine`]) is closed, to free the GPU before verification.
    """
    output_dir = Path(config.output_dir)
    built_here = engine is None
    if engine is None:
        engine = (engine_factory or build_engine)(config)
    templated = uses_chat_template(engine.tokenizer, config.use_chat_template)
    if config.use_chat_template and not templated:
        print("[trl-srppo eval] the tokenizer has no chat template: prompts are given as plain text.")
    rendered = {
        name: [
            render_prompt(engine.tokenizer, p.prompt, config.system_prompt, templated, config.chat_template_kwargs)
            for p in items
        ]
        for name, items in problems.items()
    }
    for name, items in problems.items():
        _check_prompts(name, items, rendered[name], stored[name])
        write_jsonl(
            output_dir / "problems" / f"{name}.jsonl",
            [{"problem_id": p.id, "prompt": text, "columns": p.columns} for p, text in zip(items, rendered[name])],
        )
    total_missing = sum(sum(m.values()) for m in missing.values())
    with progress.progress_bar(total_missing, "generating", config.progress, "sample") as bar:
        throughput = progress.Throughput(bar)
        for name, items in problems.items():
            _generate_benchmark(
                name, items, rendered[name], stored[name], missing[name], engine, templated, config, throughput
            )
    if built_here:
        engine.close()
    return engine


def _check_prompts(name: str, problems: list[Problem], rendered: list[str], stored: dict[str, list[dict]]) -> None:
    """Refuse to mix samples of a prompt with samples of a different one (edited template, other tokenizer)."""
    for problem, text in zip(problems, rendered):
        shas = {r.get("prompt_sha") for r in stored.get(problem.id, [])} - {None}
        if shas and shas != {prompt_sha(text)}:
            raise ValueError(
                f"Benchmark {name!r}, problem {problem.id!r}: the stored samples were generated from another prompt "
                "(the prompt template or the chat template changed). Use another output folder."
            )


def _takes_progress(engine: GenerationEngine) -> bool:
    """Whether the engine's `generate` accepts a `progress` callable."""
    try:
        parameters = inspect.signature(engine.generate).parameters
    except (TypeError, ValueError):
        return False
    return "progress" in parameters


def group_by_missing(
    problems: Sequence[Problem], rendered: Sequence[str], missing: dict[str, int]
) -> dict[int, list[tuple[Problem, str]]]:
    """The problems that miss samples, with their rendered prompts, grouped by how many they miss (problems missing
    the same number go to the engine together; usually all of them do).

    Returns:
        `dict[int, list[tuple[Problem, str]]]`: number of missing samples -> the `(problem, rendered prompt)` pairs
        missing that many, in the order given; groups in the order of their first problem, problems missing none
        left out.
    """
    groups: dict[int, list[tuple[Problem, str]]] = {}
    for problem, text in zip(problems, rendered):
        if missing[problem.id] > 0:
            groups.setdefault(missing[problem.id], []).append((problem, text))
    return groups


def sample_records(
    benchmark: str, problem_id: str, prompt: str, completions: Sequence[Completion], first_index: int
) -> list[dict[str, Any]]:
    """The unverified sample records of one problem's new completions, numbered from `first_index`.

    Returns:
        `list[dict]`: one record per completion, in order: `benchmark`, `problem_id`, `sample_index`, `prompt_sha` (of
        the rendered `prompt`), `completion`, `num_tokens`, `finish_reason`, and `reward` and `correct` set to `None`.
    """
    return [
        {
            "benchmark": benchmark,
            "problem_id": problem_id,
            "sample_index": first_index + offset,
            "prompt_sha": prompt_sha(prompt),
            "completion": completion.text,
            "num_tokens": completion.num_tokens,
            "finish_reason": completion.finish_reason,
            "reward": None,
            "correct": None,
        }
        for offset, completion in enumerate(completions)
    ]


def _generate_benchmark(
    name: str,
    problems: list[Problem],
    rendered: list[str],
    stored: dict[str, list[dict]],
    missing: dict[str, int],
    engine: GenerationEngine,
    templated: bool,
    config: EvalConfig,
    throughput: progress.Throughput,
) -> None:
    """Generate the missing samples of one benchmark, appending them to its JSONL file chunk by chunk; the progress
    bar moves as the engine reports parts of a chunk done (at the end of the chunk for engines that do not)."""
    path = Path(config.output_dir) / "samples" / f"{name}.jsonl"
    sampling = config.sampling
    extra = {"progress": throughput} if _takes_progress(engine) else {}
    for count, items in group_by_missing(problems, rendered, missing).items():
        for start in range(0, len(items), max(1, config.chunk_size)):
            chunk = items[start : start + config.chunk_size]
            prompt_ids = tokenize_prompts(engine.tokenizer, [text for _, text in chunk], templated)
            seed = call_seed(config.seed, name, chunk[0][0].id, config.num_generations - count)
            reported = throughput.samples
            outputs = engine.generate(prompt_ids, count, sampling, seed=seed, **extra)
            reported = throughput.samples - reported
            if len(outputs) != len(chunk) or any(len(o) != count for o in outputs):
                raise RuntimeError(f"The {engine.name} engine returned the wrong number of samples.")
            new_records = []
            for (problem, text), completions in zip(chunk, outputs):
                records = stored.setdefault(problem.id, [])
                first_index = max((r["sample_index"] for r in records), default=-1) + 1
                fresh = sample_records(name, problem.id, text, completions, first_index)
                records.extend(fresh)
                new_records.extend(fresh)
            with path.open("a", encoding="utf-8") as handle:
                for record in new_records:
                    handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            if reported < len(new_records):  # an engine that does not report its progress, or not all of it
                tokens = sum(r["num_tokens"] for r in new_records) if reported == 0 else 0
                throughput(len(new_records) - reported, tokens)
