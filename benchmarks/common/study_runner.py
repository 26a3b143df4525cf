# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The runner the SmolLM2 benches and studies share: a study command's arguments and entry point (`study_parser`,
`run_arguments`, `run_command`), its time limit (`stop_time`) and what its report records of the command
(`study_meta`), a stage's finished runs kept as JSON in its folder (`stage_folder`, `finished`), the jobs still to
train of a list of runs (`pending_jobs`), and the workers that train them until a deadline (`run_all`)."""

import argparse
import datetime
import json
import os
import platform
import signal
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict
from multiprocessing import active_children, get_context

from .runs import REPO_ROOT, cached_result, torch_threads


def study_parser(description: str, stages: tuple[str, ...]) -> argparse.ArgumentParser:
    """A study command's parser with the arguments every study starts with: its `stages` (`report`, the default,
    trains nothing), the toy sizes, the model and the stage's seeds."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stage", choices=stages, default="report")
    parser.add_argument("--smoke", action="store_true", help="toy sizes: the end-to-end test")
    parser.add_argument("--model", default=None, help="a causal LM folder with a chat template (default: SmolLM2)")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="train these seeds of the stage only")
    return parser


def run_arguments(parser: argparse.ArgumentParser, output_dir: str, work_dir: str, stop_help: str, work_help: str):
    """The arguments every study ends with: the workers, the time limit (`stop_help`), the report's folder (default
    `output_dir`) and the trainers' (default `work_dir`, `work_help`)."""
    parser.add_argument("--workers", type=int, default=2, help="runs trained at once (one torch thread each)")
    parser.add_argument("--stop-after", type=float, default=None, help=stop_help)
    parser.add_argument("--output-dir", default=output_dir, help="README.md, results.json and runs/ go here")
    parser.add_argument("--work-dir", default=work_dir, help=work_help)


def run_command(parser: argparse.ArgumentParser, command, argv: list[str] | None) -> int:
    """`command` on the arguments `parser` reads from `argv`, with one torch thread; its exit status."""
    args = parser.parse_args(argv)
    with torch_threads(1):
        return command(args)


def stop_time(stop_after: float | None) -> float | None:
    """The `time.time()` after which no run starts, `stop_after` minutes from now (`None`: no limit)."""
    return None if stop_after is None else time.time() + 60 * stop_after


def study_meta(study, model_path: str, workers: int, rows: dict) -> dict:
    """What a study's report records of its command: the `study` (a dataclass), the model's folder (relative to the
    repository when in it), the date, the machine and its load, the `workers` and the sizes of the splits' `rows`."""
    return {
        "study": asdict(study),
        "model": os.path.relpath(model_path, REPO_ROOT) if model_path.startswith(REPO_ROOT) else model_path,
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.1f}",
        "workers": workers,
        "sizes": {k: len(v) for k, v in rows.items()},
    }


def stage_folder(out_dir: str, stage: str, key: str) -> str:
    """Where a study's `stage` keeps its finished runs: `runs/<stage>-<key>/` under `out_dir`."""
    return os.path.join(out_dir, "runs", f"{stage}-{key}")


def finished(folder: str) -> list[dict]:
    """Every finished run in `folder`, by its file's name (none for a folder not made yet)."""
    if not os.path.isdir(folder):
        return []
    out = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".json"):
            with open(os.path.join(folder, name)) as f:
                out.append(json.load(f))
    return out


def pending_jobs(specs, folder: str, job, file_name=lambda spec: spec.name) -> tuple[list[dict], list[dict]]:
    """(finished results, jobs still to train) for `specs`, each run kept in `folder` as `<file_name(spec)>.json`: a
    finished run is one made with the same spec (`cached_result`); a job is the run's `spec` and `result_path` with
    the fields of its worker that `job(spec, file_name(spec))` gives (which may replace them)."""
    os.makedirs(folder, exist_ok=True)
    done, jobs = [], []
    for spec in specs:
        name = file_name(spec)
        path = os.path.join(folder, f"{name}.json")
        cached = cached_result(path, spec)
        if cached is not None:
            done.append(cached)
        else:
            jobs.append({"spec": asdict(spec), "result_path": path, **job(spec, name)})
    return done, jobs


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)  # stop a study: its runs save a checkpoint where they are and end


def own_process_group() -> None:
    """A worker's initializer: a process group of its own, so that a signal sent to the study's group (a terminal's
    Ctrl-C, `kill -- -PGID`) reaches the study's main process alone, which passes one SIGTERM on (`run_all`). Two
    would end a run at once, without its checkpoint (`trl_srppo.runtime.preemption`)."""
    os.setpgrp()


def run_all(jobs: list[dict], workers: int, run, log=print, deadline: float | None = None) -> list[dict]:
    """`run` (a module-level function: it travels to the workers by name) on every job, `workers` at a time, results
    in the jobs' order. With `deadline` (a `time.time()`), no job starts after it: the runs under way finish, the
    others are left for a later command (the finished runs are cached, so a rerun trains only those).

    A SIGTERM or SIGINT to the study's main process stops it the same way at once: no job starts, and each worker is
    sent one SIGTERM, on which its trainer saves a checkpoint at the end of its step and raises `TrainingPreempted`
    (`save_on_preemption`); the same command resumes those runs. With one worker the run is in this process, whose
    trainer takes the signal itself."""
    from trl_srppo.runtime.preemption import TrainingPreempted

    start = time.perf_counter()
    stopped: list[int] = []

    def open_for_more() -> bool:
        return not stopped and (deadline is None or time.time() < deadline)

    def done(index: int, result: dict) -> None:
        results[index] = result
        log(f"  {result['name']}: done ({time.perf_counter() - start:.0f}s)")

    def preempted(index: int, error: TrainingPreempted) -> None:
        stopped.append(error.code)
        name = jobs[index].get("name") or os.path.basename(jobs[index].get("output_dir", "")) or f"job {index}"
        log(f"  {name}: stopped by {error.signal_name} at update {error.step} ({error.checkpoint})")

    results: list[dict | None] = [None] * len(jobs)
    queue = iter(enumerate(jobs))
    if workers <= 1:
        for index, job in queue:
            if not open_for_more():
                break
            try:
                done(index, run(job))
            except TrainingPreempted as error:
                preempted(index, error)
    else:
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"), initializer=own_process_group)

        def stop(signum, frame) -> None:
            if not stopped:  # one SIGTERM per worker: a second would end its run at once
                stopped.append(signum)
                log(f"  {signal.Signals(signum).name}: no run starts now; those under way stop at a checkpoint")
                for child in active_children():
                    os.kill(child.pid, signal.SIGTERM)

        main = threading.current_thread() is threading.main_thread()  # where Python lets a handler be set
        previous = {signum: signal.signal(signum, stop) for signum in STOP_SIGNALS} if main else {}
        try:
            with pool:
                running = {}

                def start_next() -> None:
                    if open_for_more() and (item := next(queue, None)) is not None:
                        running[pool.submit(run, item[1])] = item[0]

                for _ in range(workers):
                    start_next()
                while running:
                    finished_now, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in finished_now:
                        index = running.pop(future)
                        try:
                            done(index, future.result())
                        except TrainingPreempted as error:
                            preempted(index, error)
                        start_next()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
    left = sum(result is None for result in results)
    if left:
        why = "not finished: stopped by a signal" if stopped else "not started: past the deadline"
        log(f"  {left} of {len(jobs)} runs {why}; the same command trains them later")
    return [result for result in results if result is not None]
