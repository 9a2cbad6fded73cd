"""comparison.json's model: the document the data stage writes and the render stage reads, versioned by
:data:`COMPARISON_SCHEMA` (its ``schema`` field).

Two kinds of type, by who decides the columns:

* **Sections** (:class:`Comparison` and one model per key of it) are pydantic models: their keys are fixed by
  ``analytics.report.comparison`` and its section builders, and the render stage reads them as attributes
  (``c.serving.points``). A key written only in some cases (``deltas`` without a run to compare against, the
  serving section's ``note`` or ``aggregate_points``, the Decision's rate and hardware keys) is ``None`` when absent.
* **Rows** are the records a section lists. A view's row (:data:`Row`) is ``dict[str, Any]``: its columns are the
  view's SQL (``SELECT *`` over ``analytics/views/sql``), which the render stage reads by column name, and the JSON
  Schema says only "an object". Where the Python fixes the columns (a ``SELECT`` list or a dict it builds: a run's
  lanes and outcome, the rules, loss curves, sweep grids, exclusions, the sustained lanes), the row is a typed
  dict with exactly those keys (extra keys refused), still a dict to the code that reads it.

``write_report`` validates what it wrote against :class:`Comparison` (a document that drifts from its model fails the
build, not its reader); ``neuronpipe schema comparison`` prints the JSON Schema generated from it
(``docs/reference/schemas/comparison.schema.json``). Numbers keep the type they were written with (``int | float``):
the document read back dumps to the same JSON (:meth:`Comparison.as_written`).
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

COMPARISON_SCHEMA = "neuronpipe.comparison/1"

Row = dict[str, Any]  # one row of a view: the view's columns (analytics/views/sql), read by name
Number = int | float  # a number as it was written (an int stays an int)
ROW_CONFIG = ConfigDict(extra="forbid")


class LaneAttempt(TypedDict):
    """A lane's effective attempt in a run (``report_lane_attempts``)."""

    __pydantic_config__ = ROW_CONFIG
    lane: str
    status: str
    attempt: str | None
    wall_s: Number | None
    backend: str | None
    box_role: str | None
    instance_type: str | None
    profile: str | None


class RunOutcome(TypedDict):
    """``pipeline.graph.RunOutcome.to_json()``: the run's outcome over every committed attempt."""

    __pydantic_config__ = ROW_CONFIG
    status: Literal["succeeded", "partial", "failed"]
    failed: list[str]
    skipped: list[str]
    reasons: dict[str, str]
    why: str


class Rule(TypedDict):
    """A measurement rule (docs/reference/rules.md), numbered."""

    __pydantic_config__ = ROW_CONFIG
    rule: int
    title: str
    text: str


class LossCurve(TypedDict):
    """One training lane's loss per step."""

    __pydantic_config__ = ROW_CONFIG
    run_id: str
    lane: str
    model: str | None
    step: list[int]
    loss: list[Number | None]


class ServingGrid(TypedDict):
    """The concurrency grid a serving lane swept (its ``grid_json``, parsed; ``{"unparsed": text}`` when it is not
    JSON)."""

    __pydantic_config__ = ROW_CONFIG
    run_id: str
    lane: str
    model: str | None
    server_config: str | None
    grid: dict[str, Any]


class Exclusion(TypedDict):
    """What the report left out and why (``report_exclusions``, and attempts the store's readers found damaged)."""

    __pydantic_config__ = ROW_CONFIG
    run_id: str
    lane: str | None
    attempt: str | None
    kind: str
    subject: str | None
    reason: str | None


class SustainedLane(TypedDict):
    __pydantic_config__ = ROW_CONFIG
    run_id: str
    lane: str
    status: str


class Section(BaseModel):
    """A section of comparison.json: its keys fixed, none other allowed."""

    model_config = ConfigDict(extra="forbid")


class RunSummary(Section):
    run_id: str
    lanes: list[LaneAttempt]
    outcome: RunOutcome | None = Field(None, description="absent for a run with no lane record")


class Provenance(Section):
    machines: list[Row]
    facts: list[Row]


class Preflight(Section):
    summary: list[Row]
    failed: list[Row]


class ColdStart(Section):
    boots: list[Row]
    cache: list[Row]


class Compile(Section):
    summary: list[Row]
    superseded: list[Row]
    cold_start: ColdStart


class Training(Section):
    runs: list[Row]
    loss_trend: list[Row]
    loss_curves: list[LossCurve]
    saves: list[Row] = Field(description="mid-run checkpoint saves per model and their share of the run "
                                         "(report_train_saves)")


class FromScratch(Section):
    runs: list[Row] = Field(description="per model trained from scratch, imported run or reference (report_scratch)")
    epochs: list[Row] = Field(description="per model and epoch (scratch_epoch_metrics)")


class Serving(Section):
    available: bool = Field(description="the serving point view is installed")
    view: str | None
    points: list[Row]
    grids: list[ServingGrid]
    aggregate_points: list[Row] | None = Field(None, description="present when available")
    roofline: list[Row] | None = Field(
        None, description="every serving point's roofline: bounds and % of each (point_roofline; when installed)"
    )
    note: str | None = Field(None, description="why there are no serving metrics (present when not available)")


class Workloads(Section):
    points: list[Row]
    buckets: list[Row]
    turns: list[Row]
    sessions: list[Row]


class Sustained(Section):
    summary: list[Row]
    retention_view: str | None
    retention: list[Row]
    iterations: list[Row]
    lanes: list[SustainedLane]
    windows: list[Row]


class Quality(Section):
    summary: list[Row]
    delta: list[Row]


class Roundtrip(Section):
    files: list[Row]
    models: list[Row]
    artifacts: list[Row]


