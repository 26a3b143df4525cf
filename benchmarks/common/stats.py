# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The statistics of the benchmarks' reports: a mean and standard deviation over seeds (`mean_std`), and paired
comparisons over a few seeds: Student-t intervals and the power of a paired design.

With 4 to 12 seeds a percentile bootstrap of the mean difference is too narrow (its intervals miss the true mean far
more often than 5% of the time); the t interval `mean +- t_{n-1, 0.975} s / sqrt(n)` is exact for normal differences.
The difference that `n` seeds detect at 80% power and the 5% level (two-sided) is
`(t_{n-1, 0.975} + t_{n-1, 0.80}) s / sqrt(n)`.

The t interval assumes the differences are normal; a seed that falls back near the base model in one arm and not in
the other makes them heavy-tailed. So each comparison also carries the exact sign-flip p-value (`sign_flip_p`): under
"the two arms are exchangeable on every seed" each difference is as likely negated, and the p-value is the share of
the `2^n` sign patterns whose mean difference is at least as far from 0 as the observed one. It assumes only that
symmetry. The report's rule for "separated" stays the t interval, as planned; the p-value is a check of it.

Where one comparison is read several ways (GRPO against SR-PPO at equal updates, completions and seconds), `holm`
adjusts their p-values together, so that one of three readings below 0.05 is not taken for more than it is.
"""

import math

import numpy as np

# Quantiles of Student's t with `df` degrees of freedom (index df - 1), df = 1 .. 30; the normal's beyond.
T_975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
    2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
T_80 = (
    1.376, 1.061, 0.978, 0.941, 0.920, 0.906, 0.896, 0.889, 0.883, 0.879, 0.876, 0.873, 0.870, 0.868, 0.866,
    0.865, 0.863, 0.862, 0.861, 0.860, 0.859, 0.858, 0.858, 0.857, 0.856, 0.856, 0.855, 0.855, 0.854, 0.854,
)  # fmt: skip
T_95 = (
    6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812, 1.796, 1.782, 1.771, 1.761, 1.753,
    1.746, 1.740, 1.734, 1.729, 1.725, 1.721, 1.717, 1.714, 1.711, 1.708, 1.706, 1.703, 1.701, 1.699, 1.697,
)  # fmt: skip
NORMAL_975, NORMAL_95, NORMAL_80 = 1.960, 1.645, 0.842


def t_quantile(df: int, level: float) -> float:
    """Student's t quantile at `level` (0.975, 0.95 or 0.80) with `df >= 1` degrees of freedom."""
    if df < 1:
        raise ValueError(f"t_quantile needs at least 1 degree of freedom, got {df}")
    table, normal = {0.975: (T_975, NORMAL_975), 0.95: (T_95, NORMAL_95), 0.80: (T_80, NORMAL_80)}[level]
    return table[df - 1] if df <= len(table) else normal


def paired_t(values: list, reference: list, level: float = 0.975) -> dict:
    """Mean of the per-seed differences `values[i] - reference[i]` and its two-sided t interval, 95% (`level` 0.975,
    the upper quantile) or 90% (0.95); a seed missing on either side (`None` or not finite) is left out. With fewer
    than 2 seeds the interval is NaN (none can be drawn)."""
    diffs = np.array(
        [v - r for v, r in zip(values, reference, strict=True) if _finite(v) and _finite(r)], dtype=np.float64
    )
    out = {"seeds": int(diffs.size), "differences": diffs.tolist(), "low": float("nan"), "high": float("nan")}
    out["mean"] = float(diffs.mean()) if diffs.size else float("nan")
    out["p_sign_flip"] = sign_flip_p(diffs) if 0 < diffs.size <= MAX_SIGN_FLIP_SEEDS else float("nan")
    if diffs.size >= 2:
        half = t_quantile(diffs.size - 1, level) * float(diffs.std(ddof=1)) / math.sqrt(diffs.size)
        out["low"], out["high"] = out["mean"] - half, out["mean"] + half
    return out


MAX_SIGN_FLIP_SEEDS = 16  # 2^16 sign patterns, enumerated exactly


def sign_flip_p(differences) -> float:
    """Exact two-sided p-value of the mean of paired `differences` (n,) under sign symmetry: the share of the `2^n`
    patterns of signs whose mean |sum_i s_i d_i| / n reaches the observed |mean| (ties count, as in a permutation
    test: the observed pattern and its negation always count, so p >= 2 / 2^n)."""
    d = np.asarray(differences, dtype=np.float64)  # (n,)
    n = d.size
    if n == 0 or n > MAX_SIGN_FLIP_SEEDS:
        raise ValueError(f"sign_flip_p enumerates 2^n sign patterns for 1 <= n <= {MAX_SIGN_FLIP_SEEDS}, got n = {n}")
    if not np.all(np.isfinite(d)):
        raise ValueError(f"sign_flip_p needs finite differences, got {d.tolist()}: leave out the seeds without one")
    patterns = (np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1  # (2^n, n), bit i of row j
    means = np.abs((1 - 2 * patterns) @ d) / n  # (2^n,)
    observed = abs(float(d.mean()))
    return float(np.mean(means >= observed - 1e-12 * max(1.0, float(np.abs(d).mean()))))  # rounding: ties count


def sign_flip_floor(n: int) -> float:
    """The smallest p-value `sign_flip_p` can give with `n` differences, `2 / 2^n` (1 for n = 1): below 6 seeds it
    cannot reach 0.05."""
    return min(1.0, 2.0 / 2**n)


def holm(p_values: dict) -> dict:
    """Holm's step-down adjustment of `m` p-values tested together: sorted ascending, the i-th (from 1) becomes
    `max_{j <= i} min(1, (m - j + 1) p_(j))`. An adjusted p below 0.05 keeps the chance of any false "separated"
    among the `m` at most 5%, whatever their dependence. NaN p-values are left out (and come back NaN)."""
    finite = sorted((p, name) for name, p in p_values.items() if _finite(p))
    out, running = {name: float("nan") for name in p_values}, 0.0
    for i, (p, name) in enumerate(finite):
        running = max(running, min(1.0, (len(finite) - i) * p))
        out[name] = running
    return out


def excludes_zero(d: dict) -> bool:
    """Whether the interval is drawn and leaves 0 out."""
    return d["low"] > 0 or d["high"] < 0  # False for NaN bounds


def detectable(sd: float, n: int) -> float:
    """The paired difference `n` seeds detect at 80% power and the 5% level, for differences of spread `sd`."""
    return (t_quantile(n - 1, 0.975) + t_quantile(n - 1, 0.80)) * sd / math.sqrt(n)


def pooled_sd(groups: list[list[float]]) -> tuple[float, int]:
    """The standard deviation pooled over groups, each around its own mean, `sqrt(sum (x - mean_g)^2 / sum (n_g -
    1))`, and its degrees of freedom (a group of one value adds none); NaN with none."""
    squares = sum(float(np.sum((np.asarray(g) - np.mean(g)) ** 2)) for g in groups if len(g) > 1)
    dof = sum(len(g) - 1 for g in groups if len(g) > 1)
    return (math.sqrt(squares / dof) if dof else float("nan")), dof


def mean_std(values, single: float = 0.0) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof 1) over the finite values (`None`, NaN and infinities left out): NaN
    for both with none, and `single` for the deviation of one value (0, or NaN where a report tells one value from a
    spread)."""
    values = [float(v) for v in values if _finite(v)]
    if not values:
        return float("nan"), float("nan")
    return float(np.mean(values)), float(np.std(values, ddof=1)) if len(values) > 1 else single


def _finite(x) -> bool:
    return x is not None and math.isfinite(x)
