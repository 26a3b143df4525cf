# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The study's stage `probe`: could the critic's value head tell the test problems apart from the features it reads?

The study's separate critic ends every run with nearly one value for every problem (`qhat(s_0)` sd about 0.0004 over
the test problems, AUC near 0.5), so the Pass@k weight is the same for every prompt. Two explanations predict that:
the features the head reads do not carry the problems' difficulty (then no critic rate or horizon fixes it), or they
do and 16 updates at the critic's rate move the head too little (then a faster head would). The stage separates the
two without training the critic:

- **Features.** The base model's final hidden state (after its last norm) at the last prompt token of each test
  problem, the prompt rendered by its chat template with the generation prompt: what a fresh separate critic's
  linear value head reads for `qhat(s_0)` (`AutoModelForTokenClassification` on the same checkpoint).
- **Labels.** A run's own evaluation: each test problem's correct samples at the last update.
- **The probe.** Ridge regression of the problems' success rates on the standardised features, its strength chosen
  by an inner cross-validation; every problem is predicted by a fit that never saw it (`PROBE_FOLDS` folds over the
  problems, fixed by `PROBE_SEED`). Scored as the report scores the critic: the pooled AUC, each sample scored by
  its problem's predicted value and labelled by its verified outcome.
- **Beside it, on the same labels.** The run's critic's AUC; the levels' mean success from the same training folds
  (a value that knows only the problem's level); and the problems' own success rates (in-sample: the most any
  per-problem value can reach on these samples).
"""

import numpy as np

from ..common.stats import paired_t
from ..common.tables import cell, fmt_difference, table
from ..smollm2.task import as_example

PROBE_ALPHAS = (1e-1, 1.0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7)  # the ridge strengths the inner cross-validation
# picks from; at the top, the fit is all but the training folds' mean (no signal found)
PROBE_FOLDS = 5
PROBE_SEED = 0


def prompt_features(model, tokenizer, prompts: list) -> np.ndarray:
    """`(N, H)` final hidden states (after the model's last norm) at the last token of each rendered prompt, one
    unpadded forward per prompt: what a linear value head on the checkpoint reads for `qhat(s_0)`."""
    import torch

    from trl_srppo.evaluation.prompts import render_prompt

    rows = []
    with torch.no_grad():
        for prompt in prompts:
            text = render_prompt(tokenizer, prompt)
            ids = tokenizer(text, return_tensors="pt", add_special_tokens=False)["input_ids"]  # (1, P)
            hidden = model(input_ids=ids).last_hidden_state  # (1, P, H)
            rows.append(hidden[0, -1].float().numpy())
    return np.stack(rows)


def ridge_fit(x: np.ndarray, y: np.ndarray, alpha: float) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
    """Ridge regression of `y` `(N,)` on `x` `(N, H)`, the columns standardised on `x` and the intercept not
    penalised; solved in the dual, `w = X^T (X X^T + alpha I)^{-1} (y - mean y)` (N is below H here).

    Returns `(w, b, mean, scale)`: predict with `((x - mean) / scale) @ w + b`."""
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale == 0] = 1.0
    z = (x - mean) / scale  # (N, H)
    b = float(y.mean())
    w = z.T @ np.linalg.solve(z @ z.T + alpha * np.eye(len(y)), y - b)  # (H,)
    return w, b, mean, scale


def ridge_predict(fit: tuple, x: np.ndarray) -> np.ndarray:
    w, b, mean, scale = fit
    return ((x - mean) / scale) @ w + b  # (N,)


def folds_of(n: int, folds: int, seed: int) -> list[np.ndarray]:
    """`folds` disjoint index sets covering `range(n)`, from a permutation fixed by `seed`."""
    order = np.random.default_rng(seed).permutation(n)
    return [np.sort(part) for part in np.array_split(order, folds)]


def splits(n: int, folds: int, seed: int):
    """`(keep, held)` per fold of [`folds_of`]: the other folds' indices and the fold's."""
    for held in folds_of(n, folds, seed):
        yield np.setdiff1d(np.arange(n), held), held


def choose_alpha(x: np.ndarray, y: np.ndarray, alphas=PROBE_ALPHAS, folds: int = PROBE_FOLDS, seed: int = PROBE_SEED):
    """The ridge strength with the lowest cross-validated squared error on `(x, y)` (ties: the strongest)."""
    errors = []
    for alpha in alphas:
        error = 0.0
        for keep, held in splits(len(y), folds, seed):
            error += float(((ridge_predict(ridge_fit(x[keep], y[keep], alpha), x[held]) - y[held]) ** 2).sum())
        errors.append(error)
    best = min(errors)
    return max(a for a, e in zip(alphas, errors) if e <= best * (1 + 1e-12))


def probe_predictions(x: np.ndarray, y: np.ndarray, folds: int = PROBE_FOLDS, seed: int = PROBE_SEED) -> dict:
    """Every problem's value predicted by a ridge fit on the other folds (its strength chosen inside them).

    Returns `values` `(N,)` and the `alphas` chosen per fold."""
    values = np.empty(len(y))
    alphas = []
    for keep, held in splits(len(y), folds, seed):
        alpha = choose_alpha(x[keep], y[keep], folds=folds, seed=seed + 1)
        values[held] = ridge_predict(ridge_fit(x[keep], y[keep], alpha), x[held])
        alphas.append(alpha)
    return {"values": values, "alphas": alphas}


def level_predictions(levels: list[str], y: np.ndarray, folds: int = PROBE_FOLDS, seed: int = PROBE_SEED):
    """`(N,)`: each problem's value is its level's mean success over the other folds (the training folds' overall
    mean where they hold none of its level)."""
    levels = np.asarray(levels)
    values = np.empty(len(y))
    for keep, held in splits(len(y), folds, seed):
        for i in held:
            same = keep[levels[keep] == levels[i]]
            values[i] = y[same].mean() if len(same) else y[keep].mean()
    return values


def sample_auc(values, counts: list[int], samples: int) -> float:
    """The report's pooled AUC: each of a problem's `samples` samples scored by its problem's value and labelled by
    its outcome (`counts` correct)."""
    from trl_srppo.analysis.critic_quality import pooled_auc

    return pooled_auc([([float(v)] * samples, [1] * c + [0] * (samples - c)) for v, c in zip(values, counts)])


def probe_run(features: np.ndarray, counts: list[int], samples: int, levels: list[str]) -> dict:
    """The probe and its neighbours on one run's evaluation (`counts` correct of `samples` per problem)."""
    y = np.asarray(counts, dtype=float) / samples  # (N,)
    probe = probe_predictions(features, y)
    return {
        "probe_auc": sample_auc(probe["values"], counts, samples),
        "level_auc": sample_auc(level_predictions(levels, y), counts, samples),
        "oracle_auc": sample_auc(y, counts, samples),
        "probe_sd": float(np.std(probe["values"])),
        "probe_r2": float(1 - ((probe["values"] - y) ** 2).sum() / max(((y - y.mean()) ** 2).sum(), 1e-12)),
        "alphas": probe["alphas"],
    }


# ---- the stage and its report ---------------------------------------------------------------------------------------


def probe_stage(model_path: str, test_rows: list[dict], base: dict, runs: list[dict], samples: int) -> dict:
    """The probe on the base model's test evaluation and on each of `runs` (default SR-PPO runs of the comparison
    whose critic's values were recorded), all from one set of features of the base checkpoint."""
    import time

    from transformers import AutoModel, AutoTokenizer

    start = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModel.from_pretrained(model_path, use_safetensors=True).eval()
    features = prompt_features(model, tokenizer, [as_example(r)["prompt"] for r in test_rows])  # (N, H)
    feature_seconds = time.perf_counter() - start
    levels = [r["level"] for r in test_rows]
    out = {"features": list(features.shape), "feature_seconds": feature_seconds,
           "base": probe_run(features, base["test"]["correct_counts"], samples, levels), "runs": []}  # fmt: skip
    for run in runs:
        final = run["final"]
        entry = probe_run(features, final["correct_counts"], samples, levels)
        entry.update(name=run["name"], seed=run["spec"]["seed"], prompts_per_update=run["spec"]["prompts_per_update"],
                     pass1=final["pass@1"], critic_auc=final["critic_auc_s0"],
                     critic_sd=float(np.std(final["critic_s0"])))  # fmt: skip
        out["runs"].append(entry)
    return out


def number(value, digits: int = 3) -> str:
    """`value` to `digits` places; `n/a` for an undefined one (an AUC where every sample has one outcome)."""
    return "n/a" if value is None or not np.isfinite(value) else f"{value:.{digits}f}"


def probe_lines(probe: dict | None) -> list[str]:
    """The report's section on the probe."""
    if not probe:
        return []
    runs = sorted(probe["runs"], key=lambda r: (r["prompts_per_update"], r["seed"]))
    aucs = ("probe_auc", "level_auc", "oracle_auc")
    rows = [["base model", "-", "-", "n/a", *(number(probe["base"][k]) for k in aucs), "n/a",
             number(probe["base"]["probe_sd"])]]  # fmt: skip
    for r in runs:
        rows.append(
            [f"SR-PPO, seed {r['seed']}", str(r["prompts_per_update"]), number(r["pass1"]), number(r["critic_auc"])]
            + [number(r[k]) for k in aucs]
            + [number(r["critic_sd"], 4), number(r["probe_sd"])]
        )
    if len(runs) > 1:
        rows.append(
            ["mean ± sd of the runs", "", cell([r["pass1"] for r in runs])]
            + [cell([r[k] for r in runs]) for k in ("critic_auc", *aucs)]
            + [cell([r["critic_sd"] for r in runs], 4), cell([r["probe_sd"] for r in runs])]
        )
    header = ["labels: the test evaluation of", "prompts per update", "test pass@1", "critic AUC", "probe AUC",
              "level-mean AUC", "own-rate AUC (most possible)", "critic's qhat(s_0), sd over problems",
              "probe's values, sd over problems"]  # fmt: skip
    lines = [
        "## Could the critic tell the problems apart? A linear probe on its features (test split)",
        "",
        *table(header, rows),
        "",
        f"`benchmarks/real_study/probe.py` (`--stage probe`, {probe['feature_seconds']:.0f} s for the features of "
        f"{probe['features'][0]} problems, width {probe['features'][1]}): ridge regression of each test problem's "
        "success rate on the base checkpoint's final hidden state at its last prompt token (what a fresh separate "
        "critic's value head reads for `qhat(s_0)`), each problem predicted by a fit on the other folds. Every AUC "
        "pools the evaluation's samples, each scored by its problem's value: the critic's `qhat(s_0)` at the run's "
        "last update, the probe's prediction, its level's mean success in the training folds, or its own success "
        "rate (in-sample, the most a per-problem value can reach). A value from the other folds (the level's mean, "
        "the probe's intercept) is a little lower where the held-out fold's own success is higher, which pulls its "
        "AUC a little below what it would be on fresh problems.",
    ]
    if probe.get("not_probed"):
        lines += ["", f"Not probed yet (finished after the stage ran; run `--stage probe` again): "
                  f"{', '.join(probe['not_probed'])}."]  # fmt: skip
    for prompts in sorted({r["prompts_per_update"] for r in runs}):
        group = [r for r in runs if r["prompts_per_update"] == prompts]
        gap = paired_t([r["probe_auc"] for r in group], [r["critic_auc"] for r in group])
        level = paired_t([r["probe_auc"] for r in group], [r["level_auc"] for r in group])
        lines += [
            "",
            f"- {prompts} prompts per update: probe minus the run's critic {fmt_difference(gap)}; probe minus the "
            f"level's mean {fmt_difference(level)}.",
        ]
    return lines + [""]
