# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`make bench-prompt-sampling`: the paired-difference helper and the equal-wall-clock lookup against values by hand,
and the study end to end at the smoke size (each configuration's options reach the trainer; the report's numbers are
the runs')."""

import glob
import json
import math
import os

import pytest

from benchmarks.common.curves import interpolate
from benchmarks.toy import prompt_sampling_study as study


def test_paired_difference_constant_difference_has_a_zero_width_interval():
    d = study.paired_difference([0.5, 0.3, 0.7, 0.1], [0.48, 0.28, 0.68, 0.08])
    assert d["mean"] == pytest.approx(0.02)
    assert d["low"] == pytest.approx(0.02) and d["high"] == pytest.approx(0.02)
    assert d["seeds"] == 4 and d["differences"] == pytest.approx([0.02] * 4)


def test_paired_difference_two_seeds_by_hand():
    # Differences 0 and 1: a resample of 2 seeds has mean 0, 0.5 or 1 with probability 1/4, 1/2, 1/4, so with 10,000
    # resamples the 2.5th percentile is 0 and the 97.5th is 1.
    d = study.paired_difference([1.0, 3.0], [1.0, 2.0])
    assert d["mean"] == 0.5 and d["low"] == 0.0 and d["high"] == 1.0 and d["seeds"] == 2


def test_paired_difference_is_fixed_by_its_seed_and_skips_missing_pairs():
    values, reference = [0.40, 0.45, 0.50, 0.38, 0.47], [0.41, 0.40, 0.46, 0.37, 0.44]
    a, b = study.paired_difference(values, reference), study.paired_difference(values, reference)
    assert a == b  # the generator's seed is fixed: the same interval every time
    assert a["low"] < a["mean"] < a["high"]
    assert a["mean"] == pytest.approx(sum(v - r for v, r in zip(values, reference)) / 5)
    # A seed missing on either side is left out of the pairs.
    d = study.paired_difference([0.5, None, 0.7, float("nan")], [0.4, 0.2, None, 0.1])
    assert d["seeds"] == 1 and d["mean"] == pytest.approx(0.1) and d["low"] == d["high"] == pytest.approx(0.1)
    empty = study.paired_difference([None], [0.1])
    assert empty["seeds"] == 0 and math.isnan(empty["mean"])
    assert study.fmt_bootstrap(empty) == "n/a"
    assert study.fmt_bootstrap({"mean": 0.02, "low": 0.005, "high": 0.035, "seeds": 8}).endswith("*")
    assert not study.fmt_bootstrap({"mean": 0.02, "low": -0.005, "high": 0.035, "seeds": 8}).endswith("*")


def test_point_at_seconds_takes_the_last_point_not_past_the_budget():
    curve = [
        {"update": u, "train_seconds": s, "pass@1": p} for u, s, p in ((10, 1.0, 0.3), (20, 2.0, 0.4), (30, 3.0, 0.5))
    ]
    assert study.point_at_seconds(curve, 2.5)["update"] == 20
    assert study.point_at_seconds(curve, 2.0)["update"] == 20  # exactly at the budget counts
    assert study.point_at_seconds(curve, 10.0)["update"] == 30
    assert study.point_at_seconds(curve, 0.5) is None  # no point that early
    # A run cached before curve points recorded their seconds has none to offer.
    assert study.point_at_seconds([{"update": 10, "pass@1": 0.3}], 5.0) is None


def test_interpolate_at_equal_tokens():
    curve = [{"generated_tokens": 100, "pass@1": 0.2}, {"generated_tokens": 300, "pass@1": 0.4}]
    assert interpolate(curve, 200, "pass@1") == pytest.approx(0.3)
    assert interpolate(curve, 50, "pass@1") == pytest.approx(0.2)  # before the first point: its value
    assert interpolate(curve, 301, "pass@1") is None  # past the curve: no comparison


def test_prompt_sampling_study_smoke(tmp_path):
    out, cache = tmp_path / "report", tmp_path / "cache"
    argv = ["--smoke", "--workers", "1", "--cache-dir", str(cache), "--output-dir", str(out)]
    assert study.main(argv) == 0
    report = (out / "README.md").read_text()
    results = json.loads((out / "results.json").read_text())
    names = [name for name, _, _, _ in study.CONFIGS]
    assert list(results["runs"]) == names
    for name in names:
        assert f"| {name} |" in report, name
        assert [r["seed"] for r in results["runs"][name]] == [0, 1]
    for section in ("## At equal updates", "## At equal generated tokens", "## At equal wall-clock", "## Reading"):
        assert section in report

    cached = {}
    for path in glob.glob(os.path.join(cache, "runs", "prompt-sampling-smoke-*", "*.json")):
        result = json.load(open(path))
        cached[(json.dumps(sorted(dict(result["spec"]["options"]).items())), result["spec"]["seed"])] = result
    for name, method, options, _ in study.CONFIGS:
        for seed in (0, 1):
            run = cached[(json.dumps(sorted(options.items())), seed)]
            assert run["spec"]["method"] == method and run["spec"]["learning_rate"] == study.LEARNING_RATE
            assert all(p["train_seconds"] is not None for p in run["curve"])  # the curve points' training seconds
            seconds = [p["train_seconds"] for p in run["curve"]]
            assert seconds == sorted(seconds) and seconds[-1] <= run["train_seconds"]
            logged = [e for e in run["logs"] if "prompt_sampling/ess" in e]
            # Prompt sampling reaches the trainer: its draw is logged once per generated batch, with the pool's size.
            if options.get("prompt_sampling", "none") == "none":
                assert not logged
            else:
                assert logged and all(0 < e["prompt_sampling/pool_drawn_share"] <= 1 for e in logged)
                m = options["prompt_pool_factor"]
                assert all(e["prompt_sampling/pool_drawn_share"] <= 1 / m + 1e-9 for e in logged)
                mean = sum(e["prompt_sampling/ess"] for e in logged) / len(logged)
                summary = results["runs"][name][seed]["logged"]["prompt_sampling/ess"]
                assert summary == pytest.approx(mean)

    # The equal-updates difference is the runs' final test pass@1, seed by seed.
    default = [cached[(json.dumps(sorted(study.SRPPO_DEFAULT.items())), s)] for s in (0, 1)]
    name, _, options, _ = study.CONFIGS[1]
    variant = [cached[(json.dumps(sorted(options.items())), s)] for s in (0, 1)]
    diffs = [v["final"]["test"]["pass@1"] - d["final"]["test"]["pass@1"] for v, d in zip(variant, default)]
    got = results["comparisons"]["equal_updates"][name]["pass@1"]
    assert got["differences"] == pytest.approx(diffs)
    assert got["mean"] == pytest.approx(sum(diffs) / 2)
    row = next(line for line in report.splitlines() if line.startswith(f"| {name} |") and "±" in line)
    assert study.fmt_bootstrap(got) in row
    # Equal generated tokens against the default: both curves at the fewer tokens of the two runs of each seed.
    at_tokens = results["comparisons"]["equal_tokens"][name]["pass@1"]["default"]
    fewer = [
        min(v["curve"][-1]["generated_tokens"], d["curve"][-1]["generated_tokens"]) for v, d in zip(variant, default)
    ]
    assert at_tokens["tokens"] == fewer
    expected = [
        interpolate(v["curve"], t, "pass@1") - interpolate(d["curve"], t, "pass@1")
        for v, d, t in zip(variant, default, fewer)
    ]
    assert at_tokens["difference"]["differences"] == pytest.approx(expected)
    # Equal wall-clock: default SR-PPO at its own budget is its last curve point.
    own = results["comparisons"]["equal_seconds"][study.DEFAULT]
    assert own["updates"] == [d["curve"][-1]["update"] for d in default]
    assert results["meta"]["seeds"] == 2 and "load_average_before" in results["meta"]
