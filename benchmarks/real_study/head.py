# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The study's stage `head`: does a faster value head let the critic tell the problems apart within the study's run?

Stage `probe` found that the features a fresh critic's value head reads carry part of the problems' difficulty, yet
the trained critics end every run with nearly one value for every problem. A fresh head starts at zero, and AdamW
moves each weight by about the learning rate per step: 16 steps at the policy's 3e-5 move a head weight by at most
5e-4. A ridge head fitted offline on the same features spreads its values by an sd of about 0.1 (stage `probe`).

The stage trains default SR-PPO under the comparison's schedule (the stability stage's choice) at the chosen policy
and critic rates, with `critic_head_learning_rate` at each of `HEAD_RATES` and without it (the reference: the
critic's rate), on the sweep's seeds, and reads the validation split only: validation pass@1 at half and at the end,
and the critic's `qhat(s_0)` of every validation problem at the end (its AUC against the evaluation's outcomes, its
spread, and the spread of the Pass@k weights it gives). Descriptive: no choice is made from it, and the comparison
is not retrained with a head rate here.
"""

import numpy as np

from ..common.curves import point_at
from ..common.runspec import RunSpec
from ..common.tables import cell
from ..common.tables import table as markdown_table
from .design import arm_options
from .readings import final_metric, weight_ratio

HEAD_RATES = (1e-3, 3e-3)  # critic_head_learning_rate: about 30x and 100x the study's policy rate
HEAD_OPTION = "critic_head_learning_rate"


def head_specs(study, learning_rate: float, seeds, rate: float | None, schedule: tuple) -> list:
    """Default SR-PPO under `schedule` (`(prompts per update, options)`) at the chosen policy `learning_rate` and
    critic `rate`, without a head rate and with each of `HEAD_RATES`, on each of `seeds`, evaluated on the validation
    split at half and at the end."""
    prompts, schedule_options = schedule
    out = []
    for head in (None, *HEAD_RATES):
        options = (*arm_options("sr-ppo", rate, schedule_options), *(() if head is None else ((HEAD_OPTION, head),)))
        for seed in seeds:
            out.append(RunSpec("sr-ppo", "on", learning_rate, seed, study.updates, prompts, max(1, study.updates // 2),
                               study.val_samples, options=options))  # fmt: skip
    return out


def head_table(runs: list[dict], base_val: float) -> dict:
    """Per head rate (`None`: the reference), the runs' seeds, validation pass@1 at half and at the end, and the
    critic at the end: AUC of `qhat(s_0)`, its mean and sd over the problems, the largest / smallest Pass@k weight."""
    table = {}
    for head in (None, *HEAD_RATES):
        mine = sorted((r for r in runs if dict(map(tuple, r["spec"]["options"])).get(HEAD_OPTION) == head),
                      key=lambda r: r["spec"]["seed"])  # fmt: skip
        table[head] = [
            {
                "seed": r["spec"]["seed"],
                "half": point_at(r, max(1, r["spec"]["updates"] // 2)),
                "final": final_metric(r),
                "auc": r["final"].get("critic_auc_s0", float("nan")),
                "value_mean": float(np.mean(r["final"]["critic_s0"])),
                "value_sd": float(np.std(r["final"]["critic_s0"])),
                "weight_ratio": weight_ratio(r["final"]["critic_s0"], r["config"]["pass_at_k"]),
                "below_base": final_metric(r) < base_val,
                "seconds_per_update": r["training_seconds"] / r["spec"]["updates"],
            }
            for r in mine
            if "critic_s0" in r["final"]
        ]
    return table


def against(paired: list[tuple[dict, dict]], key: str, digits: int = 3) -> str:
    """`mean ± sd against mean ± sd` of `key` over the (run, reference run) pairs."""
    return f"{cell([r[key] for r, _ in paired], digits)} against {cell([q[key] for _, q in paired], digits)}"


def head_lines(table: dict, base: dict, schedule: tuple | None) -> list[str]:
    """The report's section on the head stage."""
    lines = ["## A faster value head, on the validation split", ""]
    if not any(table.values()):
        return lines + ["No run of the head stage has finished yet (`--stage head`).", ""]
    rows = []
    for head, runs in table.items():
        for r in runs:
            rows.append([
                "the critic's (reference)" if head is None else f"{head:g}", str(r["seed"]),
                f"{r['half']:.3f} -> {r['final']:.3f}", f"{r['auc']:.3f}",
                f"{r['value_mean']:.3f} / {r['value_sd']:.4f}", f"{r['weight_ratio']:.4f}",
                f"{r['seconds_per_update']:.1f}",
            ])  # fmt: skip
    lines += markdown_table(
        ["head rate", "seed", "val pass@1, half -> end", "AUC of qhat(s_0)", "qhat(s_0) mean / sd",
         "largest / smallest Pass@k weight", "s / update"],
        rows,
    )  # fmt: skip
    prompts = f"{schedule[0]} prompts per update" if schedule else "the comparison's schedule"
    lines += [
        "",
        f"Default SR-PPO under the comparison's schedule ({prompts}), `critic_head_learning_rate` as given (the "
        "reference leaves it unset: the critic's rate). The critic's columns read its `qhat(s_0)` of every "
        "validation problem at the last update, as in the critic stage; the base model's validation pass@1 is "
        f"{base['val']['pass@1']:.3f}.",
        "",
    ]
    for head in HEAD_RATES:
        runs, reference = table.get(head, []), {r["seed"]: r for r in table.get(None, [])}
        paired = [(r, reference[r["seed"]]) for r in runs if r["seed"] in reference]
        if paired:
            lines.append(
                f"- Head rate {head:g} against the reference, on the same {len(paired)} seed(s): AUC "
                f"{against(paired, 'auc')}; qhat(s_0) sd {against(paired, 'value_sd', 4)}; validation pass@1 "
                f"{against(paired, 'final')}; runs below the base model: {sum(r['below_base'] for r, _ in paired)}."
            )
    return lines + [""]
