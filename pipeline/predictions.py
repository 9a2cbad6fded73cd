"""Predictions a request registers before its run: what each lane, server config or matrix cell is expected to do.

A prediction names its target (a lane; optionally one of the request's server configs, or a matrix cell), an
expected outcome and optionally an expected figure, a metric of :data:`METRICS` with a range (``low``/``high``) or a
value and a tolerance. What each outcome means against what the run records (``docs/reference/predictions.md``;
``analytics/views/sql/47_report_predictions.sql`` scores it):

* ``works``: the lane's attempt succeeded (with a server config: at least one headline serving point of that config;
  with a figure: the figure was observed);
* ``excluded``: the lane was recorded skipped (not applicable here, or a need did not succeed), or the server
  config's points were all excluded from the headline tables;
* ``fails``: the lane's attempt failed (with a server config: its boot or compile failed).

A target the run recorded nothing for is *not run* (neither held nor missed). Validated here (pydantic, ``field:
reason``) and against the request (:func:`check_against_request`); stored once per run, before its first lane, with
their digest (:func:`predictions_digest`). Standard library and pydantic only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

Expected = Literal["works", "excluded", "fails"]

# metric -> (what it is, its unit, where the view reads it): the closed list a figure may name (Metric, its names for
# pydantic; the view 47_report_predictions.sql reads each one: a test keeps the view's cases equal to it)
METRICS: dict[str, tuple[str, str, str]] = {
    "output_tok_s": ("output tokens per second of a serving point", "tok/s", "serving_points.output_throughput"),
    "p50_ttft_ms": ("median time to first token of a serving point", "ms", "serving_points.p50_ttft_ms"),
    "p50_tpot_ms": ("median time per output token of a serving point", "ms", "serving_points.p50_tpot_ms"),
    "final_loss": ("the training run's final loss", "", "train_runs.final_loss"),
    "train_tok_s": ("the training run's tokens per second", "tok/s", "train_runs.tokens_per_s"),
    "wall_s": ("the lane's wall time", "s", "lane_runs.wall_s (the effective attempt)"),
}
SERVING_METRICS = ("output_tok_s", "p50_ttft_ms", "p50_tpot_ms")
Metric = Literal[tuple(METRICS)]  # type: ignore[valid-type]
MAX_PREDICTIONS = 200
NOTE_MAX = 500


class Figure(BaseModel):
    """An expected figure: ``metric`` (at ``concurrency`` for a serving metric) within ``[low, high]``, or
    ``value`` ± ``tolerance``."""

    model_config = ConfigDict(extra="forbid")

    metric: Metric = Field(description="one of " + ", ".join(METRICS) + " (docs/reference/predictions.md)")
    concurrency: int | None = Field(None, ge=1, description="a serving metric: the point's max concurrency")
    low: float | None = Field(None, allow_inf_nan=False, description="the range's lower end (inclusive)")
    high: float | None = Field(None, allow_inf_nan=False, description="the range's upper end (inclusive)")
    value: float | None = Field(None, allow_inf_nan=False, description="the expected value (with tolerance)")
    tolerance: float | None = Field(None, allow_inf_nan=False, description="value ± tolerance, > 0")

    @field_validator("high")
    @classmethod
    def _above_low(cls, value: float | None, info: ValidationInfo) -> float | None:
        low = info.data.get("low")
        if value is not None and low is not None and value <= low:
            raise ValueError(
                f"an {'empty' if value == low else 'inverted'} range: high {value:g} is not above low {low:g}"
            )
        return value

    @field_validator("tolerance")
    @classmethod
    def _positive(cls, value: float | None) -> float | None:
        if value is not None and value <= 0:
            raise ValueError(f"an {'empty' if value == 0 else 'inverted'} tolerance ({value:g}): it must be above 0")
        return value

    @model_validator(mode="after")
    def _one_range(self) -> Figure:
        ranged = self.low is not None or self.high is not None
        valued = self.value is not None or self.tolerance is not None
        if ranged and valued:
            raise ValueError("give low/high or value and tolerance, not both")
        if not ranged and not valued:
            raise ValueError("give low and/or high, or value and tolerance")
        if self.concurrency is not None and self.metric not in SERVING_METRICS:
            raise ValueError(f"concurrency applies to a serving metric ({', '.join(SERVING_METRICS)})")
        return self

    def bounds(self) -> tuple[float | None, float | None]:
        """The inclusive range the observed value must fall in (an open end is None)."""
        if self.value is not None and self.tolerance is not None:
            return self.value - self.tolerance, self.value + self.tolerance
        return self.low, self.high

    def range_text(self) -> str:
        unit = METRICS[self.metric][1]
        return range_text(self.metric, self.concurrency, *self.bounds()) + (f" {unit}" if unit else "")


def range_text(
    metric: str, concurrency: int | None, low: float | None, high: float | None, number: Any = "{:g}".format
) -> str:
    """``output_tok_s at c32 380–450`` (``≥ low`` or ``≤ high`` for an open end), each bound written by ``number``:
    how the plan and the report name a figure's range."""
    at = f" at c{concurrency}" if concurrency is not None else ""
    if low is not None and high is not None:
        span = f"{number(low)}–{number(high)}"
    else:
        span = f"≥ {number(low)}" if low is not None else f"≤ {number(high)}"
    return f"{metric}{at} {span}"


