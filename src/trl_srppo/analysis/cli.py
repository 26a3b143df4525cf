# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""`trl-srppo analyze <measurement>`: the paper's analyses on a policy and critic checkpoint.

Measurements (each writes `<name>.json`, `<name>.md` and `<name>.png` into `--output-dir`):

- `bins`: difficulty bins from `n` rollouts per prompt and each bin's share of the update weight, with and without
  the Pass@k weight.
- `nsr`: gradient noise-to-signal ratio per prompt, per bin and for the whole batch, with and without the weight.
- `cross-bin`: change in the log-probability of each bin's correct completions after a step on each bin, and the
  cosine similarity of the bins' gradients.
- `critic-export`: sample solutions and write `critic_labelling.jsonl` for an external judge to label.
- `critic-quality`: within-prompt and pooled AUC of the critic on the labelled file, and values by bin.
- `safe-region`: the safe region of the policy's matrices and where an update's realised bf16 changes fall, for a
  trained checkpoint (`--updated`) or for one step on each bin's rollouts.

Example:

    trl-srppo analyze nsr --policy ckpt --critic ckpt/critic --dataset data.jsonl --reward math -n 8 --output-dir out
"""

import argparse
import os

import torch

from .bins import BINS, update_weight_share
from .critic_quality import (
    LABEL_FIELDS,
    critic_quality,
    export_for_labelling,
    read_labelled,
    sentence_scores,
    split_sentences,
)
from .cross_bin import cross_bin_effects
from .noise import SKETCH_KINDS, RandomSketch
from .policy import measure_nsr, surrogate_gradients
from .report import bar_figure, fmt, heatmap_figure, markdown_table, write_outputs
from .rollouts import (
    critic_rollout_values,
    generate_rollouts,
    load_prompts,
    render_prompt,
    resolve_reward_func,
    rollout_advantages,
    score_rollouts,
)
from .safe_region import compute_safe_masks, gradient_step, matrix_names, safe_region_share, update_safe_fraction

# ---- arguments ------------------------------------------------------------------------------------------------------


def _add_model_args(p: argparse.ArgumentParser, critic: bool = True) -> None:
    p.add_argument("--policy", required=True, help="policy checkpoint (folder or Hub id); its tokenizer is used")
    if critic:
        p.add_argument("--critic", help="critic checkpoint (folder or Hub id), loaded with trl_srppo.load_critic")
        p.add_argument("--critic-head", default="sigmoid", choices=("sigmoid", "linear"), help="critic's head")
    p.add_argument("--device", default="auto", help="'auto' (cuda when available), 'cpu', 'cuda', ...")
    p.add_argument("--dtype", default="float32", help="weights' dtype: float32, bfloat16 or float16")
    p.add_argument("--output-dir", required=True, help="folder for the json, md and png files")
    p.add_argument("--batch-size", type=int, default=8, help="rows per forward pass (and prompts per generate call)")


def _add_rollout_args(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--dataset", required=required, help="local .json/.jsonl file or Hub dataset with a prompt column")
    p.add_argument("--split", default="train", help="split of a Hub dataset")
    p.add_argument("--prompt-column", default="prompt")
    p.add_argument("--num-prompts", type=int, default=None, help="use the first N prompts (default: all)")
    p.add_argument("--reward", required=required, help="registered reward name (math, countdown, ...) or dotted path")
    p.add_argument("-n", "--num-rollouts", type=int, default=8, help="rollouts per prompt (bins: 8 in the paper)")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pass-at-k", type=int, default=4, help="k of the Pass@k weight ('without' uses k = 1)")
    p.add_argument("--gae-lambda", type=float, default=1.0)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="trl-srppo analyze", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="measurement", required=True)

    p = sub.add_parser("bins", help="difficulty bins and each bin's share of the update weight")
    _add_model_args(p)
    _add_rollout_args(p)

    p = sub.add_parser("nsr", help="gradient noise-to-signal ratio per prompt, bin and batch")
    _add_model_args(p)
    _add_rollout_args(p)
    p.add_argument("--sketch-dim", type=int, default=0, help="project gradients to this dimension (0: exact)")
    p.add_argument("--sketch-kind", default="gaussian", choices=SKETCH_KINDS)
    p.add_argument("--eps", type=float, default=1e-12, help="NSR is infinite when the signal is at most eps")

    p = sub.add_parser("cross-bin", help="cross-bin log-probability changes and gradient cosines")
    _add_model_args(p)
    _add_rollout_args(p)
    p.add_argument("--learning-rate", type=float, default=1e-3, help="step size of the trial step")
    p.add_argument("--normalize-step", action="store_true", help="step lr * g / ||g|| (same length for every bin)")

    p = sub.add_parser("critic-export", help="write the JSONL of sentences for an external judge")
    _add_model_args(p)  # --critic is optional here: with it, each sentence also gets the critic's score
    _add_rollout_args(p)

    p = sub.add_parser("critic-quality", help="AUC of the critic on the labelled JSONL, and values by bin")
    _add_model_args(p)
    p.add_argument("--labelled", required=True, help="the JSONL written by critic-export, with labels filled in")

    p = sub.add_parser("safe-region", help="safe region of the weights and the realised changes of an update")
    _add_model_args(p)
    p.add_argument("--updated", help="a trained checkpoint: measure its update from --policy (no rollouts needed)")
    p.add_argument("--rank", type=int, default=16, help="rank of the reconstruction for the principal mask")
    p.add_argument("--fraction", type=float, default=0.3, help="share of entries in each mask")
    p.add_argument("--learning-rate", type=float, default=1e-6, help="step size of the per-bin update")
    p.add_argument("--optimizer", default="adam", choices=("adam", "sgd"), help="first step of this optimizer")
    _add_rollout_args(p, required=False)  # needed only without --updated
    return parser


# ---- loading --------------------------------------------------------------------------------------------------------


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def _load_policy(args):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.policy)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(args.policy, dtype=getattr(torch, args.dtype))
    return model.to(_device(args.device)), tokenizer


def _load_critic(args):
    from ..critic import load_critic

    if not getattr(args, "critic", None):
        raise SystemExit(f"trl-srppo analyze {args.measurement}: --critic is required.")
    critic = load_critic(args.critic, {"dtype": getattr(torch, args.dtype)})
    return critic.to(_device(args.device)).eval()


def _rollouts(args, model, tokenizer, critic=None):
    for name in ("dataset", "reward"):
        if not getattr(args, name, None):
            raise SystemExit(f"trl-srppo analyze {args.measurement}: --{name} is required.")
    data = load_prompts(args.dataset, args.split, args.num_prompts, args.prompt_column)
    columns = {c: data[c] for c in data.column_names if c != args.prompt_column}
    rollouts = generate_rollouts(
        model,
        tokenizer,
        data[args.prompt_column],
        num_rollouts=args.num_rollouts,
        temperature=args.temperature,
        max_new_tokens=args.max_new_tokens,
        seed=args.seed,
        batch_size=args.batch_size,
        columns=columns,
    )
    score_rollouts(rollouts, resolve_reward_func(args.reward))
    if critic is not None:
        critic_rollout_values(critic, rollouts, args.critic_head, args.batch_size)
    return rollouts


def _bin_counts(bins: list[str]) -> dict[str, int]:
    return {b: bins.count(b) for b in BINS}


# ---- measurements ---------------------------------------------------------------------------------------------------


def run_bins(args) -> dict:
    model, tokenizer = _load_policy(args)
    rollouts = _rollouts(args, model, tokenizer, _load_critic(args))
    bins, row_bins = rollouts.prompt_bins(), rollouts.rollout_bins()
    counts = torch.zeros(rollouts.num_prompts, dtype=torch.long).index_add_(
        0, rollouts.prompt_index, rollouts.correct.long()
    )
    shares = {}
    for name, k in (("weighted", args.pass_at_k), ("unweighted", 1)):
        estimate = rollout_advantages(rollouts, k, args.gae_lambda)
        shares[name] = update_weight_share(estimate["weights"], estimate["advantages"], estimate["mask"], row_bins)
    results = {
        "num_rollouts": rollouts.num_rollouts,
        "pass_at_k": args.pass_at_k,
        "bin_counts": _bin_counts(bins),
        "per_prompt": [{"prompt": p, "num_correct": int(c), "bin": b} for p, (c, b) in enumerate(zip(counts, bins))],
        "update_weight_share": shares,
    }
    rows = [
        [
            b,
            results["bin_counts"][b],
            shares["unweighted"]["prompt_weight"][b],
            shares["weighted"]["prompt_weight"][b],
            shares["unweighted"]["advantage_mass"][b],
            shares["weighted"]["advantage_mass"][b],
        ]
        for b in BINS
    ]
    md = (
        f"# Difficulty bins (n = {rollouts.num_rollouts}, Pass@{args.pass_at_k} weight)\n\n"
        + markdown_table(
            [
                "bin",
                "prompts",
                "weight share k=1",
                f"weight share k={args.pass_at_k}",
                "abs-advantage share k=1",
                f"abs-advantage share k={args.pass_at_k}",
            ],
            rows,
        )
        + "\nweight share: sum of the rollouts' prompt weights w_k(qhat(s_0)) (1 each without the weight); "
        "abs-advantage share: sum of |A_t| over tokens.\n"
    )
    fig = bar_figure(
        list(BINS),
        {"without weight": [r[2] for r in rows], f"Pass@{args.pass_at_k} weight": [r[3] for r in rows]},
        "Share of the total update weight",
        "share",
    )
    write_outputs(args.output_dir, "bins", results, md, fig)
    return results


def run_nsr(args) -> dict:
    model, tokenizer = _load_policy(args)
    rollouts = _rollouts(args, model, tokenizer, _load_critic(args))
    sketch = RandomSketch(args.sketch_dim, args.seed, args.sketch_kind) if args.sketch_dim > 0 else None
    results = measure_nsr(
        model, rollouts, args.pass_at_k, args.gae_lambda, sketch, args.batch_size, args.eps, args.temperature
    )
    results["sketch_dim"] = args.sketch_dim
    rows = []
    for b in BINS:
        cell = results["per_bin"][b]
        rows.append(
            [
                b,
                cell["weighted"]["prompts"]["num_prompts"],
                cell["unweighted"]["prompts"]["median"],
                cell["unweighted"]["pooled"]["nsr"],
                cell["weighted"]["pooled"]["nsr"],
            ]
        )
    batch = results["batch"]
    rows.append(["batch", rollouts.num_prompts, "", batch["unweighted"]["nsr"], batch["weighted"]["nsr"]])
    md = (
        f"# Gradient noise-to-signal ratio (R = {rollouts.num_rollouts} replicas, Pass@{args.pass_at_k})\n\n"
        + markdown_table(["bin", "prompts", "median per-prompt NSR", "NSR k=1", f"NSR k={args.pass_at_k}"], rows)
        + "\nPer-prompt NSR does not depend on the Pass@k weight (one weight per prompt). Bin/batch replica r: the "
        "gradient of the batch made of rollout r of every prompt.\n"
    )
    fig = bar_figure(
        list(BINS) + ["batch"],
        {"without weight": [r[3] for r in rows], f"Pass@{args.pass_at_k} weight": [r[4] for r in rows]},
        "Gradient noise-to-signal ratio",
        "NSR",
        log=True,
    )
    write_outputs(args.output_dir, "nsr", results, md, fig)
    return results


def run_cross_bin(args) -> dict:
    model, tokenizer = _load_policy(args)
    rollouts = _rollouts(args, model, tokenizer, _load_critic(args))
    results = cross_bin_effects(
        model,
        rollouts,
        args.pass_at_k,
        args.learning_rate,
        args.normalize_step,
        args.gae_lambda,
        args.batch_size,
        args.temperature,
    )
    md = f"# Cross-bin effects (lr = {args.learning_rate}, Pass@{args.pass_at_k})\n\nprompts per bin: " + ", ".join(
        f"{b} {n}" for b, n in results["bin_sizes"].items()
    )
    for name in ("weighted", "unweighted"):
        for key, title in (("logprob_change", "change in mean log pi(correct) of column bin"), ("cosine", "cosine")):
            md += f"\n\n## {name}: {title} (row: bin of the update)\n\n"
            md += markdown_table(["from \\ to", *BINS], [[b, *row] for b, row in zip(BINS, results[name][key])])
    matrices = {
        f"{name} {key}": results[name][key]
        for name in ("weighted", "unweighted")
        for key in ("logprob_change", "cosine")
    }
    write_outputs(args.output_dir, "cross_bin", results, md, heatmap_figure(matrices, list(BINS), "Cross-bin effects"))
    return results


def run_critic_export(args) -> dict:
    model, tokenizer = _load_policy(args)
    rollouts = _rollouts(args, model, tokenizer)
    bins = rollouts.prompt_bins()
    counts = torch.zeros(rollouts.num_prompts, dtype=torch.long).index_add_(
        0, rollouts.prompt_index, rollouts.correct.long()
    )
    records = []
    for i, completion in enumerate(rollouts.completions):
        p = int(rollouts.prompt_index[i])
        reward = float(rollouts.rewards[i])
        records.append(
            {
                "prompt_id": p,
                "rollout_id": i % rollouts.num_rollouts,
                "prompt": rollouts.prompts[p],
                "completion": completion,
                "reward": reward if reward == reward else None,
                "num_correct": int(counts[p]),
                "num_rollouts": rollouts.num_rollouts,
                "bin": bins[p],
            }
        )
    os.makedirs(args.output_dir, exist_ok=True)
    path = os.path.join(args.output_dir, "critic_labelling.jsonl")
    if getattr(args, "critic", None):
        critic = _load_critic(args)
        for record in records:
            prompt_text = render_prompt(tokenizer, record["prompt"])
            scored = sentence_scores(critic, tokenizer, prompt_text, record["completion"], args.critic_head)
            record["critic_sentence_values"] = scored["sentence_values"]
    num_sentences = export_for_labelling(path, records)
    per_solution = [len(split_sentences(r["completion"])) for r in records]
    results = {
        "file": path,
        "num_prompts": rollouts.num_prompts,
        "num_solutions": len(records),
        "num_sentences": num_sentences,
        "bin_counts": _bin_counts(bins),
        "label_fields": list(LABEL_FIELDS),
    }
    md = "# Critic labelling export\n\n" + markdown_table(
        ["file", "prompts", "solutions", "sentences"], [[path, rollouts.num_prompts, len(records), num_sentences]]
    )
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3))
    ax.hist(per_solution, bins=max(1, min(30, len(set(per_solution)))))
    ax.set_xlabel("sentences per solution")
    ax.set_ylabel("solutions")
    write_outputs(args.output_dir, "critic_export", results, md, fig)
    return results


def run_critic_quality(args) -> dict:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.policy)
    critic = _load_critic(args)
    records = read_labelled(args.labelled)
    results = critic_quality(records, critic, tokenizer, args.critic_head)
    rows = [
        [
            name,
            results[name]["within_prompt"]["mean_auc"],
            results[name]["within_prompt"]["num_kept"],
            results[name]["within_prompt"]["num_excluded"],
            results[name]["pooled_auc"],
        ]
        for name in LABEL_FIELDS
    ]
    by_bin = results["by_bin"]
    md = (
        "# Critic quality\n\n"
        + markdown_table(["label", "within-prompt AUC", "prompts kept", "prompts excluded", "pooled AUC"], rows)
        + "\n## Critic value by difficulty bin\n\n"
        + markdown_table(
            ["bin", "prompts", "mean token value", "mean V(s_0)", "success rate"],
            [
                [
                    b,
                    by_bin["token_value"][b]["num_prompts"],
                    by_bin["token_value"][b]["mean_value"],
                    by_bin["prompt_value"][b]["mean_value"],
                    by_bin["token_value"][b]["success_rate"],
                ]
                for b in BINS
            ],
        )
    )
    fig = bar_figure(
        list(BINS),
        {
            "mean token value": [by_bin["token_value"][b]["mean_value"] for b in BINS],
            "success rate": [by_bin["token_value"][b]["success_rate"] for b in BINS],
        },
        "Critic value against success rate",
        "value",
    )
    write_outputs(args.output_dir, "critic_quality", results, md, fig)
    return results


def _named_views(model, flat: torch.Tensor) -> dict[str, torch.Tensor]:
    views, offset = {}, 0
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        views[name] = flat[offset : offset + p.numel()].view_as(p)
        offset += p.numel()
    return views


def run_safe_region(args) -> dict:
    model, tokenizer = _load_policy(args)
    names = matrix_names(model)
    masks = compute_safe_masks(model, args.rank, args.fraction, names)
    params = dict(model.named_parameters())
    before = {n: params[n].detach() for n in names}
    updates = {}
    if args.updated:
        from transformers import AutoModelForCausalLM

        other = dict(AutoModelForCausalLM.from_pretrained(args.updated, dtype=torch.float32).named_parameters())
        updates["checkpoint"] = update_safe_fraction(masks, before, {n: other[n].detach() for n in names})
    else:
        rollouts = _rollouts(args, model, tokenizer, _load_critic(args))
        row_bins = rollouts.rollout_bins()
        sets = [rollout_advantages(rollouts, args.pass_at_k, args.gae_lambda)["advantages"]]
        for b in BINS:
            rows = [i for i, rb in enumerate(row_bins) if rb == b]
            if not rows:
                updates[b] = {"num_changed": 0, "num_changed_safe": 0, "fraction": float("nan"), "per_matrix": {}}
                continue
            (grad,) = surrogate_gradients(model, rollouts, rows, sets, args.batch_size, args.temperature)
            step = _named_views(model, gradient_step(grad, args.learning_rate, args.optimizer))
            after = {n: before[n].float() + step[n].to(before[n].device) for n in names}
            updates[b] = update_safe_fraction(masks, before, after)
    results = {
        "rank": args.rank,
        "fraction": args.fraction,
        "num_matrices": len(names),
        "num_parameters": sum(m.numel() for m in masks.values()),
        "safe_region_share": safe_region_share(masks),
        "updates": {k: {kk: vv for kk, vv in v.items() if kk != "per_matrix"} for k, v in updates.items()},
        "per_matrix": {k: v["per_matrix"] for k, v in updates.items()},
    }
    rows = [
        [k, v["num_changed"], v["num_changed_safe"], v["fraction"] if v["num_changed"] else "no realised change"]
        for k, v in results["updates"].items()
    ]
    md = (
        f"# Safe region (rank {args.rank}, {args.fraction:.0%} masks)\n\n"
        f"safe region share of parameters: {fmt(results['safe_region_share'])} over {len(names)} matrices\n\n"
        + markdown_table(["update", "realised changes", "in safe region", "fraction safe"], rows)
    )
    fig = bar_figure(
        ["safe share", *results["updates"]],
        {"fraction": [results["safe_region_share"], *[v["fraction"] for v in results["updates"].values()]]},
        "Safe region share and realised changes inside it",
        "fraction",
    )
    write_outputs(args.output_dir, "safe_region", results, md, fig)
    return results


RUNNERS = {
    "bins": run_bins,
    "nsr": run_nsr,
    "cross-bin": run_cross_bin,
    "critic-export": run_critic_export,
    "critic-quality": run_critic_quality,
    "safe-region": run_safe_region,
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    RUNNERS[args.measurement](args)
    print(f"trl-srppo analyze {args.measurement}: results written to {args.output_dir}")
    return 0