class Cost(Section):
    notes: list[str]
    price_table: list[Row]
    lanes: list[Row]
    runs: list[Row]
    points: list[Row]


class Decision(Section):
    available: bool = Field(description="the decision view is installed")
    rule: str
    formula: str
    rows: list[Row]
    slos: list[Row]
    pricing: list[Row]
    rate_rule: str | None = Field(None, description="present when available")
    capacity: list[Row] | None = Field(None, description="present when available")
    capacity_points: list[Row] | None = Field(None, description="present when available")
    hardware_rule: str | None = Field(None, description="present when available")
    hardware: list[Row] | None = Field(None, description="present when available")
    choice: Row | None = Field(None, description="the pricing model and horizon the Decision is read for")
    pricing_rule: str | None = Field(None, description="present when available")
    pricing_models: list[Row] | None = Field(None, description="each type's price under each pricing model")
    ranking_by_pricing: list[Row] | None = Field(None, description="per group and pricing model: the order of types")
    lifecycle_rule: str | None = Field(None, description="present when available")
    lifecycle: list[Row] | None = Field(None, description="serving-only and lifecycle $/M under the chosen model")
    quality_rule: str | None = Field(None, description="present when available")
    quality_cost: list[Row] | None = Field(None, description="accuracy against $/M at the SLO, the Pareto front")
    noise_rule: str | None = Field(None, description="present when available: P(cheaper) with run-level noise")
    noise_options: list[Row] | None = Field(None, description="present when available: decision_noise_options")
    noise: list[Row] | None = Field(None, description="present when available: report_decision_noise, per pair")


class Variants(Section):
    configs: list[Row]
    comparisons: list[Row]
    limits: list[Row]
    lora_traffic: list[Row]


class Accuracy(Section):
    available: bool = Field(description="the accuracy lane's evaluations are in the views")
    method: dict[str, Any]
    evaluations: list[Row]
    not_ok: list[Row]
    pairs: list[Row]
    configs: list[Row]
    flags: list[Row]


class Kernels(Section):
    kernels: list[Row] = Field(description="per kernel: its shape sets' verdicts (report_kernel_verdicts)")
    shapes: list[Row] = Field(description="per kernel and shape set: stages, timings, speed-up (report_kernels)")


class Encoders(Section):
    rows: list[Row] = Field(
        description="per workload, shape and batch size: placement, numerics, timing (report_encoders)"
    )
    decision: list[Row] = Field(description="per instance and workload: the batch within the SLO, $/1k items")


class Rag(Section):
    method: dict[str, Any]
    ingest: list[Row] = Field(description="per ingest: chunks, chunking, seconds, chunks/s (report_rag_ingest)")
    index: list[Row] = Field(description="per index: store, type, parameters, build s (report_rag_index)")
    quality: list[Row] = Field(description="per arm: hits@k with Wilson interval, MRR (report_rag_quality)")
    reranker: list[Row] = Field(description="the reranker A/B: paired test, Holm, verdict (rag_reranker_tests)")
    stages: list[Row] = Field(description="per concurrency and stage: percentiles with intervals (report_rag_stages)")
    load: list[Row] = Field(description="per load level: queries/s, the SLO's percentile, met (report_rag_load)")
    decision: list[Row] = Field(description="per instance type: highest load at the SLO, $/1k queries")
    coresidency: list[Row] = Field(description="the embedder beside the served model (report_rag_coresidency)")


class Predictions(Section):
    rule: str
    rows: list[Row]
    rates: list[Row]


class SinceBaseline(Section):
    rule: str
    runs: list[Row] = Field(description="per judged run: its baseline, outcome and points faster / slower / within noise")
    moved: list[Row] = Field(description="the rows behind the faster and slower findings")


class Trend(Section):
    method: str
    runs: int
    series: list[dict[str, Any]] = Field(description="per (fingerprint, instance type, point · metric) series")


class Comparison(Section):
    """comparison.json: every number the report shows, for the runs it names."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, title="comparison.json")

    schema_version: Literal["neuronpipe.comparison/1"] = Field(alias="schema",
                                                                description="this document's version")
    run_ids: list[str] = Field(description="the runs asked for, then every other run found, in order")
    runs: list[RunSummary]
    provenance: Provenance
    preflight: Preflight
    compile: Compile
    training: Training
    from_scratch: FromScratch
    serving: Serving
    workloads: Workloads
    sustained: Sustained
    quality: Quality
    roundtrip: Roundtrip
    exclusions: list[Exclusion]
    host_cpu: list[Row]
    telemetry: list[Row]
    cost: Cost
    decision: Decision
    rules: list[Rule]
    deltas: list[Row] | None = Field(None, description="each run against the first (absent when not compared)")
    variants: Variants
    accuracy: Accuracy
    kernels: Kernels | None = Field(None, description="the nki lane's kernels (absent when no run has kernel rows)")
    encoders: Encoders | None = Field(None, description="the encode lane's rows (absent when no run has encoder rows)")
    rag: Rag | None = Field(None, description="the rag lane's pipeline (absent when no run has rag rows)")
    predictions: Predictions | None = Field(
        None, description="predicted vs observed (present when a run registered predictions)"
    )
    baseline: SinceBaseline | None = Field(
        None, description="each run against its baseline (present when a run was judged against one)"
    )
    trend: Trend | None = Field(None, description="series across the runs of one request (present when any)")

    def as_written(self) -> dict[str, Any]:
        """The document as JSON values, exactly the keys it was read with (what ``json.loads`` of the file gives)."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


def comparison_json_schema() -> dict[str, Any]:
    """The JSON Schema of comparison.json (what ``neuronpipe schema comparison`` prints)."""
    return Comparison.model_json_schema(by_alias=True)