class Prediction(BaseModel):
    """One prediction: its target, the expected outcome, an optional figure and note."""

    model_config = ConfigDict(extra="forbid")

    lane: str = Field(description="a lane the request runs")
    server_config: str | None = Field(None, description="one of the request's server configs (a variant)")
    cell: str | None = Field(None, pattern=r"^c\d{2,4}$", description="a matrix cell (c01, ...) of the request")
    expected: Expected = Field(description="works | excluded | fails (docs/reference/predictions.md)")
    figure: Figure | None = None
    note: str | None = Field(None, max_length=NOTE_MAX, description="why the author expects it")

    @model_validator(mode="after")
    def _figure_needs_works(self) -> Prediction:
        if self.figure is not None and self.expected != "works":
            raise ValueError(f"a figure is observed only when the target works (expected is {self.expected!r})")
        return self

    @property
    def target(self) -> str:
        """``lane``, ``lane@cell``, with ``[server config]``: how the plan and the report name it."""
        return (
            self.lane
            + (f"@{self.cell}" if self.cell else "")
            + (f" [{self.server_config}]" if self.server_config else "")
        )


def check_against_request(
    predictions: Sequence[Prediction],
    running: Sequence[str],
    cells: Mapping[str, Sequence[str]] | None,
) -> list[tuple[tuple[Any, ...], str]]:
    """(location, reason) of every prediction the request cannot score: a lane it does not run, a cell its matrix
    lacks (or a cell without a matrix) or one that does not run the lane. ``cells``: cell id -> the lanes that cell
    runs (None: no matrix). A server config is checked against what its lane boots at plan time
    (``control_plane.request_configs.check_prediction_configs``)."""
    problems: list[tuple[tuple[Any, ...], str]] = []
    for i, p in enumerate(predictions):
        if p.lane not in running:
            problems.append(((i, "lane"), f"the request does not run lane {p.lane} (lanes: {', '.join(running)})"))
            continue
        if p.cell is not None:
            if cells is None:
                problems.append(((i, "cell"), "the request has no matrix, so no cells"))
            elif p.cell not in cells:
                problems.append(((i, "cell"), f"{p.cell} is not a cell of the matrix ({', '.join(cells)})"))
            elif p.lane not in cells[p.cell]:
                problems.append(((i, "cell"), f"cell {p.cell} does not run lane {p.lane}"))
    return problems


def canonical_predictions(predictions: Sequence[Prediction]) -> list[dict[str, Any]]:
    return [p.model_dump(mode="json", exclude_none=True) for p in predictions]


def predictions_digest(predictions: Sequence[Prediction]) -> str:
    """``sha256:<hex>`` over the predictions' canonical JSON: what a resume compares, what the record carries."""
    body = json.dumps(canonical_predictions(predictions), sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(body).hexdigest()


def prediction_rows(predictions: Sequence[Prediction], registered_at: Any, digest: str) -> list[dict[str, Any]]:
    """The ``predictions`` table's rows of a registration (``analytics.schema``): one per prediction."""
    out = []
    for i, p in enumerate(predictions):
        low, high = p.figure.bounds() if p.figure else (None, None)
        out.append(
            {
                "prediction": i,
                "target": p.target,
                "target_lane": p.lane,
                "server_config": p.server_config,
                "cell": p.cell,
                "expected": p.expected,
                "metric": p.figure.metric if p.figure else None,
                "concurrency": p.figure.concurrency if p.figure else None,
                "low": low,
                "high": high,
                "note": p.note,
                "registered_at": registered_at,
                "digest": digest,
                "source": "request",
                "recorded_verdict": None,
                "recorded_observed": None,
            }
        )
    return out
