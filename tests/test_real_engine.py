# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`benchmarks.real_engine`: the study's runs with transformers and with vLLM generation, side by side. The arithmetic
of the seconds is checked against values worked by hand; the whole bench runs at toy sizes in the vLLM tier."""

import json

import pytest

from benchmarks import real_engine
from tests.test_real_bench import tiny_model_folder


def fake_run(method: str, seed: int, marks: list[float], generation: list[float], total: float, evals: float) -> dict:
    """A finished run whose updates end at `marks` training seconds, with `generation` seconds generated so far."""
    return {
        "name": f"{method}_s{seed}",
        "spec": {"method": method, "seed": seed},
        "curve": [
            {"training_seconds": mark, "phase_seconds": {"generation": gen, "critic": 1.0}}
            for mark, gen in zip(marks, generation, strict=True)
        ],
        "training_seconds": marks[-1],
        "eval_seconds": evals,
        "total_seconds": total,
    }


def test_engine_specs_interleave_the_engines_within_each_seed_and_method():
    specs = real_engine.engine_specs(["sr-ppo", "grpo"], [0, 1], 3, 3e-5, 16)
    order = [(spec.seed, spec.method, engine) for engine, spec in specs]
    assert order == [
        (0, "sr-ppo", "transformers"), (0, "sr-ppo", "vllm"), (0, "grpo", "transformers"), (0, "grpo", "vllm"),
        (1, "sr-ppo", "transformers"), (1, "sr-ppo", "vllm"), (1, "grpo", "transformers"), (1, "grpo", "vllm"),
    ]  # fmt: skip
    for engine, spec in specs:
        assert dict(spec.options) == ({} if engine == "transformers" else {"use_vllm": True, "vllm_mode": "colocate"})
        assert (spec.updates, spec.prompts_per_update, spec.learning_rate) == (3, 16, 3e-5)
        assert spec.eval_every == 1  # a held-out point after every update: the per-update seconds
    assert len({spec.name for _, spec in specs}) == 8  # the engines' runs have distinct names (their options' hash)


def test_run_seconds_leaves_out_the_first_update_and_the_evaluations():
    # Updates end at 10, 14 and 20 training seconds: after the first, (20 - 10) / 2 = 5 s per update. Generation
    # reached 8, 9 and 11 seconds: (11 - 8) / 2 = 1.5 per update after the first. Start-up: 50 total - 20 training - 7
    # evaluation = 23.
    seconds = real_engine.run_seconds(fake_run("sr-ppo", 0, [10.0, 14.0, 20.0], [8.0, 9.0, 11.0], 50.0, 7.0))
    assert seconds == {"startup": 23.0, "update": 5.0, "generation": 1.5}
    with pytest.raises(ValueError, match="at least 2"):
        real_engine.run_seconds(fake_run("sr-ppo", 0, [10.0], [8.0], 50.0, 7.0))


def test_summary_means_each_engine_and_pairs_the_ratios_by_seed():
    runs = [
        ("transformers", fake_run("sr-ppo", 0, [10.0, 18.0, 26.0], [2.0, 6.0, 10.0], 40.0, 4.0)),  # 8 s, gen 4
        ("vllm", fake_run("sr-ppo", 0, [6.0, 10.0, 14.0], [5.0, 6.0, 7.0], 90.0, 4.0)),  # 4 s per update, gen 1
        ("transformers", fake_run("sr-ppo", 1, [10.0, 16.0, 22.0], [2.0, 4.0, 6.0], 40.0, 4.0)),  # 6 s, gen 2
        ("vllm", fake_run("sr-ppo", 1, [6.0, 8.0, 10.0], [5.0, 7.0, 9.0], 80.0, 4.0)),  # 2 s per update, gen 2
        ("transformers", fake_run("grpo", 0, [5.0, 10.0], [1.0, 3.0], 20.0, 1.0)),  # no vLLM run: no ratio
    ]
    summary = real_engine.summarize(runs)
    assert list(summary) == ["sr-ppo", "grpo"]
    sr = summary["sr-ppo"]
    assert sr["engines"]["transformers"] == {
        "startup": (40 - 26 - 4 + 40 - 22 - 4) / 2,
        "update": 7.0,
        "generation": 3.0,
    }
    assert sr["engines"]["vllm"] == {"startup": (90 - 14 - 4 + 80 - 10 - 4) / 2, "update": 3.0, "generation": 1.5}
    assert sr["ratios"] == {"update": [2.0, 3.0], "generation": [4.0, 1.0]}
    assert sr["seeds"] == [0, 1]
    assert list(summary["grpo"]["engines"]) == ["transformers"]
    assert summary["grpo"]["ratios"] == {"update": [], "generation": []}
    table = real_engine.markdown(
        summary,
        {"command": "c", "date": "d", "minutes": 1.0, "model": "m", "updates": 3, "prompts_per_update": 16,
         "learning_rate": 3e-5, "seeds": [0, 1], "machine": "x"},
    )  # fmt: skip
    assert "| sr-ppo | vllm | 69.0 | 3.00 | 1.50 | 2.00, 3.00 | 4.00, 1.00 |" in table
    assert "| grpo | transformers | 9.0 | 5.00 | 2.00 |  |  |" in table


def test_the_bench_says_how_to_get_vllm_where_it_is_missing(monkeypatch, capsys):
    monkeypatch.setattr(real_engine, "vllm_installed", lambda: False)
    assert real_engine.main(["--smoke", "--model", "unused"]) == 1
    assert "make bench-real-engine" in capsys.readouterr().err


def test_one_update_is_refused():
    with pytest.raises(SystemExit):
        real_engine.main(["--updates", "1"])


@pytest.mark.vllm
def test_smoke_engine_bench_end_to_end(tmp_path, monkeypatch):
    """Both engines train the study's smoke runs in fresh processes; the vLLM runs generate through vLLM (TRL logs
    its importance-sampling ratio only then), the transformers runs do not."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    model = tiny_model_folder(tmp_path / "model", hidden_size=64, num_attention_heads=2)  # heads of 32
    argv = ["--smoke", "--model", str(model), "--seeds", "1", "--updates", "2", "--prompts-per-update", "4"]
    argv += ["--study-dir", str(tmp_path / "study"), "--work-dir", str(tmp_path / "work")]
    argv += ["--output-dir", str(tmp_path / "out")]
    assert real_engine.main(argv) == 0
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [(engine, spec["method"]) for engine, spec, _ in results["runs"]] == [
        ("transformers", "sr-ppo"), ("vllm", "sr-ppo"), ("transformers", "grpo"), ("vllm", "grpo"),
    ]  # fmt: skip
    for engine, spec, seconds in results["runs"]:
        assert seconds["update"] > 0 and seconds["generation"] > 0 and seconds["startup"] > 0
        name = real_engine.RunSpec(**spec).name + f"_{engine}"
        run = json.loads((tmp_path / "work" / f"{name}.json").read_text())
        sampled = any(key.startswith("sampling/importance_sampling_ratio") for entry in run["logs"] for key in entry)
        assert sampled == (engine == "vllm"), name
    for method in ("sr-ppo", "grpo"):
        assert len(results["summary"][method]["ratios"]["update"]) == 1
    assert "| sr-ppo | vllm |" in (tmp_path / "out" / "README.md").read_text()
