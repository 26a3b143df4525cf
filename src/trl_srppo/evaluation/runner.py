# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Run a pass@k evaluation: load problems, generate the missing samples, verify them, and write the report.

Layout of the output folder:

```
<output_dir>/
    run_config.json           settings of the run; the generation settings must match to reuse stored samples
    problems/<bench>.jsonl    each problem's id, rendered prompt and verifier columns
    samples/<bench>.jsonl     every sample: problem_id, sample_index, completion, num_tokens, finish_reason, reward,
                              correct (appended as generation goes, so an interrupted run resumes where it stopped)
    summary.json              pass@k per benchmark, plus per-problem counts (see `report.py`)
    results.md                markdown table of pass@k
    pass_at_k.png             pass@k against k, one panel per benchmark
```

Re-running with the same folder reuses the stored samples and only generates what is missing (more problems, or a
larger `n`); with a smaller `n` the first `n` samples of each problem are scored. Samples without a verdict (a run
stopped during scoring) are scored on the next run; `rescore=True` re-verifies all of them (after a verifier change).
"""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..tasks import CORRECT_THRESHOLD, is_correct
from .benchmarks import Benchmark, Problem, get_benchmark
from .engines import GenerationEngine, SamplingConfig, select_engine

__all__ = [
    "CORRECT_THRESHOLD",
    "EvalConfig",
    "build_engine",
    "default_ks",
    "evaluate",
    "render_prompt",
    "score_completions",
    "tokenize_prompts",
]

RUN_CONFIG = "run_config.json"


@dataclass
class EvalConfig:
    """
    Settings of a pass@k evaluation (the options of `trl-srppo eval`).

    Args:
        model (`str`):
            Hub id, local model folder, training output folder, or LoRA adapter folder (see
            [`~evaluation.models.resolve_model`]).
        benchmarks (`list[str]`):
            Registered benchmark names (see [`~evaluation.benchmarks.list_benchmarks`]).
        output_dir (`str`):
            Folder of the samples and reports; reused (resumed) when it already holds samples.
        n (`int`, *optional*, defaults to `16`):
            Samples per problem.
        ks (`list[int]` or `None`, *optional*):
            Values of k to report; each at most `n`. Defaults to the powers of two up to `n` (and `n` itself).
        temperature (`float`, *optional*, defaults to `0.6`):
            Sampling temperature.
        top_p (`float`, *optional*, defaults to `0.95`):
            Nucleus sampling mass.
        top_k (`int`, *optional*, defaults to `-1`):
            Top-k sampling, `-1` to disable.
        max_new_tokens (`int`, *optional*, defaults to `4096`):
            Maximum completion length in tokens.
        seed (`int`, *optional*, defaults to `0`):
            Base seed of the sampling.
        use_chat_template (`bool`, *optional*, defaults to `True`):
            Wrap prompts with the tokenizer's chat template (plain text when the tokenizer has none).
        chat_template_kwargs (`dict`, *optional*):
            Extra variables of the chat template, e.g. `{"enable_thinking": False}` for Qwen3.
        system_prompt (`str` or `None`, *optional*):
            System message prepended to every prompt.
        data_dir (`str` or `None`, *optional*):
            Folder searched for the benchmarks' local files (e.g. `../shared/data`); the Hub is used for the others.
        data_files (`dict[str, str]`, *optional*):
            Benchmark name -> local file or Hub dataset name, overriding `data_dir` and the registry's Hub name.
        max_problems (`int` or `None`, *optional*):
            Evaluate only the first `max_problems` problems of each benchmark.
        engine (`str`, *optional*, defaults to `"auto"`):
            `"auto"`, `"vllm"` or `"transformers"`.
        batch_size (`int`, *optional*, defaults to `64`):
            Transformers engine: maximum sequences per `generate` call.
        chunk_size (`int`, *optional*, defaults to `32`):
            Problems per engine call; samples are written to disk after each chunk.
        dtype (`str`, *optional*, defaults to `"auto"`):
            Weight dtype (`auto`, `float32`, `bfloat16`, `float16`).
        device (`str`, *optional*, defaults to `"auto"`):
            Transformers engine device.
        revision (`str` or `None`, *optional*):
            Hub revision of the model.
        trust_remote_code (`bool`, *optional*, defaults to `False`):
            Allow custom code from the Hub.
        tensor_parallel_size (`int`, *optional*, defaults to `1`):
            vLLM: number of GPUs.
        gpu_memory_utilization (`float`, *optional*, defaults to `0.9`):
            vLLM: fraction of GPU memory to use.
        max_model_len (`int` or `None`, *optional*):
            vLLM: context length.
        rescore (`bool`, *optional*, defaults to `False`):
            Re-verify every stored sample.
        overwrite (`bool`, *optional*, defaults to `False`):
            Delete stored samples whose generation settings differ from this run's instead of refusing to run.
        label (`str` or `None`, *optional*):
            Name of the model in tables and plots; defaults to the model folder's or Hub id's last part.
        plot (`bool`, *optional*, defaults to `True`):
            Write `pass_at_k.png`.
        progress (`bool`, *optional*, defaults to `True`):
            Show progress bars.
    """

    model: str
    benchmarks: list[str]
    output_dir: str
    n: int = 16
    ks: list[int] | None = None
    temperature: float = 0.6
    top_p: float = 0.95
    top_k: int = -1
    max_new_tokens: int = 4096
    seed: int = 0
    use_chat_template: bool = True
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    system_prompt: str | None = None
    data_dir: str | None = None
    data_files: dict[str, str] = field(default_factory=dict)
    max_problems: int | None = None
    engine: str = "auto"
    batch_size: int = 64
    chunk_size: int = 32
    dtype: str = "auto"
    device: str = "auto"
    revision: str | None = None
    trust_remote_code: bool = False
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None
    rescore: bool = False
    overwrite: bool = False
    label: str | None = None
    plot: bool = True
    progress: bool = True

    def __post_init__(self):
        if self.n < 1:
            raise ValueError(f"n must be at least 1, got {self.n}.")
        self.ks = sorted(set(self.ks)) if self.ks else default_ks(self.n)
        bad = [k for k in self.ks if k < 1 or k > self.n]
        if bad:
            raise ValueError(f"Every k must be in [1, n={self.n}] (pass@k needs k <= n samples); got {bad}.")
        if not self.benchmarks:
            raise ValueError("No benchmark given.")
        for name in self.benchmarks:
            get_benchmark(name)  # fail early, with the list of registered names
        unknown = sorted(set(self.data_files) - set(self.benchmarks))
        if unknown:
            raise ValueError(f"data_files names benchmarks that are not evaluated: {unknown}.")

    @property
    def sampling(self) -> SamplingConfig:
        return SamplingConfig(
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            max_new_tokens=self.max_new_tokens,
            seed=self.seed,
        )

    def generation_settings(self) -> dict[str, Any]:
        """The settings that samples depend on: stored samples are reused only when these match."""
        return {
            "model": self.model,
            "revision": self.revision,
            "sampling": self.sampling.to_dict(),
            "use_chat_template": self.use_chat_template,
            "chat_template_kwargs": dict(self.chat_template_kwargs),
            "system_prompt": self.system_prompt,
        }


def default_ks(n: int) -> list[int]:
    """The powers of two up to `n`, plus `n`."""
    ks = [1 << i for i in range(n.bit_length()) if (1 << i) <= n]
    return sorted(set(ks + [n]))


# ----------------------------------------------------------------------------------------------------------- prompts


def render_prompt(
    tokenizer,
    prompt: str,
    system_prompt: str | None = None,
    use_chat_template: bool = True,
    chat_template_kwargs: dict[str, Any] | None = None,
) -> str:
    """
    The text given to the model for one problem.

    Args:
        tokenizer (`transformers.PreTrainedTokenizerBase`):
            The model's tokenizer.
        prompt (`str`):
            The user message.
        system_prompt (`str` or `None`, *optional*):
            System message.
        use_chat_template (`bool`, *optional*, defaults to `True`):
            Apply the tokenizer's chat template (with the generation prompt) when it has one.
        chat_template_kwargs (`dict` or `None`, *optional*):
            Extra template variables, e.g. `{"enable_thinking": False}`.

    Returns:
        `str`: the rendered prompt.
    """
    if use_chat_template and getattr(tokenizer, "chat_template", None):
        messages = [{"role": "user", "content": prompt}]
        if system_prompt:
            messages.insert(0, {"role": "system", "content": system_prompt})
        return tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True, **(chat_template_kwargs or {})
        )
    return f"{system_prompt}\n\n{prompt}" if system_prompt else prompt


def tokenize_prompts(tokenizer, texts: Sequence[str], chat_template_applied: bool) -> list[list[int]]:
    """
    Token ids of rendered prompts. A chat template already writes the special tokens it needs (BOS included), so they
    are only added by the tokenizer for plain-text prompts.
    """
    encoded = tokenizer(list(texts), add_special_tokens=not chat_template_applied)
    return [list(ids) for ids in encoded["input_ids"]]


def uses_chat_template(tokenizer, use_chat_template: bool) -> bool:
    return bool(use_chat_template and getattr(tokenizer, "chat_template", None))


# ----------------------------------------------------------------------------------------------------------- scoring


def score_completions(
    benchmark: Benchmark,
    prompts: Sequence[str],
    completions: Sequence[str],
    columns: Sequence[dict[str, Any]],
    reward_func: Callable | None = None,
) -> list[float | None]:
    """
    Verify completions with the benchmark's task (see [`~trl_srppo.tasks.Task.score`]).

    Args:
        benchmark ([`Benchmark`]):
            The benchmark.
        prompts (sequence of `str`):
            The user prompt of each completion.
        completions (sequence of `str`):
            The completions.
        columns (sequence of `dict`):
            The problem's verifier columns, one dict per completion.
        reward_func (`Callable` or `None`, *optional*):
            The verifier, when already looked up.

    Returns:
        `list[float | None]`: one reward per completion (`None` when the verifier abstains).
    """
    return benchmark.task.score(prompts, completions, columns, reward_func=reward_func)


# ----------------------------------------------------------------------------------------------------------- storage


def _prompt_sha(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Read a samples file. A run killed mid-write can leave a partial last line: it is dropped (and the file
    rewritten without it, so that appending goes on from a clean line); that sample is generated again."""
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8")
    records, damaged = [], False
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            damaged = True
    if damaged or (text and not text.endswith("\n")):
        _write_jsonl(path, records)
    return records


