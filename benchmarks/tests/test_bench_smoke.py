# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""End to end: the smoke-size benchmark (1 seed, SR-PPO and GRPO, 4 updates) trains and writes its report."""

import json

from benchmarks.toy import run


def test_smoke_bench_writes_report(tmp_path):
    out = tmp_path / "report"
    code = run.main(["--smoke", "--workers", "1", "--cache-dir", str(tmp_path / "cache"), "--output-dir", str(out)])
    assert code == 0
    for name in ("README.md", "results.json", "curves_updates.png", "curves_tokens.png"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    readme = (out / "README.md").read_text()
    for section in ("## Held-out results", "SR-PPO (defaults)", "GRPO (4 rollouts)", "noise-to-signal", "calibration"):
        assert section in readme, section
    # The paper's NSR protocol pairs the SR-PPO run with the GRPO run's rollouts, and explains the difference.
    assert "## Gradient noise-to-signal ratio, the paper's protocol" in readme
    assert "### The Pass@k weight and the batch NSR, here and in the paper" in readme
    results = json.loads((out / "results.json").read_text())
    assert set(results["runs"]) == {"sr-ppo/off", "grpo/off"}
    srppo, grpo = results["runs"]["sr-ppo/off"][0], results["runs"]["grpo/off"][0]
    # GRPO: half as many prompts with 4 rollouts each, so twice the completions of the single-rollout method.
    assert grpo["completions"] == 2 * srppo["completions"] == 2 * 4 * 8
    for run_result in (srppo, grpo):
        assert 0.0 <= run_result["final"]["test"]["pass@1"] <= run_result["final"]["test"]["pass@8"] <= 1.0
        assert [p["update"] for p in run_result["curve"]] == [2, 4]
    assert "nsr" in srppo["mid"] and "calibration" in srppo["final"]["test"]
    paper = results["paper_nsr"]["sr-ppo/off"][0]
    assert paper["seed"] == 0 and sum(paper["bins"].values()) == 12  # the analysis prompts, GRPO's rollouts
    assert set(paper["batch"]) == {"weighted", "unweighted"}
    # Finished runs are reused: a second call trains nothing and rewrites the same numbers.
    assert (
        run.main(["--smoke", "--workers", "1", "--cache-dir", str(tmp_path / "cache"), "--output-dir", str(out)]) == 0
    )
    again = json.loads((out / "results.json").read_text())
    assert again["runs"]["sr-ppo/off"][0]["final"] == srppo["final"]
