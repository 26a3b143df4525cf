# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Progress bars of an evaluation run: one for generation (with its throughput) and one for verification."""

from __future__ import annotations

import time

__all__ = ["Throughput", "progress_bar"]


def progress_bar(total: int, desc: str, enabled: bool, unit: str):
    """A tqdm bar of `total` items named `desc` (hidden when `enabled` is False), usable as a context manager."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, disable=not enabled, dynamic_ncols=True)


class Throughput:
    """Moves the generation bar as samples are generated and shows the rate since generation began (completions/s
    and tokens/s); called by an engine with `(samples, tokens)` as parts of a call finish."""

    def __init__(self, bar):
        self.bar = bar
        self.start = time.monotonic()
        self.samples = 0
        self.tokens = 0

    def __call__(self, samples: int, tokens: int) -> None:
        self.samples += samples
        self.tokens += tokens
        self.bar.update(samples)
        elapsed = max(time.monotonic() - self.start, 1e-9)
        self.bar.set_postfix_str(f"{self.samples / elapsed:.2f} completions/s, {self.tokens / elapsed:,.0f} tokens/s")
