# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Pass@k and Best@k estimators, and their aggregation over problems and seeds.

The pass@k estimator is the unbiased one of Chen et al. (2021): with `n` samples of which `c` are correct,

    pass@k = 1 - C(n - c, k) / C(n, k) = 1 - prod_{i = n - c + 1}^{n} (1 - k / i),

computed here in log space (`log1p` / `expm1`), so that it stays exact to a few ulps for any `n` (no factorials).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

__all__ = [
    "best_at_k",
    "mean_and_std",
    "mean_pass_at_k",
    "pass_at_k",
    "pass_at_k_curve",
]


def _pass_at_k_scalar(n: int, c: int, k: int) -> float:
    if n - c < k:
        # Every subset of k samples contains at least one correct sample.
        return 1.0
    if c == 0:
        return 0.0
    i = np.arange(n - c + 1, n + 1, dtype=np.float64)
    # 1 - prod(1 - k / i) = -expm1(sum(log1p(-k / i))); every term is in (-1, 0] since k <= n - c < i.
    return float(-np.expm1(np.sum(np.log1p(-k / i))))


def _as_int_array(name: str, value) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.kind == "f":
        if not np.all(np.isfinite(array)) or not np.all(array == np.round(array)):
            raise ValueError(f"`{name}` must hold integers, got {value!r}.")
        array = array.astype(np.int64)
    elif array.dtype.kind not in "iub":
        raise ValueError(f"`{name}` must hold integers, got {value!r}.")
    return array.astype(np.int64)


def pass_at_k(n, c, k):
    """
    Unbiased pass@k estimate from `n` samples of which `c` are correct.

    Args:
        n (`int` or array-like of `int`):
            Number of samples drawn for each problem (`n >= 1`).
        c (`int` or array-like of `int`):
            Number of correct samples for each problem (`0 <= c <= n`).
        k (`int` or array-like of `int`):
            Number of attempts (`1 <= k <= n`). `n`, `c` and `k` broadcast against each other like numpy arrays.

    Returns:
        `float` when all three arguments are scalars, otherwise a `numpy.ndarray` of `float64` with the broadcast
        shape: the probability that at least one of `k` samples drawn without replacement from the `n` is correct.

    Raises:
        `ValueError`: if `k > n` (the estimator needs at least `k` samples), `k < 1`, `n < 1` or `c` is not in
        `[0, n]`.

    Example:

    ```python
    >>> pass_at_k(16, 4, 1)
    0.25
    >>> pass_at_k([16, 16], [0, 16], 8)
    array([0., 1.])
    ```
    """
    scalar = np.ndim(n) == 0 and np.ndim(c) == 0 and np.ndim(k) == 0
    n_arr, c_arr, k_arr = np.broadcast_arrays(_as_int_array("n", n), _as_int_array("c", c), _as_int_array("k", k))
    if np.any(n_arr < 1):
        raise ValueError(f"pass@k needs at least one sample per problem, got n={n!r}.")
    if np.any(c_arr < 0) or np.any(c_arr > n_arr):
        raise ValueError(f"The number of correct samples c must lie in [0, n], got n={n!r}, c={c!r}.")
    if np.any(k_arr < 1):
        raise ValueError(f"k must be at least 1, got k={k!r}.")
    too_large = k_arr > n_arr
    if np.any(too_large):
        bad_k, bad_n = int(k_arr[too_large].flat[0]), int(n_arr[too_large].flat[0])
        raise ValueError(
            f"pass@k with k={bad_k} needs at least k samples per problem, but only n={bad_n} were drawn; "
            f"use k <= n or draw more samples."
        )
    cache: dict[tuple[int, int, int], float] = {}
    out = np.empty(n_arr.shape, dtype=np.float64)
    for index, triple in enumerate(zip(n_arr.flat, c_arr.flat, k_arr.flat)):
        key = (int(triple[0]), int(triple[1]), int(triple[2]))
        if key not in cache:
            cache[key] = _pass_at_k_scalar(*key)
        out.flat[index] = cache[key]
    return float(out) if scalar else out


def mean_pass_at_k(n, c, k: int) -> float:
    """
    Mean pass@k over problems.

    Args:
        n (`int` or array-like of `int`):
            Number of samples per problem (one value for all problems, or one per problem).
        c (array-like of `int`):
            Number of correct samples of each problem.
        k (`int`):
            Number of attempts.

    Returns:
        `float`: the average over problems of [`pass_at_k`]; `nan` when there are no problems.
    """
    values = pass_at_k(n, np.atleast_1d(c), k)
    return float(np.mean(values)) if np.size(values) else float("nan")


def pass_at_k_curve(n, c, ks: Iterable[int]) -> dict[int, float]:
    """
    Mean pass@k over problems for several values of k.

    Args:
        n (`int` or array-like of `int`):
            Number of samples per problem (one value for all problems, or one per problem).
        c (array-like of `int`):
            Number of correct samples of each problem.
        ks (iterable of `int`):
            The values of k, each at most the smallest `n`.

    Returns:
        `dict[int, float]`: `{k: mean pass@k}`, in the order of `ks`.
    """
    return {int(k): mean_pass_at_k(n, c, int(k)) for k in ks}


def best_at_k(rewards: Sequence[float], k: int) -> float:
    """
    Unbiased estimate of Best@k: the expected maximum reward of `k` samples drawn without replacement from the
    `n = len(rewards)` observed ones. For 0/1 rewards it equals [`pass_at_k`].

    With rewards sorted in increasing order `r_1 <= ... <= r_n`, the i-th one is the maximum of a random k-subset with
    probability `C(i - 1, k - 1) / C(n, k)`; these weights are computed in log space with `math.lgamma`.

    Args:
        rewards (sequence of `float`):
            The rewards of the `n` samples of one problem.
        k (`int`):
            Number of attempts, `1 <= k <= n`.

    Returns:
        `float`: the estimate.
    """
    values = np.sort(np.asarray(rewards, dtype=np.float64))
    n = values.size
    if k < 1 or k > n:
        raise ValueError(f"Best@k needs 1 <= k <= n, got k={k} with n={n} rewards.")
    i = np.arange(k, n + 1)  # ranks that can be the maximum of a k-subset
    log_norm = math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
    log_weights = np.array([math.lgamma(j) - math.lgamma(k) - math.lgamma(j - k + 1) for j in i]) - log_norm
    weights = np.exp(log_weights)
    weights /= weights.sum()  # exact up to rounding; renormalise so that constant rewards give exactly that constant
    return float(np.dot(weights, values[k - 1 :]))


def mean_and_std(values_per_seed: Sequence[Mapping[int, float]]) -> dict[int, tuple[float, float]]:
    """
    Mean and sample standard deviation of pass@k curves over seeds.

    Args:
        values_per_seed (sequence of `Mapping[int, float]`):
            One `{k: pass@k}` curve per seed (run). Only the values of k present in every curve are kept.

    Returns:
        `dict[int, tuple[float, float]]`: `{k: (mean, std)}`, with `std` the sample standard deviation (`ddof=1`), 0
        for a single seed.
    """
    if not values_per_seed:
        return {}
    common = set(values_per_seed[0])
    for curve in values_per_seed[1:]:
        common &= set(curve)
    result = {}
    for k in sorted(common, key=int):
        values = np.array([float(curve[k]) for curve in values_per_seed])
        std = float(np.std(values, ddof=1)) if values.size > 1 else 0.0
        result[k] = (float(np.mean(values)), std)
    return result
