# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`python -m benchmarks.costs.step_cost --quick`: every variant trains, the phases add up and the report is
written."""

import json

import pytest

from benchmarks.costs import step_cost


def test_quick_step_cost_writes_report(tmp_path):
    assert step_cost.main(["--quick", "--output-dir", str(tmp_path)]) == 0
    report = (tmp_path / "performance.md").read_text()
    for section in ("**Quick mode**", "## Seconds per step", "## Ratios", "## Memory", "Command:", "Machine:"):
        assert section in report, section
    result = json.loads((tmp_path / "performance.json").read_text())
    assert set(result["seconds"]) == {
        "grpo",
        "grpo-paper",
        "sr-ppo",
        "sr-ppo-separate",
        "sr-ppo-lora-critic",
        "sr-ppo-policy-head",
        "grpo-lora",
        "sr-ppo-policy-lora",
        "sr-ppo-pool-m2",
        "sr-ppo-pool-m4",
    }
    assert [result["variants"][n]["completions"] for n in ("grpo", "grpo-paper", "sr-ppo")] == [8, 16, 8]

    for name, steps in result["steps"].items():
        assert len(steps) == 1, name  # one counted round of one step in quick mode
        for step in steps:
            phases = sum(v for k, v in step.items() if k != "step")
            assert phases == pytest.approx(step["step"]), name
            assert step["generation"] > 0 and step["policy log-probs"] > 0 and step["rewards"] > 0, name
    grpo, fused, separate = (result["steps"][n][0] for n in ("grpo", "sr-ppo", "sr-ppo-separate"))
    assert grpo["critic values"] == grpo["critic update"] == 0.0
    assert fused["critic values"] == 0.0 and fused["critic update"] > 0  # values come from the update's forward
    assert separate["critic values"] > 0 and separate["critic update"] > 0
    head = result["steps"]["sr-ppo-policy-head"][0]
    assert head["critic values"] == 0.0 and head["critic update"] > 0  # values from the policy's forward; the step

    floor = result["seconds"]["grpo"]["step"] + result["seconds"]["sr-ppo"]["critic update"]
    assert result["ratios"]["floor_seconds"] == pytest.approx(floor)
    ratio = result["ratios"]["sr-ppo / grpo (equal completions)"]
    assert ratio["median"] == pytest.approx(result["seconds"]["sr-ppo"]["step"] / result["seconds"]["grpo"]["step"])

    memory = result["memory"]
    grpo_state, srppo_state = memory["grpo"]["state_bytes"], memory["sr-ppo"]["state_bytes"]
    assert not any(key.startswith("critic") for key in grpo_state)
    # float32 AdamW: two moments per trainable value (and one step counter per tensor).
    gradients = grpo_state["policy gradients"]
    assert 0 < grpo_state["policy weights"] - 1024 < gradients <= grpo_state["policy weights"]  # weights: + buffers
    assert 2 * gradients <= grpo_state["policy optimizer"] < 2 * gradients + 4096
    assert srppo_state["critic weights"] > 0 and 2 * srppo_state["critic gradients"] <= srppo_state["critic optimizer"]
    policy_part = {k: v for k, v in srppo_state.items() if k.startswith("policy")}
    assert policy_part == {k: v for k, v in grpo_state.items() if k.startswith("policy")}
    assert srppo_state["total"] == sum(v for k, v in srppo_state.items() if k != "total")
    lora = memory["sr-ppo-lora-critic"]["state_bytes"]  # the critic's frozen backbone has no gradient or moments
    assert lora["critic weights"] > srppo_state["critic weights"]  # the backbone plus the adapters
    assert lora["critic gradients"] < srppo_state["critic gradients"]  # only the adapters and the head learn
    assert 2 * lora["critic gradients"] <= lora["critic optimizer"] < 2 * lora["critic gradients"] + 4096
    head_state = memory["sr-ppo-policy-head"]["state_bytes"]  # a linear head, hidden 32 in quick mode, float32
    assert head_state["critic weights"] == head_state["critic gradients"] == (32 + 1) * 4
    assert {k: v for k, v in head_state.items() if k.startswith("policy")} == policy_part
    grpo_lora, policy_lora = memory["grpo-lora"]["state_bytes"], memory["sr-ppo-policy-lora"]["state_bytes"]
    # The critic adapter lives in the policy's model (counted there once, with its gradients); the critic's own
    # weights and gradients are the linear head's, and the base is held once: below a full-model critic's state.
    assert policy_lora["critic weights"] == policy_lora["critic gradients"] == (32 + 1) * 4
    assert policy_lora["policy weights"] > grpo_lora["policy weights"]  # plus the critic adapter
    assert policy_lora["total"] - grpo_lora["total"] < srppo_state["total"] - grpo_state["total"]
    assert all(memory[n]["peak_rss_bytes"] > 2**20 for n in memory)

    # The report can be rewritten from the JSON alone, with the same figures.
    again = tmp_path / "again"
    assert step_cost.main(["--from-json", str(tmp_path / "performance.json"), "--output-dir", str(again)]) == 0
    assert json.loads((again / "performance.json").read_text())["ratios"] == result["ratios"]
    rewritten = (again / "performance.md").read_text()
    assert "rewritten from the run's JSON" in rewritten
    assert rewritten.split("## Seconds per step")[1] == report.split("## Seconds per step")[1]


def test_prompt_pool_variants_time_the_pool_forward_beside_generation(tmp_path):
    variants = "sr-ppo,sr-ppo-pool-m2,sr-ppo-pool-m4"
    assert step_cost.main(["--quick", "--variants", variants, "--output-dir", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "performance.json").read_text())
    assert list(result["seconds"]) == variants.split(",")
    plain = result["steps"]["sr-ppo"][0]
    assert plain["prompt pool"] == 0.0  # no pool without prompt sampling
    for name, m in (("sr-ppo-pool-m2", 2), ("sr-ppo-pool-m4", 4)):
        spec = result["variants"][name]
        assert (spec["prompt_sampling"], spec["prompt_pool_factor"], spec["completions"]) == ("pass_at_k", m, 8)
        step = result["steps"][name][0]
        assert step["prompt pool"] > 0 and step["generation"] > 0, name
        assert sum(v for k, v in step.items() if k != "step") == pytest.approx(step["step"]), name
        # The pool's critic forward is counted in the pool's phase, not in the critic's values (the fused step).
        assert step["critic values"] == 0.0, name
    report = (tmp_path / "performance.md").read_text()
    table = report.split("## The prompt pool of prompt sampling")[1].split("## Ratios")[0]
    for name, m in (("sr-ppo-pool-m2", 2), ("sr-ppo-pool-m4", 4)):
        row = next(line for line in table.splitlines() if line.startswith(f"| {name} |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        seconds = result["seconds"][name]
        assert cells[1:3] == [str(m), str(8 * m)], row
        assert float(cells[5]) == pytest.approx(seconds["prompt pool"] / seconds["generation"], abs=1e-3), row
    assert "| sr-ppo |" not in table
    # A report rewritten from the JSON of a run from before the pool existed (no "prompt pool" phase) still builds.
    old = json.loads((tmp_path / "performance.json").read_text())
    for steps in old["steps"].values():
        for step in steps:
            del step["prompt pool"]
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert step_cost.main(["--from-json", str(tmp_path / "old.json"), "--output-dir", str(tmp_path / "again")]) == 0


def test_gpu_mode_runs_its_code_on_a_cpu_and_writes_its_own_report(tmp_path):
    """`--gpu --quick --device cpu`: the GPU mode's settings (bf16, gradient checkpointing, its report and memory
    columns) on the tiny model, every variant; the CPU mode's report is not touched."""
    assert step_cost.main(["--gpu", "--quick", "--device", "cpu", "--output-dir", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["performance_gpu.json", "performance_gpu.md"]
    report = (tmp_path / "performance_gpu.md").read_text()
    result = json.loads((tmp_path / "performance_gpu.json").read_text())
    names = list(step_cost.variants(8))
    assert len(names) == 10 and list(result["seconds"]) == list(result["memory"]) == names
    setup = result["setup"]
    assert (setup["gpu"], setup["device"], setup["dtype"], setup["gradient_checkpointing"]) == (
        True,
        "cpu",
        "bfloat16",
        True,
    )
    assert "on the CPU in bfloat16" in report and "`critic_dtype='bfloat16'`" in report
    assert "**GPU mode on a CPU**" in report and "say nothing about a GPU" in report

    # The weights, gradients and AdamW moments are bf16: 2 bytes per parameter of the quick model.
    parameters = sum(p.numel() for p in step_cost.build_model(step_cost.SIZES["quick"]).parameters())
    for name in ("grpo", "sr-ppo", "sr-ppo-policy-head"):
        state = result["memory"][name]["state_bytes"]
        assert state["policy gradients"] == 2 * parameters, name
        assert 2 * state["policy gradients"] <= state["policy optimizer"] < 2 * state["policy gradients"] + 4096
    critic = result["memory"]["sr-ppo"]["state_bytes"]
    assert critic["critic gradients"] == 2 * (parameters + 32 + 1)  # the backbone and a linear head on hidden 32

    # Memory columns: the training state and the peak RSS of every variant, and the GPU column, empty on a CPU.
    header = next(line for line in report.splitlines() if line.startswith("| variant | policy weights"))
    assert header.endswith(
        "| training state (MiB) | vs grpo (LoRA rows: vs grpo-lora) | peak RSS (MiB) | "
        "peak GPU memory allocated (MiB) |"
    )
    for name in names:
        row = next(line for line in report.split("## Memory")[1].splitlines() if line.startswith(f"| {name} |"))
        assert row.endswith("| - (CPU run) |") and len(row.split("|")) == len(header.split("|")), row
        assert result["memory"][name]["peak_gpu_bytes"] is None
        assert result["memory"][name]["peak_rss_bytes"] > 2**20
        assert f"| {name} |" in report.split("## Seconds per step")[1].split("## Share")[0]
    for step in (s for steps in result["steps"].values() for s in steps):
        assert sum(v for k, v in step.items() if k != "step") == pytest.approx(step["step"])

    # The report rewritten from a JSON holding two of the variants: only their ratio, no floor, no grpo baseline.
    for key in ("seconds", "memory", "steps", "variants"):
        result[key] = {n: v for n, v in result[key].items() if n in ("grpo-paper", "sr-ppo-policy-head")}
    (tmp_path / "subset.json").write_text(json.dumps(result))
    again = tmp_path / "again"
    assert step_cost.main(["--from-json", str(tmp_path / "subset.json"), "--output-dir", str(again)]) == 0
    subset = json.loads((again / "performance_gpu.json").read_text())
    assert list(subset["ratios"]) == ["sr-ppo-policy-head / grpo-paper (per update, paper's matching)"]
    seconds = subset["seconds"]
    assert subset["ratios"]["sr-ppo-policy-head / grpo-paper (per update, paper's matching)"]["median"] == (
        pytest.approx(seconds["sr-ppo-policy-head"]["step"] / seconds["grpo-paper"]["step"])
    )
    rewritten = (again / "performance_gpu.md").read_text()
    assert "No floor" in rewritten
    assert "| sr-ppo-policy-head | " in rewritten and "| - | " in rewritten.split("## Memory")[1]


def test_ratios_of_a_subset_of_variants():
    def variant(step, values, update):  # one round: medians of the step and the critic phases
        return {"step": step, "critic values": values, "critic update": update, "rounds": []}

    summary = {"grpo": variant(2.0, 0.0, 0.0), "sr-ppo": variant(2.6, 0.0, 0.4)}
    summary["grpo"]["rounds"] = [{"step": 2.0, "critic values": 0.0, "critic update": 0.0}, {"step": 1.0}]
    summary["grpo"]["rounds"][1].update({"critic values": 0.0, "critic update": 0.0})
    summary["sr-ppo"]["rounds"] = [
        {"step": 2.6, "critic values": 0.0, "critic update": 0.4},
        {"step": 1.5, "critic values": 0.0, "critic update": 0.3},
    ]
    out = step_cost.ratios(summary)
    assert set(out) == {
        "floor_seconds",
        "sr-ppo / grpo (equal completions)",
        "sr-ppo / floor (grpo + one critic forward and backward)",
    }
    assert out["floor_seconds"] == pytest.approx((2.4 + 1.3) / 2)
    assert out["sr-ppo / grpo (equal completions)"]["rounds"] == pytest.approx([1.3, 1.5])
    assert out["sr-ppo / floor (grpo + one critic forward and backward)"]["rounds"] == pytest.approx(
        [2.6 / 2.4, 1.5 / 1.3]
    )
    assert out["sr-ppo / floor (grpo + one critic forward and backward)"]["of_overall_medians"] == pytest.approx(
        2.6 / 2.4
    )
    assert step_cost.ratios({"grpo": summary["grpo"]}) == {}


def test_phase_timer_synchronizes_around_every_phase():
    events = []
    timer = step_cost.PhaseTimer(lambda: events.append("sync"))

    class Critic:
        def __init__(self, trainer):
            self.trainer = trainer

        def update(self):
            events.append("critic")
            self.trainer._generate()  # nested in a timed phase: not timed, not synchronized again

    class Trainer:
        def __init__(self):
            self.critic_backend = Critic(self)

        def _generate(self):
            events.append("generate")

    trainer = Trainer()
    timer.wrap(trainer)
    boundaries = timer.callback()
    boundaries.on_step_begin(None, None, None)
    trainer._generate()
    trainer.critic_backend.update()
    boundaries.on_step_end(None, None, None)
    assert events == ["sync", "sync", "generate", "sync", "sync", "critic", "generate", "sync", "sync"]
    (step,) = timer.steps
    assert step["generation"] > 0 and step["critic update"] > 0 and step["critic values"] == 0.0


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--gpu", "--device", "cpu"], "add --quick"),
        (["--quick", "--device", "cpu"], "--device applies to the GPU mode only"),
        (["--quick", "--variants", "grpo,sr-ppo-typo"], "unknown ['sr-ppo-typo']"),
        (["--quick", "--completion-tokens", "0"], "--completion-tokens must be at least 1"),
    ],
)
def test_bad_options_name_the_fix(argv, message, capsys, tmp_path):
    with pytest.raises(SystemExit):
        step_cost.main(argv + ["--output-dir", str(tmp_path)])
    assert message in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_gpu_mode_without_cuda_says_what_to_do(capsys, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is visible here")
    with pytest.raises(SystemExit):
        step_cost.main(["--gpu", "--output-dir", str(tmp_path)])
    error = capsys.readouterr().err
    assert "--gpu needs a CUDA GPU" in error and "--gpu --quick --device cpu" in error
    assert not any(tmp_path.iterdir())
