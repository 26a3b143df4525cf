# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The toy fingerprints (`python -m scripts.toy_fingerprints`): a run is the same run twice, and a comparison fails on
any changed value while it only lists a metric logged anew."""

import copy
import json

from scripts.toy_fingerprints import differences, main


def test_a_configuration_fingerprints_the_same_twice_and_compares_equal(tmp_path, capsys):
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    assert main([str(first), "--only", "running_mean"]) == 0
    assert main([str(second), "--only", "running_mean", "--compare", str(first)]) == 0
    assert "1 configurations compared, 0 differences" in capsys.readouterr().out
    found = json.loads(first.read_text())["running_mean"]
    assert len(found["logs"]) == 4  # three steps and the run's summary
    assert not any(key.startswith("memory/") or "runtime" in key for entry in found["logs"] for key in entry)
    assert [len(rows) for rows in found["advantages"]] == [len(rows) for rows in found["values"]] == [8, 8, 8]


def test_a_changed_value_differs_and_a_new_metric_is_only_listed():
    before = {
        "run": {"logs": [{"loss": 0.5, "reward": 1.0}], "policy": "aa", "critic": "bb"},
        "gone": {"logs": [], "policy": "cc"},
    }
    after = copy.deepcopy(before)
    del after["gone"]  # compared: the configurations in both
    after["run"]["logs"][0]["critic/new"] = 0.1
    assert differences(before, after) == ([], ["run: critic/new"])
    after["run"]["logs"][0]["reward"] = 0.0
    after["run"]["critic"] = "bc"
    assert differences(before, after) == (["run: critic", "run: logs[0] reward"], ["run: critic/new"])
    after["run"]["logs"].append({"loss": 0.1})
    assert differences(before, after)[0] == ["run: critic", "run: logs (1 entries, now 2)"]