def _write_jsonl(path: Path, records: Sequence[dict[str, Any]]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def _check_run_config(output_dir: Path, config: EvalConfig) -> None:
    path = output_dir / RUN_CONFIG
    settings = config.generation_settings()
    if path.is_file():
        stored = json.loads(path.read_text(encoding="utf-8")).get("generation")
        if stored is not None and stored != settings:
            if not config.overwrite:
                changed = sorted(k for k in set(stored) | set(settings) if stored.get(k) != settings.get(k))
                raise ValueError(
                    f"{output_dir} holds samples generated with other settings (differences in: "
                    f"{', '.join(changed)}). Use another output folder, or pass overwrite=True (--overwrite) to "
                    "delete the stored samples."
                )
            for stale in (output_dir / "samples").glob("*.jsonl"):
                stale.unlink()
    output_dir.mkdir(parents=True, exist_ok=True)
    record = {
        "generation": settings,
        "n": config.n,
        "ks": config.ks,
        "benchmarks": list(config.benchmarks),
        "engine": config.engine,
        "max_problems": config.max_problems,
    }
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


# ------------------------------------------------------------------------------------------------------------ engine


def build_engine(config: EvalConfig) -> GenerationEngine:
    """
    Load the model of `config` into the engine it asks for (`auto`: vLLM when importable with CUDA, else
    transformers).

    Args:
        config ([`EvalConfig`]):
            The evaluation settings.

    Returns:
        [`~evaluation.engines.GenerationEngine`].
    """
    from .models import load_model, load_tokenizer, resolve_model

    source = resolve_model(config.model, revision=config.revision)
    tokenizer = load_tokenizer(source, trust_remote_code=config.trust_remote_code)
    name = select_engine(config.engine)
    adapter = f" + adapter {source.adapter_path}" if source.adapter_path else ""
    print(f"[trl-srppo eval] loading {source.model_path}{adapter} with the {name} engine")
    if name == "vllm":
        from .engines import VLLMEngine

        return VLLMEngine(
            source.model_path,
            tokenizer,
            tokenizer_path=source.tokenizer_path,
            adapter_path=source.adapter_path,
            revision=source.revision,
            dtype=config.dtype,
            tensor_parallel_size=config.tensor_parallel_size,
            gpu_memory_utilization=config.gpu_memory_utilization,
            max_model_len=config.max_model_len,
            trust_remote_code=config.trust_remote_code,
        )
    from .engines import TransformersEngine

    model = load_model(source, dtype=config.dtype, device=config.device, trust_remote_code=config.trust_remote_code)
    return TransformersEngine(model, tokenizer, batch_size=config.batch_size)


# ----------------------------------------------------------------------------------------------------------- running


def _progress(total: int, desc: str, enabled: bool, unit: str):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, disable=not enabled, dynamic_ncols=True)


