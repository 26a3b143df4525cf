# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Policy-gradient replicas of the SR-PPO surrogate, and the NSR measurements built from them.

The surrogate of a set of rollouts `I` is the mean over rollouts of `sum_t A_t log pi(y_t | s_{t-1})`, with the
advantages `A_t` of [`trl_srppo.method.core.srppo_advantages`] (the trainer's own code) and the critic values computed
before any update. Its gradient is the on-policy SR-PPO policy gradient (the PPO ratio is 1 and the clip inactive).

NSR replicas (see [`trl_srppo.method.noise`]):

- per prompt: replica `r` is the gradient of rollout `r` of that prompt alone;
- per bin / whole batch: replica `r` is the gradient of the one-rollout-per-prompt batch made of rollout `r` of every
  prompt in the bin (batch), as one SR-PPO training batch would be.

Note that the Pass@k weight `w_k(qhat(s_0))` is the same for every rollout of a prompt, so it leaves a prompt's own
NSR unchanged; it changes the bin and batch NSR by reweighting prompts against each other.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from ..evaluation.markdown import markdown_table
from ..method.noise import SKETCH_KINDS, NSRAccumulator, RandomSketch
from .config import RolloutAnalysisConfig
from .difficulty import BINS, bin_members, correct_counts
from .report import bar_figure, write_outputs
from .rollouts import Rollouts, load_analysis_critic, load_policy, rollout_advantages, sample_rollouts


def trainable_parameters(model) -> list[torch.nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def completion_logprobs(
    model, input_ids: torch.Tensor, attention_mask: torch.Tensor, width: int, temperature: float = 1.0
) -> torch.Tensor:
    """`log pi(y_t | s_{t-1})` of the last `width` tokens, `(B, C)`, in float32, with gradients.

    As in TRL's GRPO, the policy is the sampling distribution `softmax(logits / temperature)` (a temperature of 0,
    greedy decoding, counts as 1).
    """
    logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits  # (B, P + C, V)
    logits = logits[:, -width - 1 : -1].float() / (temperature if temperature > 0 else 1.0)  # (B, C, V)
    targets = input_ids[:, -width:]  # (B, C)
    return torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, C)


def surrogate_gradients(
    model,
    rollouts: Rollouts,
    rows: list[int] | torch.Tensor,
    advantage_sets: list[torch.Tensor],
    batch_size: int = 8,
    temperature: float = 1.0,
) -> list[torch.Tensor]:
    """Flat gradients of the surrogate `1/|rows| sum_{i in rows} sum_t A_it log pi(y_it)`, one per advantage set.

    Args:
        model (`PreTrainedModel`):
            The policy; gradients are taken over its trainable parameters, in `model.parameters()` order.
        rollouts ([`Rollouts`]):
            The rollouts.
        rows (`list[int]` or `torch.Tensor`):
            Rows of `rollouts` in the surrogate.
        advantage_sets (`list[torch.Tensor]`, each of shape `(B, C)`):
            Token advantages (zero on padding), for example with and without the Pass@k weight; one forward pass
            serves all of them.
        batch_size (`int`, *optional*, defaults to `8`):
            Rows per forward pass.
        temperature (`float`, *optional*, defaults to `1.0`):
            Sampling temperature of the rollouts (see [`completion_logprobs`]).

    Returns:
        `list[torch.Tensor]`: one float32 tensor `(num_trainable_parameters,)` per advantage set, on the model's
        device.
    """
    rows = torch.as_tensor(rows, dtype=torch.long).reshape(-1)
    params = trainable_parameters(model)
    device = params[0].device
    totals = [torch.zeros(sum(p.numel() for p in params), device=device) for _ in advantage_sets]
    if rows.numel() == 0:
        return totals
    input_ids, attention_mask = rollouts.input_ids, rollouts.attention_mask
    width = rollouts.completion_ids.shape[1]
    for start in range(0, rows.numel(), batch_size):
        chunk = rows[start : start + batch_size]
        logps = completion_logprobs(
            model, input_ids[chunk].to(device), attention_mask[chunk].to(device), width, temperature
        )
        for i, advantages in enumerate(advantage_sets):
            surrogate = (advantages[chunk].to(device) * logps).sum() / rows.numel()
            grads = torch.autograd.grad(surrogate, params, retain_graph=i < len(advantage_sets) - 1, allow_unused=True)
            flat = [torch.zeros_like(p).reshape(-1) if g is None else g.reshape(-1) for g, p in zip(grads, params)]
            totals[i] += torch.cat(flat).float()
    return totals


def _summary(values: list[float]) -> dict:
    finite = [v for v in values if math.isfinite(v)]
    return {
        "num_prompts": len(values),
        "num_infinite": sum(1 for v in values if math.isinf(v)),
        "mean_finite": sum(finite) / len(finite) if finite else float("nan"),
        "median": float(np.median(values)) if values else float("nan"),  # mean of the two middle values; inf kept
    }


def measure_nsr(
    model,
    rollouts: Rollouts,
    pass_at_k: int,
    gae_lambda: float = 1.0,
    sketch: RandomSketch | None = None,
    batch_size: int = 8,
    eps: float = 1e-12,
    temperature: float = 1.0,
) -> dict:
    """Per-prompt, per-bin and whole-batch NSR of the SR-PPO gradient, with (`k = pass_at_k`) and without (`k = 1`)
    the Pass@k weight. Needs `rollouts.rewards` and `rollouts.values`.

    Args:
        model (`PreTrainedModel`):
            The policy.
        rollouts ([`Rollouts`]):
            `n >= 2` scored rollouts per prompt with critic values.
        pass_at_k (`int`):
            The k of the weighted estimator.
        gae_lambda (`float`, *optional*, defaults to `1.0`):
            GAE lambda of the advantages (1 = SR-PPO's Monte Carlo advantage).
        sketch ([`RandomSketch`], *optional*):
            Project the replicas (for large models).
        batch_size (`int`, *optional*, defaults to `8`):
            Rows per forward pass.
        eps (`float`, *optional*, defaults to `1e-12`):
            NSR is infinite when the signal is at most `eps`.
        temperature (`float`, *optional*, defaults to `1.0`):
            Sampling temperature of the rollouts.

    Memory: without a sketch the bin and batch pass keeps 8 model-sized float64 running sums (3 bins and the batch,
    with and without the weight), so pass a `sketch` for models beyond a few hundred million parameters.

    Returns:
        `dict` with `per_prompt` (list of `{prompt, bin, num_correct, weighted, unweighted}`), `per_bin`
        (`{bin: {weighted, unweighted}}`, each with the bin's pooled NSR result and a summary of its prompts' NSRs)
        and `batch` (`{weighted, unweighted}`).
    """
    if rollouts.num_rollouts < 2:
        raise ValueError(
            f"measure_nsr needs at least 2 rollouts per prompt (the noise is their variance), got "
            f"{rollouts.num_rollouts}; sample more (num_generations)."
        )
    variants = ("weighted", "unweighted")
    sets = [rollout_advantages(rollouts, k, gae_lambda).advantages for k in (pass_at_k, 1)]  # in `variants` order

    def gradients(rows: list[int]) -> list[torch.Tensor]:
        return surrogate_gradients(model, rollouts, rows, sets, batch_size, temperature)

    bins = rollouts.prompt_bins()
    per_prompt = _per_prompt_nsr(gradients, rollouts, bins, variants, sketch, eps)
    bin_accs, batch_accs = _pooled_accumulators(gradients, rollouts, bins, variants, sketch)
    pooled = {b: {name: bin_accs[b][name].result(eps).to_dict() for name in variants} for b in BINS}
    return {
        "pass_at_k": pass_at_k,
        "num_rollouts": rollouts.num_rollouts,
        "per_prompt": per_prompt,
        "per_bin": per_bin_nsr(per_prompt, pooled, variants),
        "batch": {name: batch_accs[name].result(eps).to_dict() for name in variants},
    }


def _per_prompt_nsr(
    gradients: Callable[[list[int]], list[torch.Tensor]],
    rollouts: Rollouts,
    bins: list[str | None],
    variants: tuple[str, ...],
    sketch: RandomSketch | None,
    eps: float,
) -> list[dict]:
    """Each prompt's NSR, replica `r` being the gradient of its rollout `r` alone; `gradients(rows)` gives the flat
    gradients `(num_trainable_parameters,)` of one surrogate, one per variant.

    Returns:
        `list[dict]`: per prompt, `{prompt, bin, num_correct, <variant>: NSR result dict, ...}`.
    """
    counts = correct_counts(rollouts.correct, rollouts.prompt_index, rollouts.num_prompts)  # (num_prompts,)
    n = rollouts.num_rollouts
    per_prompt = []
    for p in range(rollouts.num_prompts):
        accs = {name: NSRAccumulator(sketch) for name in variants}
        for r in range(n):
            for name, grad in zip(variants, gradients([p * n + r])):
                accs[name].add(grad)
        row = {"prompt": p, "bin": bins[p], "num_correct": int(counts[p])}
        row.update({name: accs[name].result(eps).to_dict() for name in variants})
        per_prompt.append(row)
    return per_prompt


def _pooled_accumulators(
    gradients: Callable[[list[int]], list[torch.Tensor]],
    rollouts: Rollouts,
    bins: list[str | None],
    variants: tuple[str, ...],
    sketch: RandomSketch | None,
) -> tuple[dict[str, dict[str, NSRAccumulator]], dict[str, NSRAccumulator]]:
    """The bin and whole-batch replicas: replica `r` of a bin is the gradient of the batch made of rollout `r` of each
    of its prompts, and that of the batch is the prompt-weighted mean of the bins' replicas `r`.

    Returns:
        `tuple`: the accumulators `{bin: {variant: NSRAccumulator}}` and `{variant: NSRAccumulator}` of the batch.
    """
    bin_accs = {b: {name: NSRAccumulator(sketch) for name in variants} for b in BINS}
    batch_accs = {name: NSRAccumulator(sketch) for name in variants}
    members = bin_members(bins)
    n = rollouts.num_rollouts
    for r in range(n):
        batch_grads = None
        for b in BINS:
            if not members[b]:
                continue
            grads = gradients([p * n + r for p in members[b]])
            share = len(members[b]) / rollouts.num_prompts
            for name, grad in zip(variants, grads):
                bin_accs[b][name].add(grad)
            scaled = [grad * share for grad in grads]  # the batch mean is the prompt-weighted mean of the bin means
            batch_grads = scaled if batch_grads is None else [a + g for a, g in zip(batch_grads, scaled)]
        for name, grad in zip(variants, batch_grads):
            batch_accs[name].add(grad)
    return bin_accs, batch_accs


def per_bin_nsr(per_prompt: list[dict], pooled: dict[str, dict[str, dict]], variants: tuple[str, ...]) -> dict:
    """The `per_bin` part of [`measure_nsr`]'s results.

    Args:
        per_prompt (`list[dict]`):
            The per-prompt rows (`bin` and, per variant, an NSR result dict with `nsr`).
        pooled (`dict[str, dict[str, dict]]`):
            `{bin: {variant: NSR result dict}}` of the bins' pooled replicas.
        variants (`tuple[str, ...]`):
            The variants, e.g. `("weighted", "unweighted")`.

    Returns:
        `dict`: `{bin: {variant: {"pooled": the bin's pooled result, "prompts": a summary of its prompts' NSRs}}}`
        over every bin of `BINS`.
    """
    per_bin = {}
    for b in BINS:
        per_bin[b] = {}
        for name in variants:
            prompt_nsrs = [row[name]["nsr"] for row in per_prompt if row["bin"] == b]
            per_bin[b][name] = {"pooled": pooled[b][name], "prompts": _summary(prompt_nsrs)}
    return per_bin


# ---- the `nsr` analysis ---------------------------------------------------------------------------------------------


@dataclass
class NSRConfig(RolloutAnalysisConfig):
    r"""
    Settings of `trl-srppo analyze nsr` (on top of [`RolloutAnalysisConfig`]; the critic is required).

    Args:
        sketch_dim (`int`, *optional*, defaults to `0`):
            Project the gradients to this dimension with a random sketch (`0`: exact).
        sketch_kind (`str`, *optional*, defaults to `"gaussian"`):
            Kind of random sketch (see [`~trl_srppo.method.noise.RandomSketch`]).
        eps (`float`, *optional*, defaults to `1e-12`):
            The NSR is infinite when the signal is at most `eps`.
    """

    sketch_dim: int = field(default=0, metadata={"help": "Project gradients to this dimension (0: exact)."})
    sketch_kind: str = field(default="gaussian", metadata={"help": "Kind of random sketch: gaussian or rademacher."})
    eps: float = field(default=1e-12, metadata={"help": "The NSR is infinite when the signal is at most eps."})

    def __post_init__(self):
        super().__post_init__()
        if self.num_generations < 2:
            raise ValueError(
                f"num_generations must be at least 2 for the NSR, got {self.num_generations}: the noise is the "
                "variance over the rollouts of a prompt, so each prompt needs at least 2 (the paper uses 8)."
            )
        if self.sketch_dim < 0:
            raise ValueError(f"sketch_dim must be 0 (exact) or positive, got {self.sketch_dim}.")
        if self.sketch_kind not in SKETCH_KINDS:
            raise ValueError(f"sketch_kind must be one of {SKETCH_KINDS}, got {self.sketch_kind!r}.")


def nsr_table(results: dict) -> str:
    """The markdown report of [`run_nsr`]'s results."""
    k = results["pass_at_k"]
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
    rows.append(["batch", len(results["per_prompt"]), "", batch["unweighted"]["nsr"], batch["weighted"]["nsr"]])
    return (
        f"# Gradient noise-to-signal ratio (R = {results['num_rollouts']} replicas, Pass@{k})\n\n"
        + markdown_table(["bin", "prompts", "median per-prompt NSR", "NSR k=1", f"NSR k={k}"], rows)
        + "\nPer-prompt NSR does not depend on the Pass@k weight (one weight per prompt). Bin/batch replica r: the "
        "gradient of the batch made of rollout r of every prompt.\n"
    )


def nsr_figure(results: dict):
    """The NSR of each bin and of the batch, with and without the Pass@k weight (log scale)."""
    cells = [results["per_bin"][b] for b in BINS] + [None]
    return bar_figure(
        list(BINS) + ["batch"],
        {
            name: [(c[key]["pooled"] if c else results["batch"][key])["nsr"] for c in cells]
            for key, name in (("unweighted", "without weight"), ("weighted", f"Pass@{results['pass_at_k']} weight"))
        },
        "Gradient noise-to-signal ratio",
        "NSR",
        log=True,
    )


def run_nsr(config: NSRConfig) -> dict:
    """`trl-srppo analyze nsr`: sample, score and value the rollouts, then [`measure_nsr`]."""
    model, tokenizer = load_policy(config)
    rollouts = sample_rollouts(config, "nsr", model, tokenizer, load_analysis_critic(config, "nsr", model))
    sketch = RandomSketch(config.sketch_dim, config.seed, config.sketch_kind) if config.sketch_dim > 0 else None
    results = measure_nsr(
        model,
        rollouts,
        config.pass_at_k,
        config.gae_lambda,
        sketch,
        config.batch_size,
        config.eps,
        config.temperature,
    )
    results["sketch_dim"] = config.sketch_dim
    write_outputs("nsr", config, results, nsr_table(results), nsr_figure(results))
    return results
