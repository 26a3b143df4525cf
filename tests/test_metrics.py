# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The pass@k and Best@k estimators against exact rational arithmetic and simulation."""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from trl_srppo.evaluation.pass_at_k import best_at_k, mean_and_std, mean_pass_at_k, pass_at_k, pass_at_k_curve


def exact_pass_at_k(n: int, c: int, k: int) -> Fraction:
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


def test_pass_at_k_matches_exact_rational_arithmetic_for_all_small_n():
    worst = 0.0
    for n in range(1, 31):
        for c in range(n + 1):
            for k in range(1, n + 1):
                exact = exact_pass_at_k(n, c, k)
                value = pass_at_k(n, c, k)
                assert isinstance(value, float)
                worst = max(worst, abs(value - float(exact)))
                if exact in (0, 1):
                    assert value == float(exact), (n, c, k)
    assert worst < 1e-14


def test_pass_at_k_large_n_exact_and_no_overflow():
    # n = 1024 is far beyond float factorials (1024! ~ 1e2639); compare with exact integers at a few points.
    for n, c, k in [(1024, 1, 1), (1024, 1, 512), (1024, 3, 1000), (1024, 100, 7), (4096, 17, 300), (1024, 1020, 4)]:
        assert pass_at_k(n, c, k) == pytest.approx(float(exact_pass_at_k(n, c, k)), rel=1e-12, abs=1e-15)
    assert pass_at_k(1024, 1, 1) == pytest.approx(1 / 1024, rel=1e-13)


def test_pass_at_k_against_monte_carlo_for_large_n():
    rng = np.random.default_rng(0)
    n, trials = 1024, 20_000
    for c, k in [(5, 64), (40, 16), (200, 4)]:
        outcomes = np.zeros(n, dtype=bool)
        outcomes[:c] = True
        # Draw k of the n samples without replacement: the k smallest of n uniform keys.
        keys = rng.random((trials, n))
        chosen = np.argpartition(keys, k, axis=1)[:, :k]
        hits = outcomes[chosen].any(axis=1).mean()
        expected = pass_at_k(n, c, k)
        standard_error = math.sqrt(expected * (1 - expected) / trials)
        assert abs(hits - expected) < 5 * standard_error + 1e-3, (c, k, hits, expected)


def test_vectorised_call_equals_scalar_calls():
    rng = np.random.default_rng(1)
    n = rng.integers(1, 200, size=50)
    c = np.array([rng.integers(0, m + 1) for m in n])
    k = np.array([rng.integers(1, m + 1) for m in n])
    vector = pass_at_k(n, c, k)
    assert isinstance(vector, np.ndarray) and vector.shape == (50,)
    np.testing.assert_array_equal(vector, [pass_at_k(int(a), int(b), int(d)) for a, b, d in zip(n, c, k)])
    # Broadcasting: one n and k for many problems.
    np.testing.assert_array_equal(pass_at_k(16, [0, 3, 16], 4), [pass_at_k(16, x, 4) for x in (0, 3, 16)])
    assert pass_at_k(np.int64(8), np.int64(2), np.int64(3)) == pass_at_k(8, 2, 3)


def test_k_larger_than_n_raises_with_clear_message():
    with pytest.raises(ValueError, match=r"k=9 .*n=8"):
        pass_at_k(8, 2, 9)
    with pytest.raises(ValueError, match="k <= n"):
        pass_at_k([8, 4], [1, 1], 5)
    with pytest.raises(ValueError):
        pass_at_k(8, 9, 1)  # c > n
    with pytest.raises(ValueError):
        pass_at_k(8, 2, 0)
    with pytest.raises(ValueError):
        pass_at_k(8, 2.5, 1)


def test_mean_pass_at_k_and_curve():
    c = [0, 1, 4]
    expected = {k: float(sum(exact_pass_at_k(4, x, k) for x in c) / 3) for k in (1, 2, 4)}
    curve = pass_at_k_curve(4, c, [1, 2, 4])
    assert list(curve) == [1, 2, 4]
    for k in (1, 2, 4):
        assert curve[k] == pytest.approx(expected[k], abs=1e-15)
        assert mean_pass_at_k(4, c, k) == curve[k]
    assert curve[1] == pytest.approx(5 / 12)


def test_best_at_k_unbiased_and_reduces_to_pass_at_k():
    rewards = [0.0, 0.2, 0.5, 1.0, 0.7]
    for k in range(1, 6):
        # Exact expectation of the maximum over all k-subsets.
        subsets = list(itertools.combinations(rewards, k))
        expected = sum(max(s) for s in subsets) / len(subsets)
        assert best_at_k(rewards, k) == pytest.approx(expected, abs=1e-12)
    binary = [1, 0, 0, 1, 0, 0, 0, 0]
    for k in range(1, 9):
        assert best_at_k(binary, k) == pytest.approx(pass_at_k(8, 2, k), abs=1e-12)
    assert best_at_k([0.3] * 1024, 100) == pytest.approx(0.3, abs=1e-12)
    with pytest.raises(ValueError):
        best_at_k([1.0, 0.0], 3)


def test_mean_and_std_over_seeds():
    stats = mean_and_std([{1: 0.2, 2: 0.4}, {1: 0.4, 2: 0.6, 4: 0.9}])
    assert set(stats) == {1, 2}
    assert stats[1][0] == pytest.approx(0.3)
    assert stats[1][1] == pytest.approx(np.std([0.2, 0.4], ddof=1))
    assert mean_and_std([{1: 0.5}]) == {1: (0.5, 0.0)}
