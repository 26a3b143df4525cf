# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`make bench-defaults` end to end at the smoke size: each row's options reach the trainer; the report lists them."""

import glob
import json
import os

import pytest

from benchmarks.toy import defaults_study


def test_defaults_study_smoke_applies_each_rows_options(tmp_path):
    out, cache = tmp_path / "report", tmp_path / "cache"
    argv = ["--smoke", "--workers", "1", "--cache-dir", str(cache), "--output-dir", str(out)]
    assert defaults_study.main(argv) == 0
    report = (out / "defaults.md").read_text()
    names = [name for name, _, _ in defaults_study.STUDY[:3]]
    for name in names:
        assert f"| {name} |" in report, name
    assert set(json.loads((out / "defaults.json").read_text())["results"]) == set(names)

    def first_log(name):  # the first logged step of the row's run, from the runs' cache (it keeps the logs)
        options = dict(defaults_study.STUDY[names.index(name)][2])
        for path in glob.glob(os.path.join(cache, "runs", "defaults-smoke-*", "*.json")):
            result = json.load(open(path))
            if dict(result["spec"]["options"]) == options:
                return result["logs"][0]
        raise AssertionError(f"no run of {name!r}")

    # Previous defaults: a head at 0.5 on every prompt and k = 4, so the first weights are 4 * 0.5**3 = 0.5.
    previous = first_log("previous defaults")
    assert previous["critic/value_mean"] == pytest.approx(0.5, abs=1e-4)
    assert previous["passk/weight_mean"] == pytest.approx(0.5, abs=1e-4)
    # The head started at the first batch's success rate r: every value is r and every weight 4 (1 - r)^3.
    started = first_log("head at success rate")
    rate = started["reward"]
    assert 0 < rate < 1, "the first batch needs both outcomes for this check"
    assert started["critic/value_mean"] == pytest.approx(rate, abs=1e-4)
    assert started["passk/weight_mean"] == pytest.approx(4 * (1 - rate) ** 3, abs=1e-4)

    # The difficulty-mix table: at the smoke size one mix, chains of 1-2 steps, with its own base model and held-out
    # prompts; its runs train and evaluate on those chains only.
    assert "## k and the difficulty mix" in report
    mix_names = [name for name, _, _ in defaults_study.MIX_CONFIGS[:2]]
    (mix,) = json.loads((out / "defaults.json").read_text())["mixes"]
    assert mix["max_steps"] == 2 and set(mix["runs"]) == set(mix_names)
    assert set(mix["base"]["success_by_steps"]) == {"1", "2"}
    for name in mix_names:
        assert f"| {name} |" in report, name
        (run,) = mix["runs"][name]
        assert set(run["final"]["test"]["success_by_steps"]) == {"1", "2"}
        assert run["spec"]["method"] == next(m for n, m, _ in defaults_study.MIX_CONFIGS if n == name)
        below = int(run["final"]["val"]["pass@1"] < mix["base"]["val_pass@1"])  # a collapse, counted per seed
        mix_section = report.split("## k and the difficulty mix")[1]
        row = next(line for line in mix_section.splitlines() if f"| {name} |" in line)
        # The first updates' training reward and truncation, from the run's logged steps (in the runs' cache).
        (cached,) = [
            json.load(open(path))
            for path in glob.glob(os.path.join(cache, "runs", "defaults-smoke-steps1-2-*", "*.json"))
            if json.load(open(path))["spec"] == run["spec"]
        ]
        logged = [entry for entry in cached["logs"] if "reward" in entry]  # once per generated batch
        assert logged and all(entry["step"] <= 10 for entry in logged)  # the smoke size's 4 updates
        early = [sum(e[key] for e in logged) / len(logged) for key in ("reward", "completions/clipped_ratio")]
        assert row.rstrip().endswith(f"| {below} of 1 | {early[0]:.3f} ± 0.000 | {early[1]:.3f} ± 0.000 |"), row
    assert "| 1-2 steps |" in report
