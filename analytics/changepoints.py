"""Change points in a series of per-run values: E-divisive means with a permutation test.

The method is Matteson & James (2014), "A Nonparametric Approach for Multiple Change Point Analysis of
Multivariate Data" (JASA 109:505), the one Apache Otava (formerly Hunter) and MongoDB's performance CI run over
benchmark series. For a split of a segment into ``X = z[s:tau]`` (n values) and ``Y = z[tau:kappa]`` (m values) the
energy divergence with exponent ``a`` (here 1, the paper's default; any 0 < a < 2 characterises equality of
distributions) is

    E(X, Y) = 2/(n m) sum_ij |X_i - Y_j|^a - C(n,2)^-1 sum_{i<k} |X_i - X_k|^a - C(m,2)^-1 sum_{j<k} |Y_j - Y_k|^a

and the scaled statistic ``Q = n m / (n + m) * E``. Each stage takes, over every segment of the current partition,
the (tau, kappa) with the largest ``Q`` (kappa, the end of ``Y``, ranges to the segment's end, as in the paper), and
tests it: the values are permuted within each segment of the current partition ``permutations`` times, the same
maximum taken each time, and the p-value is ``(1 + #{permuted >= observed}) / (permutations + 1)``. A change point
with p-value <= ``alpha`` is kept and the search goes on; the first one that is not ends it.

Why this method for benchmark series: it assumes no distribution (CUSUM and PELT's usual costs assume a normal
mean shift with a known or estimated variance; run-to-run latency is skewed and has outliers), it finds any number
of change points hierarchically, and each one carries a significance level from the permutation test rather than a
penalty constant to tune.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import isfinite

import numpy as np

# The exponent on the distances (the paper's alpha, 0 < a < 2): 1 is its default and Otava's.
DISTANCE_EXPONENT = 1.0


class SeriesTooShort(ValueError):
    """The series has fewer values than two segments of ``min_size`` need."""


@dataclass(frozen=True)
class ChangePoint:
    """A change between ``values[index - 1]`` and ``values[index]``: ``index`` is the first value of the new regime.

    ``mean_before`` / ``mean_after`` are the means of the segments on either side in the final partition.
    """

    index: int
    p_value: float
    mean_before: float
    mean_after: float


def minimum_length(min_size: int) -> int:
    """The shortest series that can hold one change point with segments of at least ``min_size`` values."""
    return 2 * max(int(min_size), 2)


def find_change_points(
    values: Sequence[float],
    *,
    alpha: float = 0.05,
    min_size: int = 2,
    permutations: int = 199,
    seed: int = 0,
) -> list[ChangePoint]:
    """The significant change points of ``values`` in index order (empty when there are none at ``alpha``).

    Deterministic for a given ``seed``. Raises :class:`SeriesTooShort` for a series shorter than
    ``2 * min_size`` and ``ValueError`` for a non-finite value or a parameter out of range.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if int(min_size) != min_size or min_size < 2:
        raise ValueError(f"min_size must be an integer >= 2 (a segment's spread needs two values), got {min_size!r}")
    if int(permutations) != permutations or permutations < 1:
        raise ValueError(f"permutations must be an integer >= 1, got {permutations!r}")
    min_size = int(min_size)
    z = np.asarray([float(v) for v in values], dtype=float)
    for i, v in enumerate(z):
        if not isfinite(v):
            raise ValueError(f"values[{i}] is {v!r}: change points need finite values")
    need = minimum_length(min_size)
    if len(z) < need:
        raise SeriesTooShort(
            f"series of {len(z)} value(s) is too short for change points: at least {need} needed"
            f" (2 x min_size {min_size})"
        )

    rng = np.random.default_rng(seed)
    bounds = [0, len(z)]  # segment edges of the current partition
    found: dict[int, float] = {}
    while True:
        observed, tau = _best_split(z, bounds, min_size)
        if tau is None:
            break
        exceed = 0
        for _ in range(int(permutations)):
            shuffled = z.copy()
            for s, e in zip(bounds, bounds[1:]):
                shuffled[s:e] = rng.permutation(shuffled[s:e])
            stat, _ = _best_split(shuffled, bounds, min_size)
            if stat >= observed:
                exceed += 1
        p_value = (1 + exceed) / (int(permutations) + 1)
        if p_value > alpha:
            break
        found[tau] = p_value
        bounds = sorted([*bounds, tau])

    out = []
    for i, tau in enumerate(bounds[1:-1], start=1):
        before = z[bounds[i - 1] : tau]
        after = z[tau : bounds[i + 1]]
        out.append(ChangePoint(tau, found[tau], float(before.mean()), float(after.mean())))
    return out


def _best_split(z: np.ndarray, bounds: list[int], min_size: int) -> tuple[float, int | None]:
    """The largest Q over every segment of the partition and where it splits (None where no segment can split)."""
    best, where = -np.inf, None
    for s, e in zip(bounds, bounds[1:]):
        if e - s < 2 * min_size:
            continue
        q, tau = _segment_best(z[s:e], min_size)
        if q > best:
            best, where = q, s + tau
    return float(best), where


def _segment_best(seg: np.ndarray, min_size: int) -> tuple[float, int]:
    """max over tau, kappa of Q(seg[:tau], seg[tau:kappa]) and its tau (relative to the segment)."""
    n_all = len(seg)
    dist = np.abs(seg[:, None] - seg[None, :]) ** DISTANCE_EXPONENT
    # prefix[a, b] = sum of dist[:a, :b]; block(a, b, c, d) = sum of dist[a:b, c:d].
    prefix = np.zeros((n_all + 1, n_all + 1))
    prefix[1:, 1:] = dist.cumsum(0).cumsum(1)
    taus = np.arange(min_size, n_all - min_size + 1)[:, None]
    kappas = np.arange(2 * min_size, n_all + 1)[None, :]
    valid = kappas - taus >= min_size
    kap = np.where(valid, kappas, taus + min_size)  # any in-range index where invalid; masked below

    def block(a, b, c, d):
        return prefix[b, d] - prefix[a, d] - prefix[b, c] + prefix[a, c]

    n = taus.astype(float)
    m = (kap - taus).astype(float)
    between = block(0, taus, taus, kap)
    within_x = block(0, taus, 0, taus)  # both orders of each pair: sum_{i<k} = within_x / 2
    within_y = block(taus, kap, taus, kap)
    energy = 2.0 * between / (n * m) - within_x / (n * (n - 1)) - within_y / (m * (m - 1))
    q = np.where(valid, n * m / (n + m) * energy, -np.inf)
    flat = int(np.argmax(q))
    row, _ = np.unravel_index(flat, q.shape)
    return float(q.flat[flat]), int(taus[row, 0])
