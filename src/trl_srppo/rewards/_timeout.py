# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Run untrusted-input jobs in worker processes with a hard per-job deadline.

``signal.alarm`` (what math-verify uses for its own timeouts) only works in the main thread of the main interpreter
and cannot interrupt a long C call such as a huge integer power. ``DeadlinePool`` instead keeps a few worker
processes (``python -m <module>``) and talks to them over pipes with one JSON object per line, so no pickle is ever
loaded. A job that is not answered within ``deadline`` seconds has its worker killed (SIGKILL) and replaced; the job
is reported as timed out. The pool works from any thread, and a process forked from the owner starts its own workers.

Inside a worker, ``serve`` runs the handler under a soft ``setitimer`` alarm set a little before the hard deadline,
so most slow jobs are stopped without losing the worker.
"""

from __future__ import annotations

import atexit
import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

TIMEOUT = "timeout"
ERROR = "error"
OK = "ok"

_SRC_ROOT = str(Path(__file__).resolve().parents[2])
_POOLS: weakref.WeakSet[DeadlinePool] = weakref.WeakSet()


class WorkerStartError(RuntimeError):
    """A worker process could not start (for example math-verify is not installed)."""


class _Worker:
    """One worker process and the state of the job it runs."""

    def __init__(self, argv: list[str], env: dict[str, str], startup_timeout: float):
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # no terminal SIGINT; the worker exits on EOF of its stdin instead
            close_fds=True,
        )
        self.fd = self.proc.stdout.fileno()
        os.set_blocking(self.fd, False)
        self.buffer = b""
        self.ready = False
        self.job_index: int | None = None
        self.deadline = time.monotonic() + startup_timeout

    def send(self, payload: dict[str, Any]) -> None:
        """Write one job line to the worker."""
        self.proc.stdin.write(json.dumps(payload, ensure_ascii=True).encode("ascii") + b"\n")
        self.proc.stdin.flush()

    def read_messages(self) -> tuple[list[dict[str, Any]], bool]:
        """Return the complete messages available now, and whether the worker closed its output."""
        eof = False
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            except OSError:
                eof = True
                break
            if not chunk:
                eof = True
                break
            self.buffer += chunk
        messages = []
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            try:
                message = json.loads(line)
            except ValueError:
                message = None
            messages.append(message if isinstance(message, dict) else {"status": ERROR})
        return messages, eof

    def kill(self) -> None:
        """Close the pipes and SIGKILL the process (no-op when it already exited)."""
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        if self.proc.poll() is None:
            try:
                self.proc.kill()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


class DeadlinePool:
    """A small pool of worker processes that answers JSON jobs, each within a hard deadline.

    Args:
        module: importable module run as ``python -m module``; its ``main()`` must call ``serve``.
        num_workers: number of worker processes.
        deadline: seconds a job may run before its worker is killed and the job reported as ``"timeout"``.
        args: extra command-line arguments for the worker.
        startup_timeout: seconds a worker may take to start (import its libraries) and report ready.
    """

    def __init__(
        self,
        module: str,
        num_workers: int,
        deadline: float,
        args: list[str] | None = None,
        startup_timeout: float = 120.0,
    ):
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        if not deadline > 0:
            raise ValueError(f"deadline must be > 0, got {deadline}")
        self.module = module
        self.num_workers = int(num_workers)
        self.deadline = float(deadline)
        self.args = list(args or [])
        self.startup_timeout = float(startup_timeout)
        self.kills = 0
        self._lock = threading.Lock()
        self._workers: list[_Worker] = []
        self._pid = os.getpid()
        _POOLS.add(self)

    def _argv(self) -> list[str]:
        return [sys.executable, "-m", self.module, *self.args]

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        path = env.get("PYTHONPATH")
        env["PYTHONPATH"] = _SRC_ROOT + (os.pathsep + path if path else "")
        env.setdefault("OMP_NUM_THREADS", "1")
        return env

    def _check_fork(self) -> None:
        """Forget the parent's workers when called in a forked child."""
        # A forked child inherits the parent's worker pipes: forget them (the parent still owns those processes).
        if os.getpid() != self._pid:
            self._workers = []
            self._lock = threading.Lock()
            self._pid = os.getpid()

    def _spawn(self) -> _Worker:
        return _Worker(self._argv(), self._env(), self.startup_timeout)

    def run(self, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Run ``jobs`` (JSON-serialisable dicts) and return one result dict per job, in order.

        Each result has ``"status"``: ``"ok"`` (with the worker's fields), ``"timeout"`` or ``"error"`` (the worker
        died or answered garbage).
        """
        self._check_fork()
        if not jobs:
            return []
        with self._lock:
            return self._run_locked(jobs)

    def _run_locked(self, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Dispatch jobs to ready workers and collect answers until every job has a result."""
        results: list[dict[str, Any] | None] = [None] * len(jobs)
        pending = deque(range(len(jobs)))
        selector = selectors.DefaultSelector()
        try:
            while pending or any(w.job_index is not None for w in self._workers):
                self._fill(selector)
                for worker in self._workers:
                    if worker.ready and worker.job_index is None and pending:
                        index = pending.popleft()
                        try:
                            worker.send({"id": index, "job": jobs[index]})
                        except OSError:  # the worker died while idle: replace it and resend the job
                            pending.appendleft(index)
                            self._drop(worker, selector)
                            break
                        worker.job_index = index
                        worker.deadline = time.monotonic() + self.deadline
                now = time.monotonic()
                wait = min((w.deadline for w in self._workers), default=now + 0.05) - now
                for key, _ in selector.select(max(0.0, min(wait, 1.0))):
                    self._receive(key.data, results, selector)
                self._expire(results, selector)
        finally:
            # After an error or an interrupt, a worker still busy with a job of this run must not answer the next.
            for worker in [w for w in self._workers if w.job_index is not None]:
                self._drop(worker, selector)
            selector.close()
        return [r if r is not None else {"status": ERROR} for r in results]

    def _fill(self, selector: selectors.BaseSelector) -> None:
        """Start workers up to ``num_workers`` and register all of them with the selector."""
        while len(self._workers) < self.num_workers:
            worker = self._spawn()
            self._workers.append(worker)
            selector.register(worker.fd, selectors.EVENT_READ, worker)
        for worker in self._workers:
            try:
                selector.get_key(worker.fd)
            except KeyError:
                selector.register(worker.fd, selectors.EVENT_READ, worker)

    def _receive(self, worker: _Worker, results: list, selector: selectors.BaseSelector) -> None:
        """Handle what a worker wrote: its ready message, a job result, or end of file."""
        messages, eof = worker.read_messages()
        for message in messages:
            if not worker.ready:
                if message.get("ready") is True:
                    worker.ready = True
                    worker.deadline = float("inf")
                    continue
                error = message.get("error", "unexpected first message")
                self._drop(worker, selector)
                raise WorkerStartError(f"reward worker `python -m {self.module}` failed to start: {error}")
            if worker.job_index is None:
                continue
            if message.get("id") == worker.job_index:
                message.setdefault("status", OK)
            else:
                message = {"status": ERROR}
            results[worker.job_index] = message
            worker.job_index = None
            worker.deadline = float("inf")
        if eof:
            if not worker.ready:
                self._drop(worker, selector)
                raise WorkerStartError(f"reward worker `python -m {self.module}` exited during start-up")
            if worker.job_index is not None:
                results[worker.job_index] = {"status": ERROR}
            self._drop(worker, selector)

    def _expire(self, results: list, selector: selectors.BaseSelector) -> None:
        """Kill workers past their deadline: a job timeout, or a start-up that took too long."""
        now = time.monotonic()
        for worker in list(self._workers):
            if worker.deadline > now:
                continue
            if not worker.ready:
                self._drop(worker, selector)
                raise WorkerStartError(
                    f"reward worker `python -m {self.module}` did not start within {self.startup_timeout:.0f} s"
                )
            if worker.job_index is not None:
                results[worker.job_index] = {"status": TIMEOUT, "killed": True}
                self.kills += 1
            self._drop(worker, selector)

    def _drop(self, worker: _Worker, selector: selectors.BaseSelector) -> None:
        """Stop a worker and forget it; ``_fill`` starts a replacement."""
        try:
            selector.unregister(worker.fd)
        except (KeyError, ValueError):
            pass
        worker.kill()
        if worker in self._workers:
            self._workers.remove(worker)

    def warm_up(self) -> None:
        """Start the workers now and wait until they are ready (otherwise the first ``run`` does it)."""
        self.run([{"ping": True}])

    def close(self) -> None:
        """Stop all worker processes."""
        self._check_fork()
        with self._lock:
            for worker in self._workers:
                worker.kill()
            self._workers = []


@atexit.register
def _close_all_pools() -> None:
    """Stop every pool's workers at interpreter exit."""
    for pool in list(_POOLS):
        try:
            pool.close()
        except Exception:  # best effort at interpreter exit
            pass


class _SoftDeadline(BaseException):
    """Raised by the worker's alarm; a BaseException so library ``except Exception`` blocks do not swallow it."""


def _on_alarm(signum, frame):
    """SIGALRM handler of the worker: abort the running job."""
    raise _SoftDeadline()


def serve(handler: Callable[[dict[str, Any]], dict[str, Any]], soft_timeout: float, setup: Callable | None = None):
    """Worker main loop: read one JSON job per line from stdin, write one JSON result per line to stdout.

    ``setup`` runs first (imports); its failure is reported to the pool instead of the ready message. Each job runs
    under a ``soft_timeout`` alarm; a job stopped by it is answered ``{"status": "timeout"}``. A job that raises is
    answered ``{"status": "error"}``. The loop ends when stdin closes (the owning process went away).
    """
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout = sys.stderr  # stray prints from libraries must not corrupt the protocol
    stdin = sys.stdin.buffer

    def reply(payload: dict[str, Any]) -> None:
        out.write(json.dumps(payload, ensure_ascii=True).encode("ascii") + b"\n")
        out.flush()

    try:
        if setup is not None:
            setup()
    except Exception as exc:  # reported to the parent, which raises it
        reply({"ready": False, "error": f"{type(exc).__name__}: {exc}"})
        return
    signal.signal(signal.SIGALRM, _on_alarm)
    reply({"ready": True})
    for line in stdin:
        try:
            request = json.loads(line)
            job_id = request["id"]
            job = request["job"]
        except (ValueError, KeyError, TypeError):
            reply({"status": ERROR})
            continue
        try:
            signal.setitimer(signal.ITIMER_REAL, soft_timeout)
            try:
                result = {} if job.get("ping") else handler(job)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            payload = {"id": job_id, "status": OK, **result}
        except _SoftDeadline:
            payload = {"id": job_id, "status": TIMEOUT}
        except Exception:  # any failure (RecursionError, MemoryError, ...) scores the job as an error
            payload = {"id": job_id, "status": ERROR}
        reply(payload)


def _diagnostic_handler(job: dict[str, Any]) -> dict[str, Any]:
    """Handler of ``python -m trl_srppo.rewards._timeout``, used to test the pool: echo, sleep or crash."""
    if job.get("block_alarm"):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})  # stands in for a long, uninterruptible C call
    if job.get("sleep"):
        time.sleep(float(job["sleep"]))
    if job.get("crash"):
        os._exit(3)
    return {"echo": job.get("value")}


def main() -> None:
    """Serve the diagnostic handler (``--soft-timeout SECONDS``)."""
    import argparse

    parser = argparse.ArgumentParser(description=_diagnostic_handler.__doc__)
    parser.add_argument("--soft-timeout", type=float, default=60.0)
    serve(_diagnostic_handler, parser.parse_args().soft_timeout)


if __name__ == "__main__":
    main()
