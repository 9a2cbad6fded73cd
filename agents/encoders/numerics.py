"""The numerics gate: a backend's outputs against a CPU fp32 reference instance on the same inputs.

Per (batch size, shape): the lowest row cosine similarity, the max absolute error, and how many output values are
NaN or infinite. The verdict: ``nan`` (any non-finite value), ``diverged`` (a row's cosine under the gate's
``min_cosine`` or the max error over ``max_abs_err``), else ``pass``. Only a ``pass`` is timed: a model that returns
NaN or diverges is a numerics exclusion with this evidence, never a speed result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

Verdict = Literal["pass", "nan", "diverged"]


@dataclass(frozen=True)
class NumericsResult:
    rows: int
    values: int
    min_cosine: float | None  # None: no finite row to compare
    max_abs_err: float | None
    nan_count: int
    verdict: Verdict
    reason: str | None  # None on a pass: the evidence otherwise


def compare(got: np.ndarray, want: np.ndarray, *, min_cosine: float, max_abs_err: float) -> NumericsResult:
    got = np.asarray(got, dtype=np.float64).reshape(len(got), -1)
    want = np.asarray(want, dtype=np.float64).reshape(len(want), -1)
    if got.shape != want.shape:
        return NumericsResult(
            len(got), got.size, None, None, 0, "diverged", f"output shape {got.shape} != reference {want.shape}"
        )
    bad = int((~np.isfinite(got)).sum())
    finite_rows = np.isfinite(got).all(axis=1)
    cos = err = None
    if finite_rows.any():
        g, w = got[finite_rows], want[finite_rows]
        gn, wn = np.linalg.norm(g, axis=1), np.linalg.norm(w, axis=1)
        both_zero = (gn == 0) & (wn == 0)
        denom = np.where(gn * wn > 0, gn * wn, 1.0)
        cosines = np.where(both_zero, 1.0, (g * w).sum(axis=1) / denom)
        cos, err = float(cosines.min()), float(np.abs(g - w).max())
    if bad:
        return NumericsResult(
            len(got), got.size, cos, err, bad, "nan", f"{bad} of {got.size} output values are NaN or infinite"
        )
    assert cos is not None and err is not None
    if cos < min_cosine or err > max_abs_err:
        return NumericsResult(
            len(got),
            got.size,
            cos,
            err,
            0,
            "diverged",
            f"min row cosine {cos:.6g} (gate >= {min_cosine:g}), max abs error {err:.6g} (gate <= {max_abs_err:g})",
        )
    return NumericsResult(len(got), got.size, cos, err, 0, "pass", None)
