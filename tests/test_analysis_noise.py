# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Gradient noise-to-signal ratio: streaming against stored replicas, against the analytic expectation, and with a
random projection."""

import math

import pytest
import torch

from trl_srppo.method.noise import NSRAccumulator, RandomSketch, noise_to_signal


def stored_replica_nsr(replicas: torch.Tensor, eps: float = 1e-12) -> tuple[float, float, float]:
    """Reference implementation on stored replicas `(R, D)`: the textbook formulas, no shortcut."""
    num = replicas.shape[0]
    mean = replicas.mean(dim=0)
    noise = float(((replicas - mean) ** 2).sum()) / (num - 1)
    signal = float((mean**2).sum()) - noise / num
    return noise, signal, (noise / signal if signal > eps else math.inf)


def test_streaming_equals_stored_replicas():
    generator = torch.Generator().manual_seed(0)
    for num in (2, 3, 10):
        replicas = torch.randn(num, 257, generator=generator, dtype=torch.float64) + 0.3
        acc = NSRAccumulator()
        for g in replicas:
            acc.add(g)
        noise, signal, nsr = stored_replica_nsr(replicas)
        result = acc.result()
        assert result.num_replicas == num
        assert result.noise == pytest.approx(noise, rel=1e-10)
        assert result.signal == pytest.approx(signal, rel=1e-10)
        assert result.nsr == pytest.approx(nsr, rel=1e-10)


def test_expected_noise_and_signal_match_trace_and_squared_mean():
    # g = mu + L z with known mean and covariance Sigma = L L^T; E[N] = trace(Sigma), E[S] = ||mu||^2
    generator = torch.Generator().manual_seed(1)
    dim, num, trials = 20, 6, 4000
    mu = torch.randn(dim, generator=generator, dtype=torch.float64)
    chol = torch.randn(dim, dim, generator=generator, dtype=torch.float64) * 0.3
    trace, mean_sq = float((chol @ chol.T).trace()), float(mu @ mu)
    z = torch.randn(trials, num, dim, generator=generator, dtype=torch.float64)
    replicas = mu + z @ chol.T  # (trials, R, D)
    noises, signals = [], []
    for t in range(trials):
        acc = NSRAccumulator()
        for g in replicas[t]:
            acc.add(g)
        noises.append(acc.result().noise)
        signals.append(acc.result().signal)
    noises, signals = torch.tensor(noises), torch.tensor(signals)
    se_noise, se_signal = noises.std() / trials**0.5, signals.std() / trials**0.5
    assert abs(noises.mean() - trace) < 4 * se_noise
    assert abs(signals.mean() - mean_sq) < 4 * se_signal


def test_nsr_is_infinite_when_signal_is_not_positive():
    acc = NSRAccumulator()
    acc.add(torch.tensor([1.0, 2.0]))
    acc.add(torch.tensor([-1.0, -2.0]))  # mean 0: the signal estimate is -N / R
    result = acc.result()
    assert result.noise == pytest.approx(10.0)
    assert result.signal == pytest.approx(-5.0)
    assert result.nsr == math.inf
    identical = NSRAccumulator()
    for _ in range(3):
        identical.add(torch.tensor([3.0, 4.0]))
    assert identical.result().noise == pytest.approx(0.0, abs=1e-12)
    assert identical.result().nsr == pytest.approx(0.0, abs=1e-12)


def test_fewer_than_two_replicas_give_nan():
    assert math.isnan(NSRAccumulator().result().nsr)
    acc = NSRAccumulator()
    acc.add(torch.ones(3))
    assert math.isnan(acc.result().nsr)
    assert math.isnan(noise_to_signal(1.0, 1.0, 1).noise)


@pytest.mark.parametrize("kind", ["gaussian", "rademacher"])
def test_sketch_is_one_fixed_linear_map(kind):
    sketch = RandomSketch(64, seed=3, kind=kind, chunk_size=100)
    generator = torch.Generator().manual_seed(0)
    x, y = torch.randn(1000, generator=generator), torch.randn(1000, generator=generator)
    assert torch.allclose(sketch(x) + 2 * sketch(y), sketch(x + 2 * y), atol=1e-4)
    assert torch.equal(sketch(x), RandomSketch(64, seed=3, kind=kind, chunk_size=100)(x))
    assert not torch.allclose(sketch(x), RandomSketch(64, seed=4, kind=kind, chunk_size=100)(x))
    uncached = RandomSketch(64, seed=3, kind=kind, chunk_size=100, cache_entries=0)
    assert torch.equal(uncached(x), sketch(x)) and not uncached._cache


def test_projection_preserves_nsr_approximately():
    generator = torch.Generator().manual_seed(2)
    dim, num = 3000, 8
    mu = torch.randn(dim, generator=generator) * 0.5
    replicas = mu + torch.randn(num, dim, generator=generator)  # NSR around trace / ||mu||^2 = 4
    exact, projected = NSRAccumulator(), NSRAccumulator(RandomSketch(4096, seed=0, chunk_size=512))
    for g in replicas:
        exact.add(g)
        projected.add(g)
    assert projected.grad_sum.shape == (4096,)
    # relative error of a JL squared norm ~ sqrt(2 / d) ~ 2%; allow a margin for the ratio
    assert projected.result().noise == pytest.approx(exact.result().noise, rel=0.1)
    assert projected.result().signal == pytest.approx(exact.result().signal, rel=0.15)
    assert projected.result().nsr == pytest.approx(exact.result().nsr, rel=0.2)


@pytest.mark.parametrize(
    "values, median",
    [
        ([1.0, 3.0], 2.0),  # the two middle values' mean, not the lower one
        ([4.0, 1.0, 3.0, 2.0], 2.5),
        ([5.0, 1.0, 3.0], 3.0),
        ([102.42, 12.72], 57.57),
        ([math.inf, 95.8], math.inf),  # a prompt without signal is at the top, as numpy.median keeps it
        ([math.inf, 1.0, 2.0, math.inf], math.inf),
        ([math.inf, 1.0, 2.0, 3.0], 2.5),
    ],
)
def test_median_per_prompt_nsr_is_the_midpoint_of_the_middle_values(values, median):
    from trl_srppo.analysis.policy import _summary

    summary = _summary(values)
    assert summary["median"] == pytest.approx(median)
    assert summary["num_prompts"] == len(values) and summary["num_infinite"] == sum(map(math.isinf, values))
    assert math.isnan(_summary([])["median"])


def test_nsr_needs_two_rollouts_per_prompt(tmp_path):
    from trl_srppo.analysis.policy import NSRConfig, measure_nsr
    from trl_srppo.analysis.rollouts import Rollouts

    with pytest.raises(ValueError, match="num_generations must be at least 2 for the NSR, got 1"):
        NSRConfig(model_name_or_path="m", output_dir=str(tmp_path), num_generations=1)
    NSRConfig(model_name_or_path="m", output_dir=str(tmp_path), num_generations=2)
    one_each = Rollouts(
        prompts=["a", "b"],
        prompt_ids=torch.ones(2, 1, dtype=torch.long),
        prompt_mask=torch.ones(2, 1, dtype=torch.long),
        completion_ids=torch.ones(2, 1, dtype=torch.long),
        completion_mask=torch.ones(2, 1, dtype=torch.long),
        completions=["", ""],
        prompt_index=torch.arange(2),
        num_rollouts=1,
        rewards=torch.tensor([1.0, 0.0]),
        values=torch.full((2, 1), 0.5),
    )
    with pytest.raises(ValueError, match="at least 2 rollouts per prompt"):
        measure_nsr(None, one_each, pass_at_k=4)


def test_per_bin_nsr_pairs_each_bins_pooled_result_with_its_prompts():
    from trl_srppo.analysis.policy import per_bin_nsr

    per_prompt = [
        {"bin": "easy", "weighted": {"nsr": 1.0}, "unweighted": {"nsr": 2.0}},
        {"bin": None, "weighted": {"nsr": 5.0}, "unweighted": {"nsr": 5.0}},  # no bin: in no summary
        {"bin": "easy", "weighted": {"nsr": 3.0}, "unweighted": {"nsr": math.inf}},
    ]
    pooled = {b: {"weighted": {"nsr": i}, "unweighted": {"nsr": -i}} for i, b in enumerate(("easy", "medium", "hard"))}
    per_bin = per_bin_nsr(per_prompt, pooled, ("weighted", "unweighted"))
    assert list(per_bin) == ["easy", "medium", "hard"] and per_bin["hard"]["unweighted"]["pooled"] == {"nsr": -2}
    assert per_bin["easy"]["weighted"]["prompts"] == {
        "num_prompts": 2,
        "num_infinite": 0,
        "mean_finite": 2.0,
        "median": 2.0,
    }
    assert per_bin["easy"]["unweighted"]["prompts"]["num_infinite"] == 1
    assert per_bin["medium"]["weighted"]["prompts"]["num_prompts"] == 0


def test_trial_step_follows_the_gradient_or_its_direction():
    from trl_srppo.analysis.cross_bin import trial_step

    grad = torch.tensor([3.0, 4.0])
    assert torch.allclose(trial_step(grad, 0.1, normalize_step=False), torch.tensor([0.3, 0.4]))
    assert torch.allclose(trial_step(grad, 0.1, normalize_step=True), torch.tensor([0.06, 0.08]))
    assert trial_step(torch.zeros(2), 0.1, normalize_step=True) is None


def test_pad_rollouts_left_pads_prompts_and_right_pads_completions():
    from trl_srppo.analysis.rollouts import pad_rollouts
    from trl_srppo.evaluation.engines import Completion

    generated = [
        [Completion("a", 1, "stop", (7,)), Completion("bc", 2, "stop", (8, 9))],
        [Completion("", 0, "length", ()), Completion("d", 1, "stop", (6,))],
    ]
    out = pad_rollouts([[1, 2], [3]], generated, num_rollouts=2, pad_id=0)
    assert out["prompt_ids"].tolist() == [[1, 2], [1, 2], [0, 3], [0, 3]]
    assert out["prompt_mask"].tolist() == [[1, 1], [1, 1], [0, 1], [0, 1]]
    assert out["completion_ids"].tolist() == [[7, 0], [8, 9], [0, 0], [6, 0]]
    assert out["completion_mask"].tolist() == [[1, 0], [1, 1], [0, 0], [1, 0]]
    assert out["completions"] == ["a", "bc", "", "d"] and out["prompt_ids"].dtype == torch.long
    empty = pad_rollouts([[1]], [[Completion("", 0, "length", ())]], num_rollouts=1, pad_id=5)
    assert empty["completion_ids"].tolist() == [[5]] and empty["completion_mask"].tolist() == [[0]]
