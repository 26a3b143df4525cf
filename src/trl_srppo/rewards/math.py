# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The ``math`` reward: the last boxed answer of a completion checked against the gold answer with math-verify.

Per completion:

1. The gold answer (column ``answer``) missing or empty gives None; so does a gold answer that math-verify cannot
   parse into a mathematical object (the example cannot be scored).
2. The final answer is the content of the last ``\\boxed{...}`` / ``\\fbox{...}`` with balanced braces. No boxed
   answer, an answer over ``max_answer_chars`` characters or nested deeper than ``max_brace_depth`` gives 0.0.
3. Fast path: equal after light normalisation, or both plain integers (``"007"`` equals ``"7"``), decides at once.
4. Otherwise math-verify parses both and compares them, in a worker process with a hard per-answer deadline
   (``timeout`` seconds, default 3). A timed-out or crashed comparison scores 0.0 and is counted; the counts are
   read with ``stats()`` / ``timeout_count()``, and each call logs ``rewards/math/timeouts`` through TRL's
   ``log_metric`` keyword when it is given.

Nothing from a completion is evaluated in the training process: math-verify (and sympy) only run in the workers.
``configure`` changes the timeout, the number of workers and the limits; environment variables
``TRL_SRPPO_MATH_TIMEOUT`` and ``TRL_SRPPO_MATH_WORKERS`` set the defaults.
"""

from __future__ import annotations

import os
import re
import threading
from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import Any

from trl_srppo.rewards._registry import register_reward
from trl_srppo.rewards._text import column, completion_text, last_boxed
from trl_srppo.rewards._timeout import OK, TIMEOUT, DeadlinePool

__all__ = [
    "MathConfig",
    "MathRewardStats",
    "configure",
    "extract_answer",
    "math_reward",
    "reset_stats",
    "score_answers",
    "shutdown",
    "stats",
    "timeout_count",
    "warm_up",
]

_WORKER_MODULE = "trl_srppo.rewards._math_worker"


def _usable_cpus() -> int:
    """CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclass
class MathConfig:
    """Settings of the ``math`` reward (see ``configure``)."""

    timeout: float = float(os.environ.get("TRL_SRPPO_MATH_TIMEOUT", "3.0"))
    num_workers: int = int(os.environ.get("TRL_SRPPO_MATH_WORKERS", str(min(4, _usable_cpus()))))
    max_answer_chars: int = 1000
    max_brace_depth: int = 20
    memory_limit_mb: int = 4096
    startup_timeout: float = 120.0


@dataclass
class MathRewardStats:
    """Counters since the last ``reset_stats``: answers scored, sent to math-verify, timed out, and so on."""

    completions: int = 0
    no_answer: int = 0
    rejected: int = 0
    fast_path: int = 0
    verified: int = 0
    timeouts: int = 0
    errors: int = 0
    unscorable: int = 0


_config = MathConfig()
_stats = MathRewardStats()
_lock = threading.Lock()
_pool: DeadlinePool | None = None
_GOLD_STATUS: OrderedDict[str, bool] = OrderedDict()
_GOLD_STATUS_SIZE = 65536

