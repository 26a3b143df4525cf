# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Safe-region masks and the bf16-realised-change rate, on a matrix worked by hand."""

import math

import torch

from trl_srppo.analysis.safe_region import (
    gradient_step,
    low_rank_reconstruction,
    realised_changes,
    realised_safe_fraction,
    safe_region_masks,
    safe_region_share,
    update_safe_fraction,
)

# W = 7 u1 v1^T + 2.1 u2 v2^T, orthonormal u1 = (0.6, 0.8), u2 = (-0.8, 0.6), v1 = (2, 3, 6) / 7, v2 = (3, -6, 2) / 7
U1, U2 = torch.tensor([0.6, 0.8]), torch.tensor([-0.8, 0.6])
V1, V2 = torch.tensor([2.0, 3.0, 6.0]) / 7, torch.tensor([3.0, -6.0, 2.0]) / 7
W = 7 * torch.outer(U1, V1) + 2.1 * torch.outer(U2, V2)
# W    = [[0.48, 3.24, 3.12], [2.14, 1.32, 5.16]]
# W_1  = [[1.2,  1.8,  3.6 ], [1.6,  2.4,  4.8 ]]  (rank-1 reconstruction)


def test_hand_matrix_values():
    assert torch.allclose(W, torch.tensor([[0.48, 3.24, 3.12], [2.14, 1.32, 5.16]]), atol=1e-5)
    assert torch.allclose(low_rank_reconstruction(W, 1), torch.tensor([[1.2, 1.8, 3.6], [1.6, 2.4, 4.8]]), atol=1e-5)
    assert torch.allclose(low_rank_reconstruction(W, 5), W, atol=1e-5)  # rank capped at min(m, n)


def test_masks_by_hand():
    masks = safe_region_masks(W, rank=1, fraction=0.5)  # 3 entries per mask
    # largest |W_1|: 4.8 (1,2), 3.6 (0,2), 2.4 (1,1); smallest |W|: 0.48 (0,0), 1.32 (1,1), 2.14 (1,0)
    assert masks["principal"].tolist() == [[False, False, True], [False, True, True]]
    assert masks["low_magnitude"].tolist() == [[True, False, False], [True, True, False]]
    # (1,1) is principal but low-magnitude, so it stays safe
    assert masks["safe"].tolist() == [[True, True, False], [True, True, False]]
    assert safe_region_share({"w": masks["safe"]}) == 4 / 6


def test_default_fraction_counts():
    weight = torch.randn(10, 10, generator=torch.Generator().manual_seed(0))
    masks = safe_region_masks(weight, rank=2)
    assert int(masks["principal"].sum()) == 30
    assert int(masks["low_magnitude"].sum()) == 30
    assert int(masks["safe"].sum()) >= 70


def test_update_too_small_for_bf16_realises_nothing():
    safe = safe_region_masks(W, rank=1, fraction=0.5)["safe"]
    after = W + 1e-5  # bf16 spacing near 0.5 .. 5 is 2^-9 .. 2^-5
    assert not realised_changes(W, after).any()
    result = realised_safe_fraction(safe, W, after)
    assert result["num_changed"] == 0
    assert math.isnan(result["fraction"])


def test_realised_fraction_by_hand():
    safe = safe_region_masks(W, rank=1, fraction=0.5)["safe"]
    delta = torch.zeros_like(W)
    delta[0, 0] = 0.1  # safe entry, 0.48 -> 0.58
    delta[1, 2] = 0.5  # principal entry, 5.16 -> 5.66
    delta[0, 1] = 1e-5  # safe entry, too small to change its bf16 value
    result = realised_safe_fraction(safe, W, W + delta)
    assert result == {"num_changed": 2, "num_changed_safe": 1, "fraction": 0.5}
    total = update_safe_fraction({"a": safe, "b": safe}, {"a": W, "b": W}, {"a": W + delta, "b": W})
    assert (total["num_changed"], total["num_changed_safe"], total["fraction"]) == (2, 1, 0.5)


def test_gradient_steps():
    grad = torch.tensor([2.0, -0.5, 0.0])
    assert torch.allclose(gradient_step(grad, 0.1, "sgd"), torch.tensor([0.2, -0.05, 0.0]))
    assert torch.allclose(gradient_step(grad, 0.1, "adam"), torch.tensor([0.1, -0.1, 0.0]), atol=1e-6)