def call_seed(base_seed: int, benchmark: str, problem_id: str, start_index: int) -> int:
    """Seed of one engine call: depends on the run's seed and on the first (problem, sample index) it generates, so
    that resuming never draws the same random numbers twice for a problem."""
    return (base_seed * 1_000_003 + zlib.crc32(f"{benchmark}/{problem_id}/{start_index}".encode())) % (2**31 - 1)


def evaluate(
    config: EvalConfig,
    engine: GenerationEngine | None = None,
    engine_factory: Callable[[EvalConfig], GenerationEngine] | None = None,
) -> dict[str, Any]:
    """
    Run a pass@k evaluation and write its outputs to `config.output_dir`.

    Args:
        config ([`EvalConfig`]):
            The settings.
        engine ([`~evaluation.engines.GenerationEngine`] or `None`, *optional*):
            An engine already built (e.g. around a model in memory). Its `tokenizer` renders the prompts.
        engine_factory (`Callable[[EvalConfig], GenerationEngine]` or `None`, *optional*):
            Builds the engine when `engine` is not given; defaults to [`build_engine`]. Called only when samples are
            missing, so re-scoring a finished run does not load the model.

    Returns:
        `dict`: the summary (also written to `summary.json`).
    """
    from ..rewards import get_reward_func
    from .report import build_summary, write_reports

    output_dir = Path(config.output_dir)
    benchmarks = {name: get_benchmark(name) for name in config.benchmarks}
    problems: dict[str, list[Problem]] = {
        name: bench.load(
            source=config.data_files.get(name), data_dir=config.data_dir, max_problems=config.max_problems
        )
        for name, bench in benchmarks.items()
    }
    reward_funcs = {name: get_reward_func(bench.verifier) for name, bench in benchmarks.items()}  # fail early
    _check_run_config(output_dir, config)
    (output_dir / "samples").mkdir(exist_ok=True)
    (output_dir / "problems").mkdir(exist_ok=True)

    # Stored samples, per benchmark and problem id.
    stored: dict[str, dict[str, list[dict]]] = {}
    for name in benchmarks:
        by_problem: dict[str, list[dict]] = {}
        for record in _read_jsonl(output_dir / "samples" / f"{name}.jsonl"):
            by_problem.setdefault(record["problem_id"], []).append(record)
        stored[name] = by_problem
    missing = {
        name: {p.id: max(0, config.n - len(stored[name].get(p.id, []))) for p in problems[name]} for name in benchmarks
    }
    total_missing = sum(sum(m.values()) for m in missing.values())

    print(f"[trl-srppo eval] {config.model}: {len(benchmarks)} benchmark(s), n={config.n}, k={config.ks}")
    for name in benchmarks:
        count = len(problems[name])
        todo = sum(missing[name].values())
        print(
            f"  {name:<16} {count:>5} problems x {config.n} samples = {count * config.n:>7} "
            f"({count * config.n - todo} stored, {todo} to generate)"
        )
    if total_missing:
        print(
            f"  total: {total_missing} samples to generate, up to {config.max_new_tokens} new tokens each "
            f"(at most {total_missing * config.max_new_tokens:,} tokens)"
        )

    built_here = False
    if total_missing:
        if engine is None:
            engine = (engine_factory or build_engine)(config)
            built_here = True
        tokenizer = engine.tokenizer
        templated = uses_chat_template(tokenizer, config.use_chat_template)
        if config.use_chat_template and not templated:
            print("[trl-srppo eval] the tokenizer has no chat template: prompts are given as plain text.")
        rendered = {
            name: [
                render_prompt(tokenizer, p.prompt, config.system_prompt, templated, config.chat_template_kwargs)
                for p in problems[name]
            ]
            for name in benchmarks
        }
        for name in benchmarks:
            _check_prompts(name, problems[name], rendered[name], stored[name])
            _write_jsonl(
                output_dir / "problems" / f"{name}.jsonl",
                [
                    {"problem_id": p.id, "prompt": text, "columns": p.columns}
                    for p, text in zip(problems[name], rendered[name])
                ],
            )
        with _progress(total_missing, "generating", config.progress, "sample") as bar:
            for name in benchmarks:
                _generate_benchmark(
                    name, problems[name], rendered[name], stored[name], missing[name], engine, templated, config, bar
                )
        if built_here:
            engine.close()  # free the GPU before verification

    # Scoring: every sample without a verdict (all of them with rescore).
    to_score = {
        name: [
            r
            for problem in problems[name]
            for r in stored[name].get(problem.id, [])
            if config.rescore or r.get("correct") is None
        ]
        for name in benchmarks
    }
    total_to_score = sum(len(v) for v in to_score.values())
    if total_to_score:
        with _progress(total_to_score, "verifying", config.progress, "sample") as bar:
            for name, bench in benchmarks.items():
                columns_by_id = {p.id: p.columns for p in problems[name]}
                prompts_by_id = {p.id: p.prompt for p in problems[name]}
                records = to_score[name]
                for start in range(0, len(records), 64):
                    batch = records[start : start + 64]
                    rewards = score_completions(
                        bench,
                        [prompts_by_id[r["problem_id"]] for r in batch],
                        [r["completion"] for r in batch],
                        [columns_by_id[r["problem_id"]] for r in batch],
                        reward_func=reward_funcs[name],
                    )
                    for record, reward in zip(batch, rewards):
                        record["reward"] = reward
                        record["correct"] = is_correct(reward)
                    bar.update(len(batch))
                if records:
                    order = {p.id: i for i, p in enumerate(problems[name])}
                    all_records = [r for rs in stored[name].values() for r in rs]
                    all_records.sort(key=lambda r: (order.get(r["problem_id"], len(order)), r["sample_index"]))
                    _write_jsonl(output_dir / "samples" / f"{name}.jsonl", all_records)

    summary = build_summary(
        config=config,
        problems=problems,
        samples={name: stored[name] for name in benchmarks},
        engine_name=engine.name if engine is not None else None,
    )
    write_reports(summary, output_dir, plot=config.plot)
    return summary


