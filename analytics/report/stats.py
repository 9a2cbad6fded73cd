"""Two-sample statistics for run comparison: is a delta between two runs real, and how large is it?

Pure Python and numpy (the venv has no scipy): normal tails via ``math.erfc``, Student's t via the
regularized incomplete beta function. Every function is deterministic: the bootstrap takes a fixed seed.

- :func:`mann_whitney_u`: two-sided Mann–Whitney U test, normal approximation with tie and continuity
  corrections. Assumes independent observations within and between the samples; it tests whether one
  sample tends to take larger values than the other (stochastic ordering), with no shape assumption.
  The normal approximation is good for n ≥ ~10 per sample; callers require that (exact tables are not used).
- :func:`bootstrap_quantile_diff`: percentile-bootstrap interval for q-quantile(B) − q-quantile(A),
  each sample resampled independently with replacement. Assumes i.i.d. values; the quantile is the
  linear-interpolated one (DuckDB's ``quantile_cont``, numpy's default), the same definition as the
  serving views. For extreme quantiles with small n (p99 from a few hundred values) the interval leans on
  a handful of order statistics and may undercover; a test rejecting is still required for a verdict.
- :func:`welch`: Welch's t-test and interval for mean(B) − mean(A) with unequal variances and
  Welch–Satterthwaite degrees of freedom. Assumes independent, roughly normal sample means (batch means
  of a rate are averages of many events, which is what makes this reasonable).
- :func:`t_cdf` / :func:`t_quantile`: Student's t distribution for any real df > 0 (continued-fraction
  incomplete beta, Numerical Recipes §6.4; quantile by bisection to 1e-12).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20260701


class StatsInputError(ValueError):
    """A sample too small (or empty) for the requested statistic."""


# ---- distributions ----------------------------------------------------------------------------------
def normal_sf(z: float) -> float:
    """P(Z > z) for a standard normal Z."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz; Numerical Recipes betacf)."""
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(ln_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(ln_front) * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T ≤ t) for Student's t with ``df`` (> 0, not necessarily integer) degrees of freedom."""
    if df <= 0:
        raise StatsInputError(f"t distribution needs df > 0, got {df}")
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The t with P(T ≤ t) = p (bisection on :func:`t_cdf`; symmetric, so only p > 0.5 is searched)."""
    if not 0.0 < p < 1.0:
        raise StatsInputError(f"quantile needs 0 < p < 1, got {p}")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2.0
    while hi - lo > 1e-12 * max(1.0, hi):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


# ---- tests and intervals ------------------------------------------------------------------------------
@dataclass(frozen=True)
class MannWhitney:
    u: float        # U of sample B (the number of (a, b) pairs with b > a, ties counting one half)
    z: float        # continuity-corrected standardized |U − n_a·n_b/2|
    p_value: float  # two-sided
    n_a: int
    n_b: int


def _as_array(x: Sequence[float], name: str, min_n: int) -> np.ndarray:
    arr = np.asarray(x, dtype=float)
    arr = arr[np.isfinite(arr)]
    if arr.size < min_n:
        raise StatsInputError(f"sample {name} has {arr.size} finite value(s); needs at least {min_n}")
    return arr


def mann_whitney_u(a: Sequence[float], b: Sequence[float]) -> MannWhitney:
    """Two-sided Mann–Whitney U (normal approximation, tie-corrected variance, continuity correction 0.5).

    U_b = R_b − n_b(n_b+1)/2 with average ranks over the pooled sample; σ² = n_a n_b/12 ·
    ((n+1) − Σ(t³−t)/(n(n−1))) over tie groups of size t; z = max(|U_b − n_a n_b/2| − 0.5, 0)/σ;
    p = erfc(z/√2). All values tied (σ = 0): p = 1 (no evidence of a difference).
    """
    xa, xb = _as_array(a, "A", 1), _as_array(b, "B", 1)
    na, nb = xa.size, xb.size
    pooled = np.concatenate([xa, xb])
    _, inverse, counts = np.unique(pooled, return_inverse=True, return_counts=True)
    # average rank of each distinct value: ranks (cum - count + 1) .. cum
    cum = np.cumsum(counts)
    avg_rank = cum - (counts - 1) / 2.0
    ranks = avg_rank[inverse]
    u_b = float(ranks[na:].sum() - nb * (nb + 1) / 2.0)
    n = na + nb
    ties = float(np.sum(counts.astype(float) ** 3 - counts))
    var = na * nb / 12.0 * ((n + 1) - ties / (n * (n - 1))) if n > 1 else 0.0
    if var <= 0.0:
        return MannWhitney(u_b, 0.0, 1.0, na, nb)
    z = max(abs(u_b - na * nb / 2.0) - 0.5, 0.0) / math.sqrt(var)
    return MannWhitney(u_b, z, min(1.0, math.erfc(z / math.sqrt(2.0))), na, nb)


def _resampled_quantiles(x: np.ndarray, qs: Sequence[float], rng: np.random.Generator,
                         resamples: int) -> np.ndarray:
    """(len(qs), resamples) linear-interpolated quantiles of bootstrap resamples of ``x``.

    x is sorted once; the k-th smallest of a resample x[idx] is x[k-th smallest idx], so each resample
    needs a sort of int32 indices (numpy sorts those several times faster than floats or a partition).
    """
    xs = np.sort(x)
    n = xs.size
    part = np.sort(rng.integers(0, n, size=(resamples, n), dtype=np.int32), axis=1)
    pos = [(n - 1) * q for q in qs]
    out = np.empty((len(qs), resamples))
    for i, h in enumerate(pos):
        lo = math.floor(h)
        hi = min(lo + 1, n - 1)
        frac = h - lo
        out[i] = xs[part[:, lo]] * (1.0 - frac) + xs[part[:, hi]] * frac
    return out


def bootstrap_quantile_diff(a: Sequence[float], b: Sequence[float], qs: Sequence[float], level: float = 0.95,
                            resamples: int = BOOTSTRAP_RESAMPLES,
                            seed: int = BOOTSTRAP_SEED) -> list[tuple[float, float]]:
    """Percentile-bootstrap interval of quantile_q(B) − quantile_q(A) for each q in ``qs``.

    A and B are resampled independently (``resamples`` times, numpy Generator seeded with ``seed``; the
    same draws serve every q). The interval is the ((1−level)/2, (1+level)/2) quantiles of the resampled
    differences. Deterministic for fixed inputs: values are sorted first, so input order does not matter.
    """
    xa, xb = _as_array(a, "A", 2), _as_array(b, "B", 2)
    rng = np.random.default_rng(seed)
    qa = _resampled_quantiles(xa, qs, rng, resamples)
    qb = _resampled_quantiles(xb, qs, rng, resamples)
    diff = qb - qa
    tail = (1.0 - level) / 2.0
    return [(float(np.quantile(d, tail)), float(np.quantile(d, 1.0 - tail))) for d in diff]


@dataclass(frozen=True)
class Welch:
    delta: float    # mean(B) − mean(A)
    se: float
    df: float       # Welch–Satterthwaite
    t: float
    p_value: float  # two-sided
    ci_low: float
    ci_high: float


def welch(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> Welch:
    """Welch's unequal-variance t-test and interval for mean(B) − mean(A).

    se² = s_a²/n_a + s_b²/n_b (sample variances, ddof 1); df = se⁴ / ((s_a²/n_a)²/(n_a−1) + (s_b²/n_b)²/(n_b−1));
    t = delta/se, p = 2·P(T_df > |t|); interval delta ± t_{(1+level)/2, df}·se. Needs n ≥ 2 per sample and
    some variance (se > 0).
    """
    xa, xb = _as_array(a, "A", 2), _as_array(b, "B", 2)
    va, vb = float(np.var(xa, ddof=1)) / xa.size, float(np.var(xb, ddof=1)) / xb.size
    se = math.sqrt(va + vb)
    if se == 0.0:
        raise StatsInputError("both samples are constant: Welch's test is undefined (se = 0)")
    df = (va + vb) ** 2 / (va * va / (xa.size - 1) + vb * vb / (xb.size - 1))
    delta = float(xb.mean() - xa.mean())
    t = delta / se
    p = min(1.0, betainc(df / 2.0, 0.5, df / (df + t * t)))  # = 2·P(T_df > |t|), without 1 − cdf cancellation
    half = t_quantile((1.0 + level) / 2.0, df) * se
    return Welch(delta, se, df, t, p, delta - half, delta + half)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values, in the input order.

    Sorted ascending, p_(i) becomes max over j ≤ i of min(1, (m − j + 1)·p_(j)); rejecting where the adjusted
    value is below α keeps the chance of any false rejection among the m tests at most α, whatever their
    dependence (Holm 1979). Used so that one comparison of many points and metrics does not alarm by chance.
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    out = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        out[i] = running
    return out