_INT = re.compile(r"[+-]?\d+")
_THOUSANDS = re.compile(r"[+-]?\d{1,3}(,\d{3})+")
_THOUSANDS_LATEX = re.compile(r"(?<=\d),\\!\s*(?=\d{3}(?!\d))")
_SPACING = re.compile(r"\\[!,;: ]|\\q?quad|~")
# One ``\s*`` per whitespace run: ``\s*\{?\s*`` would try every split of a long run of spaces (quadratic time).
_DEGREES = re.compile(r"\^\s*(?:\{\s*)?\\circ\s*\}?")
_DELIMS = (("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))


def configure(
    timeout: float | None = None,
    num_workers: int | None = None,
    max_answer_chars: int | None = None,
    max_brace_depth: int | None = None,
    memory_limit_mb: int | None = None,
    startup_timeout: float | None = None,
) -> MathConfig:
    """Change the settings of the ``math`` reward; running workers restart with the new ones. Returns the settings.

    Args:
        timeout: hard limit in seconds for parsing and comparing one answer (the worker is killed after it).
        num_workers: worker processes that check answers in parallel.
        max_answer_chars: longer boxed answers score 0.0 without being parsed.
        max_brace_depth: boxed answers with braces nested deeper score 0.0 without being parsed.
        memory_limit_mb: address space each worker may map beyond what it maps at start, in MiB (0: no cap).
        startup_timeout: seconds a worker may take to import math-verify.
    """
    global _pool
    updates = {
        "timeout": timeout,
        "num_workers": num_workers,
        "max_answer_chars": max_answer_chars,
        "max_brace_depth": max_brace_depth,
        "memory_limit_mb": memory_limit_mb,
        "startup_timeout": startup_timeout,
    }
    with _lock:
        new = MathConfig(**asdict(_config))
        for key, value in updates.items():
            if value is not None:
                setattr(new, key, type(getattr(new, key))(value))
        if not new.timeout > 0 or new.num_workers < 1 or not new.startup_timeout > 0:
            raise ValueError(f"timeout and startup_timeout must be > 0 and num_workers >= 1, got {new}")
        for key, value in asdict(new).items():
            setattr(_config, key, value)
        if _pool is not None:
            _pool.close()
            _pool = None
        return MathConfig(**asdict(_config))


def shutdown() -> None:
    """Stop the worker processes (they restart on the next call)."""
    global _pool
    with _lock:
        if _pool is not None:
            _pool.close()
            _pool = None


def warm_up() -> None:
    """Start the worker processes now (otherwise the first call that needs math-verify starts them)."""
    _get_pool().warm_up()


def stats() -> MathRewardStats:
    """Return a copy of the counters."""
    with _lock:
        return MathRewardStats(**asdict(_stats))


def timeout_count() -> int:
    """Number of answers whose check hit the time limit since the last ``reset_stats``."""
    with _lock:
        return _stats.timeouts


def reset_stats() -> None:
    """Set all counters to zero."""
    global _stats
    with _lock:
        _stats = MathRewardStats()


def _get_pool() -> DeadlinePool:
    """The worker pool, started with the current settings on first use."""
    global _pool
    with _lock:
        if _pool is None:
            soft = max(0.05, 0.8 * _config.timeout)
            _pool = DeadlinePool(
                _WORKER_MODULE,
                num_workers=_config.num_workers,
                deadline=_config.timeout,
                args=["--soft-timeout", f"{soft:.3f}", "--memory-limit-mb", str(_config.memory_limit_mb)],
                startup_timeout=_config.startup_timeout,
            )
        return _pool


def _strip_delimiters(text: str) -> str:
    """Remove surrounding ``$...$``, ``\\(...\\)`` or ``\\[...\\]``."""
    text = text.strip()
    for left, right in _DELIMS:
        if len(text) >= len(left) + len(right) and text.startswith(left) and text.endswith(right):
            text = text[len(left) : len(text) - len(right)].strip()
    return text


def clean_answer(answer: str) -> str:
    """Light clean-up applied to gold and predicted answers before math-verify sees them.

    Strips math delimiters and trailing punctuation, and removes LaTeX thousands separators (``10,\\!080``).
    """
    answer = _strip_delimiters(answer)
    answer = _THOUSANDS_LATEX.sub("", answer)
    return answer.rstrip(" .;,").strip()


def normalize_for_match(answer: str) -> str:
    """Aggressive normalisation used only to detect answers that are the same string up to formatting."""
    answer = clean_answer(answer)
    answer = _SPACING.sub("", answer)
    answer = answer.replace("\\left", "").replace("\\right", "")
    answer = answer.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    answer = _DEGREES.sub("", answer)
    answer = answer.replace("\\%", "").replace("%", "").replace("\\$", "")
    answer = "".join(answer.split())
    if _THOUSANDS.fullmatch(answer):
        answer = answer.replace(",", "")
    return answer


def _brace_depth(text: str) -> int:
    """Deepest brace nesting of ``text``."""
    depth = deepest = 0
    for char in text:
        if char == "{":
            depth += 1
            deepest = max(deepest, depth)
        elif char == "}":
            depth -= 1
    return deepest


def _fast_path(gold: str, pred: str) -> float | None:
    """1.0 / 0.0 when the answers can be decided without math-verify, else None."""
    gold_n, pred_n = normalize_for_match(gold), normalize_for_match(pred)
    if gold_n and gold_n == pred_n:
        return 1.0
    if _INT.fullmatch(gold_n) and _INT.fullmatch(pred_n) and len(pred_n) <= 100 and len(gold_n) <= 100:
        return 1.0 if int(gold_n) == int(pred_n) else 0.0
    return None


def _gold_status(gold: str) -> bool | None:
    """Whether a gold answer is scorable: True for integers, else the cached worker verdict or None."""
    if _INT.fullmatch(normalize_for_match(gold)):
        return True
    with _lock:
        status = _GOLD_STATUS.get(gold)
        if status is not None:
            _GOLD_STATUS.move_to_end(gold)
        return status


def _remember_gold(gold: str, status: bool) -> None:
    """Cache the worker's verdict on a gold answer (bounded LRU)."""
    with _lock:
        _GOLD_STATUS[gold] = status
        _GOLD_STATUS.move_to_end(gold)
        while len(_GOLD_STATUS) > _GOLD_STATUS_SIZE:
            _GOLD_STATUS.popitem(last=False)


def score_answers(golds: list[Any], texts: list[str]) -> tuple[list[float | None], int]:
    """Score completion texts against gold answers; returns the rewards and the number of timeouts."""
    n = len(texts)
    rewards: list[float | None] = [None] * n
    decided: list[float | None] = [None] * n  # reward when the gold answer turns out scorable
    jobs: list[dict[str, Any]] = []
    job_owner: list[int | None] = []  # completion index of each job, None for gold-only jobs
    cleaned: list[str | None] = [None] * n
    counts = MathRewardStats(completions=n)
    config = _config

    for i, (gold, text) in enumerate(zip(golds, texts)):
        if gold is None or (isinstance(gold, float) and gold != gold):
            counts.unscorable += 1
            continue
        gold_clean = clean_answer(str(gold))
        if not gold_clean:
            counts.unscorable += 1
            continue
        cleaned[i] = gold_clean
        pred = last_boxed(text)
        if pred is None:
            counts.no_answer += 1
            decided[i] = 0.0
            continue
        pred = clean_answer(pred)
        if not pred or len(pred) > config.max_answer_chars or _brace_depth(pred) > config.max_brace_depth:
            counts.rejected += 1
            decided[i] = 0.0
            continue
        fast = _fast_path(gold_clean, pred)
        if fast is not None:
            counts.fast_path += 1
            decided[i] = fast
            continue
        jobs.append({"gold": gold_clean, "pred": pred})
        job_owner.append(i)

    # Gold answers whose parseability is unknown and that no full job will report on get a gold-only job.
    with_jobs = {jobs[k]["gold"] for k in range(len(jobs))}
    for gold_clean in dict.fromkeys(g for i, g in enumerate(cleaned) if g is not None and decided[i] is not None):
        if gold_clean not in with_jobs and _gold_status(gold_clean) is None:
            jobs.append({"gold": gold_clean, "pred": None})
            job_owner.append(None)
            with_jobs.add(gold_clean)

    results = _get_pool().run(jobs) if jobs else []
    gold_seen: dict[str, bool] = {}
    for job, owner, result in zip(jobs, job_owner, results):
        status = result.get("status")
        if status == OK and isinstance(result.get("gold_ok"), bool):
            gold_seen[job["gold"]] = result["gold_ok"]
            _remember_gold(job["gold"], result["gold_ok"])
        elif status == TIMEOUT:
            counts.timeouts += 1
        else:
            counts.errors += 1
        if owner is not None:
            counts.verified += 1
            if status == OK:
                decided[owner] = None if not result.get("gold_ok") else float(result.get("correct") is True)
            else:
                decided[owner] = 0.0

    for i in range(n):
        gold_clean = cleaned[i]
        if gold_clean is None:
            continue
        status = gold_seen.get(gold_clean, _gold_status(gold_clean))
        if status is False:
            counts.unscorable += 1
            rewards[i] = None
        else:
            # Unknown status only remains when the gold-only check itself failed: score 0.0 rather than guess.
            rewards[i] = decided[i] if decided[i] is not None else 0.0

    with _lock:
        for key, value in asdict(counts).items():
            setattr(_stats, key, getattr(_stats, key) + value)
    return rewards, counts.timeouts


ANSWER_FORMAT = "the final answer in \\boxed{...} (the last box counts), e.g. \\boxed{42}"


def extract_answer(text: str, **columns: Any) -> str | None:
    """The answer the ``math`` reward reads: the content of the last ``\\boxed{...}``, cleaned (see `clean_answer`);
    None when there is no box, or an empty one. Dataset ``columns`` are accepted and unused."""
    boxed = last_boxed(text)
    if boxed is None:
        return None
    return clean_answer(boxed) or None


@register_reward("math", answer_format=ANSWER_FORMAT, extract_answer=extract_answer)
def math_reward(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
    """Reward 1.0 when the last boxed answer equals the ``answer`` column (math-verify), else 0.0.

    None where the gold answer is missing or cannot be parsed. Reads kwargs ``answer`` (one gold string per
    completion) and, when TRL passes it, ``log_metric`` (logs ``rewards/math/timeouts``).
    """
    golds = column(kwargs, "answer", len(completions), "math")
    texts = [completion_text(c) for c in completions]
    rewards, timeouts = score_answers(golds, texts)
    log_metric = kwargs.get("log_metric")
    if callable(log_metric):
        log_metric("rewards/math/timeouts", float(timeouts))
    return rewards