def _check_prompts(name: str, problems: list[Problem], rendered: list[str], stored: dict[str, list[dict]]) -> None:
    """Refuse to mix samples of a prompt with samples of a different one (edited template, other tokenizer)."""
    for problem, text in zip(problems, rendered):
        shas = {r.get("prompt_sha") for r in stored.get(problem.id, [])} - {None}
        if shas and shas != {_prompt_sha(text)}:
            raise ValueError(
                f"Benchmark {name!r}, problem {problem.id!r}: the stored samples were generated from another prompt "
                "(the prompt template or the chat template changed). Use another output folder."
            )


def _generate_benchmark(
    name: str,
    problems: list[Problem],
    rendered: list[str],
    stored: dict[str, list[dict]],
    missing: dict[str, int],
    engine: GenerationEngine,
    templated: bool,
    config: EvalConfig,
    bar,
) -> None:
    """Generate the missing samples of one benchmark, appending them to its JSONL file chunk by chunk."""
    path = Path(config.output_dir) / "samples" / f"{name}.jsonl"
    todo = [(p, text) for p, text in zip(problems, rendered) if missing[p.id] > 0]
    sampling = config.sampling
    # Problems missing the same number of samples go to the engine together (usually all of them).
    groups: dict[int, list[tuple[Problem, str]]] = {}
    for problem, text in todo:
        groups.setdefault(missing[problem.id], []).append((problem, text))
    for count, items in groups.items():
        for start in range(0, len(items), max(1, config.chunk_size)):
            chunk = items[start : start + config.chunk_size]
            prompt_ids = tokenize_prompts(engine.tokenizer, [text for _, text in chunk], templated)
            first = chunk[0][0]
            seed = call_seed(config.seed, name, first.id, config.n - count)
            outputs = engine.generate(prompt_ids, count, sampling, seed=seed)
            if len(outputs) != len(chunk) or any(len(o) != count for o in outputs):
                raise RuntimeError(f"The {engine.name} engine returned the wrong number of samples.")
            new_records = []
            for (problem, text), completions in zip(chunk, outputs):
                records = stored.setdefault(problem.id, [])
                next_index = max((r["sample_index"] for r in records), default=-1) + 1
                for offset, completion in enumerate(completions):
                    record = {
                        "benchmark": name,
                        "problem_id": problem.id,
                        "sample_index": next_index + offset,
                        "prompt_sha": _prompt_sha(text),
                        "completion": completion.text,
                        "num_tokens": completion.num_tokens,
                        "finish_reason": completion.finish_reason,
                        "reward": None,
                        "correct": None,
                    }
                    records.append(record)
                    new_records.append(record)
            with path.open("a", encoding="utf-8") as handle:
                for record in new_records:
                    handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            bar.update(len(new_records))


def config_to_dict(config: EvalConfig) -> dict[str, Any]:
    return asdict(config)
