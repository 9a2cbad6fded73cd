"""The predictions a run registered before its first lane (``pipeline.predictions``; docs/reference/predictions.md)."""

import pyarrow as pa

from analytics.schema._types import TS, f, table

PREDICTIONS_LANE = "predictions"  # the lane name a registration commits under (no lane of the catalogue has it)
# the one attempt id a run's registration commits as: the store writes create-only, so a run registers once
REGISTRATION_ATTEMPT = "00000000-registered"

PREDICTIONS = table(
    f("prediction", pa.int32(), False, "its index in the request's predictions list (0-based)"),
    f("target", pa.string(), False, "lane, lane@cell, with [server config]: what the prediction is about"),
    f("target_lane", pa.string(), False, "the lane it is about"),
    f("server_config", pa.string(), doc="the server config (variant) it is about; NULL: the lane as a whole"),
    f("cell", pa.string(), doc="the matrix cell it is about (c01, ...); NULL: every result lane of the lane"),
    f("expected", pa.string(), False, "works | excluded | fails"),
    f("metric", pa.string(), doc="the expected figure's metric (pipeline.predictions.METRICS); NULL: no figure"),
    f("concurrency", pa.int32(), doc="a serving metric's point: its max concurrency; NULL: every point"),
    f("low", pa.float64(), doc="the figure's inclusive lower end; NULL: open"),
    f("high", pa.float64(), doc="the figure's inclusive upper end; NULL: open"),
    f("note", pa.string(), doc="the author's rationale"),
    f("registered_at", TS, False, "when the prediction was committed (before the run's first lane)"),
    f("digest", pa.string(), False, "sha256 of the run's predictions as registered (pipeline.predictions)"),
    f("source", pa.string(), False, "request | imported"),
    f("recorded_verdict", pa.string(), doc="imported: the source's own verdict (held | missed); NULL: scored here"),
    f("recorded_observed", pa.string(), doc="imported: what the source recorded as observed, verbatim"),
    doc="The predictions a run registered before its first lane, immutable: one attempt per run.",
)

PREDICTION_TABLES = {"predictions": PREDICTIONS}
