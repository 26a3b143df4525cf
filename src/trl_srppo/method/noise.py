# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Gradient noise-to-signal ratio (NSR) from `R` gradient replicas, accumulated without storing them.

For replicas `g_1 .. g_R` of a stochastic gradient with mean `mu` and covariance `Sigma`:

- mean `gbar = 1/R sum_r g_r`;
- noise `N = 1/(R-1) sum_r ||g_r - gbar||^2`, unbiased for `trace(Sigma)`;
- signal `S = ||gbar||^2 - N / R`, unbiased for `||mu||^2` (since `E ||gbar||^2 = ||mu||^2 + trace(Sigma) / R`);
- `NSR = N / S`, infinite when `S <= eps` (the finite-sample signal is then too unreliable to divide by).

[`NSRAccumulator`] keeps one model-sized running sum of the replicas and one scalar, the sum of their squared norms,
and uses `sum_r ||g_r - gbar||^2 = sum_r ||g_r||^2 - R ||gbar||^2`. With a [`RandomSketch`] every replica is first
projected to `d` dimensions by a seeded random matrix with entries of variance `1/d` (so squared norms are preserved
in expectation, the Johnson-Lindenstrauss property); the matrix is regenerated chunk by chunk from the seed and never
materialised as a whole.
"""

from dataclasses import asdict, dataclass

import torch

SKETCH_KINDS = ("gaussian", "rademacher")


@dataclass
class NSRResult:
    """Noise, signal and NSR of a set of gradient replicas (see the module docstring)."""

    noise: float
    signal: float
    nsr: float
    num_replicas: int
    mean_grad_norm_sq: float  # ||gbar||^2

    def to_dict(self) -> dict:
        return asdict(self)


def noise_to_signal(sum_sq_norms: float, mean_norm_sq: float, num_replicas: int, eps: float = 1e-12) -> NSRResult:
    """NSR from the sufficient statistics `sum_r ||g_r||^2`, `||gbar||^2` and `R`.

    Args:
        sum_sq_norms (`float`):
            `sum_r ||g_r||^2`.
        mean_norm_sq (`float`):
            `||gbar||^2`.
        num_replicas (`int`):
            `R >= 2`; with fewer replicas every number is NaN.
        eps (`float`, *optional*, defaults to `1e-12`):
            NSR is infinite when the signal is at most `eps`.
    """
    if num_replicas < 2:
        nan = float("nan")
        return NSRResult(nan, nan, nan, num_replicas, mean_norm_sq if num_replicas else nan)
    noise = max(sum_sq_norms - num_replicas * mean_norm_sq, 0.0) / (num_replicas - 1)  # clamp rounding below 0
    signal = mean_norm_sq - noise / num_replicas
    nsr = noise / signal if signal > eps else float("inf")
    return NSRResult(noise, signal, nsr, num_replicas, mean_norm_sq)


class RandomSketch:
    """A seeded random projection `z = M g` from `dim_in` to `dim` dimensions, `M[i, j] ~ 1/sqrt(dim) * N(0, 1)` or
    `+-1/sqrt(dim)`, so that `E ||M g||^2 = ||g||^2`.

    `M` is generated in column chunks, chunk `c` from the seed `seed * 1_000_003 + c`, so the same seed gives the same
    matrix for every replica while at most `dim x chunk_size` entries exist at a time.

    Args:
        dim (`int`):
            Sketch dimension `d`.
        seed (`int`, *optional*, defaults to `0`):
            Seed of the matrix.
        kind (`str`, *optional*, defaults to `"gaussian"`):
            `"gaussian"` or `"rademacher"`.
        chunk_size (`int`, *optional*, defaults to `65536`):
            Number of input coordinates handled per chunk.
        cache_entries (`int`, *optional*, defaults to `2**24`):
            Keep generated chunks for reuse while the kept ones hold at most this many entries (64 MiB in float32 by
            default); chunks beyond it are regenerated on every call. 0 disables the cache.
    """

    def __init__(
        self, dim: int, seed: int = 0, kind: str = "gaussian", chunk_size: int = 65536, cache_entries: int = 2**24
    ):
        if dim < 1:
            raise ValueError(f"RandomSketch: dim must be >= 1, got {dim}.")
        if kind not in SKETCH_KINDS:
            raise ValueError(f"RandomSketch: kind must be one of {SKETCH_KINDS}, got {kind!r}.")
        self.dim, self.seed, self.kind, self.chunk_size = dim, seed, kind, chunk_size
        self.cache_entries = cache_entries
        self._cache: dict[tuple[int, int, str], torch.Tensor] = {}
        self._cached = 0

    def _chunk(self, index: int, width: int, device) -> torch.Tensor:  # (d, width)
        key = (index, width, str(device))
        if key in self._cache:
            return self._cache[key]
        block = self._generate(index, width).to(device)
        if self._cached + block.numel() <= self.cache_entries:
            self._cache[key] = block
            self._cached += block.numel()
        return block

    def _generate(self, index: int, width: int) -> torch.Tensor:  # (d, width)
        generator = torch.Generator(device="cpu").manual_seed(self.seed * 1_000_003 + index)
        if self.kind == "gaussian":
            block = torch.randn(self.dim, width, generator=generator, dtype=torch.float32)
        else:
            block = torch.randint(0, 2, (self.dim, width), generator=generator).float().mul_(2).sub_(1)
        return block.div_(self.dim**0.5)

    @torch.no_grad()
    def __call__(self, vector: torch.Tensor) -> torch.Tensor:
        """Project a flat vector `(P,)` to `(d,)` (float32, on the vector's device)."""
        vector = vector.reshape(-1)
        out = torch.zeros(self.dim, dtype=torch.float32, device=vector.device)
        for index, start in enumerate(range(0, vector.numel(), self.chunk_size)):
            piece = vector[start : start + self.chunk_size].float()  # (width,)
            out.addmv_(self._chunk(index, piece.numel(), vector.device), piece)
        return out


class NSRAccumulator:
    """Streaming NSR: add gradient replicas one at a time, read the result at any point.

    Args:
        sketch ([`RandomSketch`], *optional*):
            Project every replica before accumulating it (memory `d` instead of the model's size).
        dtype (`torch.dtype`, *optional*, defaults to `torch.float64`):
            Precision of the running sums; float64 keeps `sum ||g_r||^2 - R ||gbar||^2` accurate when the noise is
            small next to the signal.
    """

    def __init__(self, sketch: RandomSketch | None = None, dtype: torch.dtype = torch.float64):
        self.sketch, self.dtype = sketch, dtype
        self.grad_sum: torch.Tensor | None = None  # (P,) or (d,)
        self.sum_sq_norms = 0.0
        self.num_replicas = 0

    @torch.no_grad()
    def add(self, grad: torch.Tensor) -> None:
        """Add one replica, a flat tensor `(P,)` (flattened here if it is not)."""
        grad = grad.reshape(-1)
        if self.sketch is not None:
            grad = self.sketch(grad)
        grad = grad.to(self.dtype)
        if self.grad_sum is None:
            self.grad_sum = torch.zeros_like(grad)
        elif grad.shape != self.grad_sum.shape:
            raise ValueError(f"NSRAccumulator: replica of shape {tuple(grad.shape)}, expected {self.grad_sum.shape}.")
        self.grad_sum += grad
        self.sum_sq_norms += float(grad.square().sum())
        self.num_replicas += 1

    def mean(self) -> torch.Tensor | None:
        """`gbar`, the mean of the replicas so far (projected when a sketch is used)."""
        return None if self.grad_sum is None else self.grad_sum / self.num_replicas

    def result(self, eps: float = 1e-12) -> NSRResult:
        """Noise, signal and NSR of the replicas added so far."""
        if self.num_replicas == 0:
            return noise_to_signal(0.0, float("nan"), 0, eps)
        mean_norm_sq = float(self.mean().square().sum())
        return noise_to_signal(self.sum_sq_norms, mean_norm_sq, self.num_replicas, eps)
