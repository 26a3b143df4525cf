# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`benchmarks.real_study.engine`: the study's runs with transformers and with vLLM generation, side by side. The
arithmetic of the seconds is checked against values worked by hand; the whole bench runs at toy sizes in the vLLM
tier."""

import json

import pytest

from benchmarks.real_study import engine as real_engine
from benchmarks.tests.test_real_bench import tiny_model_folder


def fake_run(method: str, seed: int, marks, generation, tokens, total: float, evals: float) -> dict:
    """A finished run whose updates end at `marks` training seconds, with `generation` seconds and `tokens` generated
    tokens so far."""
    return {
        "name": f"{method}_s{seed}",
        "spec": {"method": method, "seed": seed},
        "curve": [
            {"training_seconds": mark, "generated_tokens": count, "phase_seconds": {"generation": gen, "critic": 1.0}}
            for mark, gen, count in zip(marks, generation, tokens, strict=True)
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
    # Updates end at 10, 14 and 20 training seconds: the first took 10, then (20 - 10) / 2 = 5 s per update.
    # Generation reached 8, 9 and 11 seconds: (11 - 8) / 2 = 1.5 per update after the first; tokens 100, 160, 240:
    # 70 per update. Start-up: 50 total - 20 training - 7 evaluation = 23. A 16-update run: 23 + 10 + 15 x 5 = 108.
    run = fake_run("sr-ppo", 0, [10.0, 14.0, 20.0], [8.0, 9.0, 11.0], [100, 160, 240], 50.0, 7.0)
    seconds = real_engine.run_seconds(run, 16)
    assert seconds == {"startup": 23.0, "first": 10.0, "update": 5.0, "generation": 1.5, "tokens": 70.0, "run": 108.0}
    assert real_engine.run_seconds(run, 2)["run"] == 23.0 + 10.0 + 5.0
    with pytest.raises(ValueError, match="at least 2"):
        real_engine.run_seconds(fake_run("sr-ppo", 0, [10.0], [8.0], [100], 50.0, 7.0), 16)


def test_summary_means_each_engine_and_pairs_the_ratios_by_seed():
    tokens = [50, 100, 150]  # 50 per update
    runs = [
        ("transformers", fake_run("sr-ppo", 0, [10.0, 18.0, 26.0], [2.0, 6.0, 10.0], tokens, 40.0, 4.0)),  # 8 s, gen 4
        ("vllm", fake_run("sr-ppo", 0, [6.0, 10.0, 14.0], [5.0, 6.0, 7.0], [50, 150, 250], 90.0, 4.0)),  # 4 s, gen 1
        ("transformers", fake_run("sr-ppo", 1, [10.0, 16.0, 22.0], [2.0, 4.0, 6.0], tokens, 40.0, 4.0)),  # 6 s, gen 2
        ("vllm", fake_run("sr-ppo", 1, [6.0, 8.0, 10.0], [5.0, 7.0, 9.0], tokens, 80.0, 4.0)),  # 2 s, gen 2
        ("transformers", fake_run("grpo", 0, [5.0, 10.0], [1.0, 3.0], [10, 20], 20.0, 1.0)),  # no vLLM run: no ratio
    ]
    summary = real_engine.summarize(runs, 4)
    assert list(summary) == ["sr-ppo", "grpo"]
    sr = summary["sr-ppo"]
    # Start-up: 40 - 26 - 4 = 10 and 40 - 22 - 4 = 14 (transformers); 90 - 14 - 4 = 72 and 80 - 10 - 4 = 66 (vLLM).
    # Projected 4-update runs: 10 + 10 + 3 x 8 = 44 and 14 + 10 + 3 x 6 = 42 (transformers); 72 + 6 + 3 x 4 = 90 and
    # 66 + 6 + 3 x 2 = 78 (vLLM).
    assert sr["engines"]["transformers"] == {
        "startup": 12.0, "first": 10.0, "update": 7.0, "generation": 3.0, "tokens": 50.0, "run": 43.0
    }  # fmt: skip
    assert sr["engines"]["vllm"] == {
        "startup": 69.0, "first": 6.0, "update": 3.0, "generation": 1.5, "tokens": 75.0, "run": 84.0
    }  # fmt: skip
    # Generation per token: seed 0, (4 / 50) / (1 / 100) = 8; seed 1, (2 / 50) / (2 / 50) = 1.
    assert sr["ratios"] == {"update": [2.0, 3.0], "generation per token": [8.0, 1.0], "run": [44 / 90, 42 / 78]}
    assert sr["seeds"] == [0, 1]
    assert list(summary["grpo"]["engines"]) == ["transformers"]
    assert summary["grpo"]["ratios"] == {"update": [], "generation per token": [], "run": []}
    meta = {"command": "c", "date": "d", "minutes": 1.0, "model": "m", "updates": 3, "prompts_per_update": 16,
            "learning_rate": 3e-5, "seeds": [0, 1], "machine": "x", "project_updates": 4}  # fmt: skip
    table = real_engine.markdown(summary, meta)
    assert "| sr-ppo | vllm | 69.0 | 6.0 | 3.00 | 1.50 | 75 | 84 | 2.00, 3.00 | 8.00, 1.00 | 0.49, 0.54 |" in table
    assert "| grpo | transformers | 9.0 | 5.0 | 5.00 | 2.00 | 10 | 29 |  |  |  |" in table
    assert "a 4-update run (s), projected" in table
    # A vLLM run that recorded no generation: its ratio is n/a, not a division by zero.
    silent = fake_run("sr-ppo", 0, [6.0, 10.0, 14.0], [0.0, 0.0, 0.0], [0, 0, 0], 90.0, 4.0)
    none = real_engine.summarize([runs[0], ("vllm", silent)], 4)["sr-ppo"]["ratios"]
    assert none["generation per token"] == [None]
    assert "| n/a |" in real_engine.markdown(
        {"sr-ppo": {"engines": {"vllm": sr["engines"]["vllm"]}, "ratios": none}}, meta
    )


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
        assert all(seconds[key] > 0 for key in ("startup", "first", "update", "generation", "tokens", "run"))
        name = real_engine.RunSpec(**spec).name + f"_{engine}"
        run = json.loads((tmp_path / "work" / f"{name}.json").read_text())
        sampled = any(key.startswith("sampling/importance_sampling_ratio") for entry in run["logs"] for key in entry)
        assert sampled == (engine == "vllm"), name
    for method in ("sr-ppo", "grpo"):
        assert len(results["summary"][method]["ratios"]["update"]) == 1
    assert "| sr-ppo | vllm |" in (tmp_path / "out" / "README.md").read_text()
