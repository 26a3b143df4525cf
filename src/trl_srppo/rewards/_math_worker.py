# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Worker process for the ``math`` reward: parses and compares answers with math-verify.

Started by ``trl_srppo.rewards.math`` through ``DeadlinePool`` as ``python -m trl_srppo.rewards._math_worker``.
math-verify's own signal-based timeouts are switched off here; the pool's soft alarm and hard kill bound each job.
A job is ``{"gold": str, "pred": str | None}``; the answer is ``{"gold_ok": bool, "correct": bool | None}`` where
``gold_ok`` says whether the gold answer parsed to a mathematical object and ``correct`` is None for gold-only jobs.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from trl_srppo.rewards._timeout import serve

_GOLD_CACHE: dict[str, tuple[list, bool]] = {}
_GOLD_CACHE_SIZE = 4096
_mv: Any = None


def _limit_memory(extra_mb: int) -> None:
    """Cap the address space at what is mapped now plus ``extra_mb`` (a huge intermediate number fails fast)."""
    import resource

    try:
        with open("/proc/self/statm") as handle:
            mapped = int(handle.read().split()[0]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return  # not Linux: no cap, the pool's deadline still bounds the time
    limit = mapped + extra_mb * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard == resource.RLIM_INFINITY or hard > limit:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _setup(memory_limit_mb: int) -> None:
    """Cap the memory, import math-verify quietly and run one check so the first real job is fast."""
    global _mv
    if memory_limit_mb > 0:
        _limit_memory(memory_limit_mb)
    for name in ("math_verify", "latex2sympy2_extended"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    import math_verify
    import math_verify.grader
    import math_verify.parser

    # The pool bounds the time; tell math-verify not to warn that its own timeout is off.
    math_verify.parser.TIMEOUT_WARNING_SHOWN = True
    math_verify.grader.TIMEOUT_WARNING_SHOWN = True
    _mv = math_verify
    _handle({"gold": "1", "pred": "1"})  # import the lazy parts of sympy and latex2sympy before reporting ready


def _is_math_object(value: Any) -> bool:
    """Whether math-verify turned the answer into a sympy object (not just a fallback string)."""
    from sympy import Basic
    from sympy.matrices import MatrixBase

    return isinstance(value, (Basic, MatrixBase))


def _parse_gold(gold: str) -> tuple[list, bool]:
    """Parse a gold answer once per worker; return the parse and whether it is a mathematical object."""
    cached = _GOLD_CACHE.get(gold)
    if cached is not None:
        return cached
    parsed = _mv.parse("\\boxed{" + gold + "}", parsing_timeout=None)
    entry = (parsed, any(_is_math_object(item) for item in parsed))
    if len(_GOLD_CACHE) >= _GOLD_CACHE_SIZE:
        _GOLD_CACHE.clear()
    _GOLD_CACHE[gold] = entry
    return entry


def _handle(job: dict[str, Any]) -> dict[str, Any]:
    """Answer one job: parse the gold answer and, unless it is a gold-only job, compare the prediction."""
    gold_parsed, gold_ok = _parse_gold(str(job["gold"]))
    pred = job.get("pred")
    if pred is None or not gold_ok:
        return {"gold_ok": gold_ok, "correct": None}
    pred_parsed = _mv.parse("\\boxed{" + str(pred) + "}", parsing_timeout=None)
    correct = bool(pred_parsed) and bool(_mv.verify(gold_parsed, pred_parsed, timeout_seconds=None))
    return {"gold_ok": True, "correct": correct}


def main() -> None:
    """Parse the worker options and serve jobs until stdin closes."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--soft-timeout", type=float, required=True)
    parser.add_argument("--memory-limit-mb", type=int, default=0)
    options = parser.parse_args()
    serve(_handle, options.soft_timeout, setup=lambda: _setup(options.memory_limit_mb))


if __name__ == "__main__":
    main()
