# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""The policy gradient's noise-to-signal ratio during training, with and without the Pass@k weight
(`gradient_nsr_steps`): the measure of the paper's Figure 1c, on the batches the run trains on.

The replicas are the batch's rollouts: replica `i` is the gradient of rollout `i`'s surrogate alone,
`g_i = grad sum_t A_it log pi(y_it | s_{t-1})` at the policy that generated the batch (on-policy, the PPO ratio is 1
and the clip inactive, so this is SR-PPO's policy gradient). A single-rollout batch draws a prompt and one rollout of
it per row, so the replicas are independent draws of one rollout's gradient, and
[`~trl_srppo.method.noise.noise_to_signal`] gives the NSR of one rollout's gradient (the batch mean of `R` of them has
`1 / R` of it). `trl-srppo analyze nsr` measures another thing on a saved checkpoint: replicas that redraw the rollouts
of fixed prompts, so no prompt-to-prompt spread enters its noise.

The Pass@k weight scales each row's advantages by one factor, so a weighted replica is the unweighted one times its
row's factor: one backward pass per rollout serves both ([`gradient_nsr`]).
"""

import functools
from collections.abc import Callable, Iterator

import torch

from ..runtime.policy_drift import completion_inputs
from .core import AdvantageEstimate
from .noise import NSRResult, noise_to_signal

__all__ = ["gradient_nsr", "measurement_due", "policy_gradient_nsr", "rollout_gradients"]


def measurement_due(step: int, updates_per_batch: int, every: int) -> bool:
    """Whether a generated batch whose updates are `step .. step + updates_per_batch - 1` (0-based optimizer steps)
    holds an update whose index is a multiple of `every` (`every` <= 0: never)."""
    if every <= 0:
        return False
    return any(update % every == 0 for update in range(step, step + updates_per_batch))


def gradient_nsr(
    gradients: Iterator[list[torch.Tensor]],
    scales: dict[str, torch.Tensor],
    like: list[torch.Tensor],
    reduce: Callable[[torch.Tensor], torch.Tensor],
    eps: float = 1e-12,
) -> dict[str, NSRResult]:
    """The NSR of `R` replicas under each of several row scales, over every process.

    Args:
        gradients (`Iterator[list[torch.Tensor]]`):
            Replica `i`'s gradient, one tensor per parameter shaped as `like`, one replica per row of `scales`, in
            order (a generator: one at a time).
        scales (`dict[str, torch.Tensor]`):
            Variant name -> the factor `(R,)` each replica is multiplied by under it (e.g. ones, and the rows' Pass@k
            weights).
        like (`list[torch.Tensor]`):
            The parameters (their shapes and devices): the sums are one float32 copy of them per variant.
        reduce (`Callable`):
            Sums a tensor over every process (the identity on one process). Every process calls this with its own
            rows (none is fine) and the same variants.
        eps (`float`, *optional*, defaults to `1e-12`):
            The NSR is infinite when the signal is at most `eps`.

    Returns:
        `dict[str, NSRResult]`: each variant's noise, signal and NSR over every process's replicas.
    """
    sums = {name: [torch.zeros_like(p, dtype=torch.float32) for p in like] for name in scales}  # sum_i s_i g_i
    stats = [0.0] * (len(scales) + 1)  # sum_i s_i^2 ||g_i||^2 for each variant, then R
    for i, grads in enumerate(gradients):
        grads = [g.float() for g in grads]
        norm_sq = torch.stack([torch.dot(g.reshape(-1), g.reshape(-1)) for g in grads]).double().sum().item()
        for j, (name, scale) in enumerate(scales.items()):
            s = float(scale[i])
            for total, g in zip(sums[name], grads):
                total.add_(g, alpha=s)
            stats[j] += s * s * norm_sq
        stats[-1] += 1
    stats = reduce(torch.tensor(stats, dtype=torch.float64, device=like[0].device)).tolist()
    replicas = int(stats[-1])
    out = {}
    for j, name in enumerate(scales):
        total = reduce(torch.cat([t.reshape(-1) for t in sums[name]]))  # (P,) over every process
        mean_norm_sq = torch.dot(total, total).item() / max(replicas, 1) ** 2  # ||gbar||^2
        out[name] = noise_to_signal(stats[j], mean_norm_sq, replicas, eps)
    return out


def rollout_gradients(
    logps_of: Callable[[int], torch.Tensor],
    advantages: torch.Tensor,
    rows: list[int],
    params: list[torch.nn.Parameter],
) -> Iterator[list[torch.Tensor]]:
    """Each of `rows`' gradient `grad_params sum_t A_it log pi(y_it | s_{t-1})`, one tensor per parameter (zeros for
    a parameter the surrogate does not reach), one row at a time.

    Args:
        logps_of (`Callable[[int], torch.Tensor]`):
            Row `i` -> `log pi(y_it | s_{t-1})` of its completion, `(1, C)` or `(C,)`, with gradients.
        advantages (`torch.Tensor` of shape `(B, C)`):
            The rows' token advantages, zero on the tokens the loss masks.
        rows (`list[int]`):
            The rows to take.
        params (`list[torch.nn.Parameter]`):
            The parameters to differentiate, in order.
    """
    for i in rows:
        surrogate = (advantages[i].detach() * logps_of(i).reshape(-1)).sum()
        grads = torch.autograd.grad(surrogate, params, allow_unused=True)
        yield [torch.zeros_like(p) if g is None else g for g, p in zip(grads, params)]


def policy_gradient_nsr(
    trainer, output: dict, rewards: torch.Tensor, estimate: AdvantageEstimate, unweighted: AdvantageEstimate, mask
) -> dict[str, float]:
    """`gradient_nsr_steps`'s metrics for a generated batch of `trainer` (an `SRPPOTrainer`): the NSR of its rollouts'
    policy gradients with the run's Pass@k weights (`estimate`, as the policy trains: `policy/gradient_nsr`) and
    without them (`unweighted`, the same rollouts and values at k = 1: `policy/gradient_nsr_unweighted`), and the
    noise and signal of each (`policy/gradient_noise`, `policy/gradient_signal`, and `_unweighted`): the NSR is
    infinite where a batch's signal estimate falls to 0 or below, so a run's NSR over many batches reads better as
    its summed noise over its summed signal.

    Args:
        trainer (`SRPPOTrainer`):
            The trainer; its policy is differentiated as it stands (the policy that generated the batch).
        output (`dict`):
            GRPO's scored batch: `prompt_ids`, `prompt_mask`, `completion_ids`, `completion_mask`.
        rewards (`torch.Tensor` of shape `(B,)`):
            The outcomes (NaN: unscorable, left out).
        estimate, unweighted ([`~trl_srppo.method.core.AdvantageEstimate`]):
            The batch's estimate as the run trains on it, and at k = 1.
        mask (`torch.Tensor` of shape `(B, C)`):
            The policy's loss mask.
    """
    policy = trainer.accelerator.unwrap_model(trainer.model)  # no DDP hook: `autograd.grad` leaves `.grad` alone
    params = [p for p in policy.parameters() if p.requires_grad]
    ids, attention, width = completion_inputs(output)  # (B, P + C) each, and C
    rows = (torch.isfinite(rewards) & (mask.sum(dim=1) > 0)).nonzero().flatten().tolist()  # the rollouts that train
    ratio = torch.where(unweighted.weights != 0, estimate.weights / unweighted.weights, 0.0)  # (B,) each row's weight

    def logps_of(i: int) -> torch.Tensor:  # (1, C): log pi(y_it | s_{t-1}) of row i, with gradients
        return trainer._get_per_token_logps_and_entropies(policy, ids[i : i + 1], attention[i : i + 1], width)[0]

    with torch.enable_grad():
        gradients = rollout_gradients(logps_of, unweighted.advantages * mask, rows, params)
        scales = {"weighted": ratio[rows].float().cpu(), "unweighted": torch.ones(len(rows))}
        reduce = functools.partial(trainer.accelerator.reduce, reduction="sum")
        result = gradient_nsr(gradients, scales, params, reduce)
    metrics = {}
    for name, suffix in (("weighted", ""), ("unweighted", "_unweighted")):
        metrics[f"policy/gradient_nsr{suffix}"] = result[name].nsr
        metrics[f"policy/gradient_noise{suffix}"] = result[name].noise
        metrics[f"policy/gradient_signal{suffix}"] = result[name].signal
    return metrics
