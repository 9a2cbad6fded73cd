"""What a run asks for (``RunRequest``) and what it will do (``RunPlan``).

A ``RunRequest`` is what a person, the console, a schedule or an S3 event hands in;
it is validated before anything starts (an invalid one fails naming the field and
the reason). ``control_plane.plan.plan_run`` turns it into a ``RunPlan``: the run's lane
graph (``pipeline.graph`` nodes) grouped into **waves**; each wave holds per box a **segment**
(the box's lanes of that wave, in order, with their needs, gates, timeouts and heartbeat
intervals). Within a wave the boxes work at once; a wave starts when the one before it has
ended (a lane that needs another box's output is in a later wave than its producer). The plan
also carries the most instance-hours (and dollars) the run can cost.
``RunPlan.execution_input()`` is the Step Functions execution input the generic
state machine in ``statemachine/`` iterates (through the ``schedule_wave`` Lambda); it is capped
at :data:`MAX_EXECUTION_INPUT_BYTES` together with its largest wave (the state machine holds the
wave being run beside its state; Step Functions refuses more than 256 KiB), checked at plan time
with placeholder instance ids.

``max_cost_usd`` is optional: the effective ceiling is the smaller of the request's and the
deployment's (``ControlPlaneSettings.max_cost_usd_ceiling``); a request cannot raise it.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from pipeline.lanes import BoxRole, UnknownLaneError, get_lane, lane_names, request_lanes
from pipeline.names import RUN_ID_PATTERN  # Step Functions execution names: the project's one run id rule
from pipeline.predictions import MAX_PREDICTIONS, Prediction

Preset = Literal["full", "smoke", "finetune_serve"]
ModelName = Literal["llama-3.1-8b-instruct", "qwen3-8b"]
ServerConfigName = Literal["A", "B"]
LaneProfile = Literal["tiny", "full"]
RunStatus = Literal["succeeded", "partial", "failed"]

DEFAULT_MODELS: tuple[ModelName, ...] = ("llama-3.1-8b-instruct", "qwen3-8b")
DEFAULT_SERVER_CONFIGS: tuple[ServerConfigName, ...] = ("A", "B")
DEFAULT_MAX_COST_USD = 50.0  # the deploy ceiling's default (control_plane.lean.DEFAULT_MAX_COST_USD_CEILING)
# Step Functions' execution input limit is 256 KiB; stay well under it: the ScheduleWave state holds the plan beside a
# wave's results (every lane of the catalogue failed with its cause) and the carried answer
# (tests/unit/test_asl_payload_bounds.py), so the cap shrinks as the catalogue grows.
MAX_EXECUTION_INPUT_BYTES = 192 * 1024
# A matrix keeps its plan in the execution input only while it is small: beside a wave of cells' results, the
# carried failures and the answer, the state stays under 256 KiB (tests/unit/test_asl_payload_bounds.py).
MATRIX_INLINE_INPUT_BYTES = 64 * 1024
PLACEHOLDER_INSTANCE_ID = "i-0000000000000000a"  # 19 characters, as long as a real id


def _known_model(name: str) -> str:
    """A model a run may name (refused per item: ``models.0: unknown model ...``)."""
    from pipeline.model_catalogue import UnknownModelError, get_model

    try:
        get_model(name)
    except UnknownModelError as exc:
        raise ValueError(str(exc)) from None
    return name


MAX_BASELINE_RUNS = 50
RunId = Annotated[str, Field(pattern=RUN_ID_PATTERN)]


class LastRuns(BaseModel):
    """A baseline of the run's history: its request fingerprint's last ``last`` runs on its instance type."""

    model_config = ConfigDict(extra="forbid")

    last: int = Field(ge=1, le=MAX_BASELINE_RUNS, description="how many earlier runs form the baseline")


class RunRequest(BaseModel):
    """A validated request for a run (``examples/run-*.json``)."""

    model_config = ConfigDict(extra="forbid")

    run_id: str | None = Field(
        None, pattern=RUN_ID_PATTERN, description="execution name and results run id; generated when absent"
    )
    preset: Preset | None = Field(None, description="full | smoke | finetune_serve (default full)")
    lanes: list[str] | None = Field(None, min_length=1, description="an explicit lane list instead of a preset")
    models: list[Annotated[str, AfterValidator(_known_model)]] = Field(
        default_factory=lambda: list(DEFAULT_MODELS),
        min_length=1,
        description="catalogue models, tiny-<family> (the tiny factory: llama, qwen3, mistral) or any Hugging Face "
        "repository id org/name (downloaded on the box)",
    )
    server_configs: list[str] | dict[str, dict[str, Any] | None] = Field(
        default_factory=lambda: list(DEFAULT_SERVER_CONFIGS),
        description="the server configs the serving lanes boot: catalogue names (A, B), or a map NAME -> the "
        "variant's fields on top of a catalogue config (docs/reference/lanes.md); a serving lane's "
        "lane_config server_configs picks names from these",
    )
    workloads: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="production-shaped workloads, NAME -> {input, output, prompts, prefix, turns, think_time_s, "
        "arrival, configs, seed} (docs/reference/workloads.md): serve_sweep and finetune_serve run every "
        "one after their shapes; a lane's lane_config workloads picks names",
    )
    force: bool = Field(False, description="re-run lanes already committed for this run id")
    profile: LaneProfile = "full"
    max_cost_usd: float | None = Field(
        None,
        gt=0,
        description="reject the plan when its worst-case instance cost exceeds "
        "this (at most the deployment's ceiling; default: that ceiling)",
    )
    adapter_uri: str | None = Field(None, pattern=r"^s3://[^/]+/.+", description="new adapter (finetune_serve)")
    lane_config: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="per-lane config overrides (agents --config)"
    )
    trigger: str = Field("cli", max_length=64, description="who asked: cli, console, schedule, s3:<key>")
    matrix: dict[str, Any] | None = Field(
        None,
        description="fan the serving lanes out over {instance_types, models, server_configs, workloads} "
        "(and exclude, lanes, max_concurrency): one ephemeral box per cell "
        "(docs/reference/fleet.md)",
    )
    slo: str | dict[str, Any] | None = Field(
        None,
        description="the SLO every serving lane's points carry (goodput, Decision): a set name from "
        "pipeline.slo, ttft_ms=..,tpot_ms=..[,percentile=..] or that object; default: "
        "the profile's (docs/reference/slo.md); a lane_config slo still wins",
    )
    predictions: list[Prediction] = Field(
        default_factory=list,
        max_length=MAX_PREDICTIONS,
        description="what the author expects of each lane, server config or matrix cell, registered before the "
        "first lane starts and scored in the report (docs/reference/predictions.md)",
    )
    baseline: RunId | LastRuns | None = Field(
        None,
        description="what the run is judged against at finalize: a run id of the same request fingerprint and "
        'instance type, or {"last": N}: the last N runs of this request\'s fingerprint on this instance type '
        "(docs/reference/history.md)",
    )

    @field_validator("lanes")
    @classmethod
    def _known_lanes(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        for name in value:
            try:
                get_lane(name)
            except UnknownLaneError as exc:
                raise ValueError(str(exc)) from None
        if len(set(value)) != len(value):
            raise ValueError("a lane is listed twice")
        return value

    @field_validator("server_configs", mode="before")
    @classmethod
    def _known_server_configs(cls, value: Any) -> Any:
        from pipeline.servers import ServerVariantError, catalogue, check_server_configs

        try:
            check_server_configs(value, sorted(catalogue("full", "neuron")))
        except ServerVariantError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("workloads", mode="before")
    @classmethod
    def _known_workloads(cls, value: Any) -> Any:
        from pipeline.workloads import WorkloadError, check_workloads

        try:
            check_workloads(value)
        except WorkloadError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("matrix")
    @classmethod
    def _valid_matrix(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        from pipeline.matrix import MatrixError, parse_matrix

        if value is None:
            return None
        try:
            return parse_matrix(value).model_dump(mode="json", exclude_none=True, exclude_defaults=True)
        except MatrixError as exc:
            raise ValueError(str(exc).removeprefix("matrix.").removeprefix("matrix: ")) from None

    @field_validator("models")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:

        if len(set(value)) != len(value):
            raise ValueError("listed twice: " + ", ".join(sorted({v for v in value if value.count(v) > 1})))
        return value

    @field_validator("slo")
    @classmethod
    def _known_slo(cls, value: str | dict[str, Any] | None) -> str | dict[str, Any] | None:
        from pipeline.slo import SloError, parse_slo

        if value is None:
            return None
        try:
            return parse_slo(value).to_config()  # canonical: a set's name, else the whole object
        except SloError as exc:
            raise ValueError(str(exc).removeprefix("slo: ")) from None

    @field_validator("lane_config")
    @classmethod
    def _known_config_lanes(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        unknown = sorted(set(value) - set(lane_names()))
        if unknown:
            raise ValueError(f"unknown lane(s) {', '.join(unknown)}; valid lanes: {', '.join(lane_names())}")
        return value

    @model_validator(mode="after")
    def _preset_or_lanes(self) -> RunRequest:
        if self.preset is not None and self.lanes is not None:
            raise ValueError("give either preset or lanes, not both")
        if self.preset is None and self.lanes is None:
            self.preset = "full"
        return self

    @model_validator(mode="after")
    def _configs_only_for_lanes_it_runs(self) -> RunRequest:
        """A lane_config entry for a lane the request does not run would be silently ignored: refused, one
        ``lane_config.<lane>: ...`` line each (every planner parses the request, so each refuses it)."""
        running = [s.name for s in request_lanes(self.lanes, self.preset)]
        errors = [
            InitErrorDetails(
                type=PydanticCustomError(
                    "lane_not_in_request",
                    "the request does not run lane {lane} (lanes: {lanes})",
                    {"lane": name, "lanes": ", ".join(running)},
                ),
                loc=("lane_config", name),
                input=cfg,
            )
            for name, cfg in self.lane_config.items()
            if name not in running
        ]
        if errors:
            raise ValidationError.from_exception_data(type(self).__name__, errors)
        return self

    @model_validator(mode="after")
    def _predictions_score_what_it_runs(self) -> RunRequest:
        """A prediction the run could never score (a lane it does not run, a server config it does not boot, a cell
        its matrix lacks) is refused, one ``predictions.<i>.<field>: ...`` line each."""
        if not self.predictions:
            return self
        from pipeline.matrix import cell_lanes, expand_cells, parse_matrix
        from pipeline.predictions import check_against_request

        running = [s.name for s in request_lanes(self.lanes, self.preset)]
        cells = None
        if self.matrix is not None:
            spec = parse_matrix(self.matrix)
            lanes_of_cell = cell_lanes(spec, running)
            found = expand_cells(spec, models=self.models, server_configs=self.server_configs, workloads=self.workloads)
            cells = {c.cell: lanes_of_cell for c in found}
        problems = check_against_request(self.predictions, running, cells)
        if problems:
            raise ValidationError.from_exception_data(
                type(self).__name__,
                [
                    InitErrorDetails(
                        type=PydanticCustomError("prediction_not_scorable", why),
                        loc=("predictions", *where),
                        input=None,
                    )
                    for where, why in problems
                ],
            )
        return self


class LaneStep(BaseModel):
    """One lane on one box, as the state machine's RunLane state sees it (``$.lane``).

    ``result_lane`` is what the lane commits under (``smoke@trn1``), ``needs`` the result lanes it waits for
    (its script passes them to ``run-lane --needs``), ``gate`` whether its failure ends its box's segment."""

    model_config = ConfigDict(extra="forbid")

    lane: str
    box_role: BoxRole
    result_lane: str = ""
    needs: list[str] = Field(default_factory=list)
    gate: bool = False
    wave: int = 0
    timeout_s: int = Field(gt=0)
    heartbeat_s: int = Field(gt=0)
    script: str
    comment: str = Field(max_length=100)
    execution_timeout: list[str]
    output_prefix: str
    config: dict[str, Any] | None = None


class HarnessSync(BaseModel):
    """The segment's first command: install or verify the harness, then call back (also the shape of its last one,
    the cache push). ``timeout_s``: how long the state machine waits for the sync's callback — an ephemeral box's
    sync first waits for its first boot, so its timeout is that wait plus the sync's own."""

    model_config = ConfigDict(extra="forbid")

    script: str
    comment: str = Field(max_length=100)
    execution_timeout: list[str]
    output_prefix: str
    timeout_s: int | None = Field(default=None, gt=0)


class SkippedLane(BaseModel):
    lane: str
    box_role: BoxRole
    reason: str


class Launch(BaseModel):
    """How a matrix cell's ephemeral box is launched (``RunInstances`` from the fleet's launch template for its type):
    the subnets tried in order on a capacity error, the tags the run and the cell add."""

    model_config = ConfigDict(extra="forbid")

    template: str = Field(max_length=128)
    subnets: list[str] = Field(min_length=1)
    subnet_count: int = Field(ge=1)
    tags: list[dict[str, str]]


class Segment(BaseModel):
    """One box's lanes of one wave: start the box, sync the harness, its lanes in order, push the compile cache,
    stop the box. A matrix cell's segment launches its ephemeral box instead (``launch``) and terminates it.

    ``box``: the graph's box (``trn1``, ``inf2``, a cell ``c03``). ``release_lease``: no later segment of this run
    uses the box, so its lease is released after the stop (else the lease is kept between the box's segments and
    released at the run's end); a cell's box has no lease (its tags are its own). ``results_key``: where the
    segment writes its result when its wave runs as a Distributed Map (the map's output is not read)."""

    model_config = ConfigDict(extra="forbid")

    box: str = ""
    run_id: str = ""
    box_role: BoxRole
    instance_type: str
    instance_id: str | None = None
    cell: dict[str, Any] | None = None
    launch: Launch | None = None
    results_key: str | None = None
    wave: int = 0
    release_lease: bool = True
    sync: HarnessSync
    # the segment's last command, after its lanes (PushCompileCache): upload what the box compiled, record the boot
    cache_push: HarnessSync
    lanes: list[LaneStep] = Field(min_length=1)
    max_instance_hours: float
    max_cost_usd: float


class Wave(BaseModel):
    """Segments that run at once (one per box); the next wave starts when all of them have ended."""

    model_config = ConfigDict(extra="forbid")

    wave: int
    segments: list[Segment] = Field(min_length=1)


class PlanNotReadyError(Exception):
    """The plan cannot become an execution input yet (e.g. an instance id is unresolved)."""


COST_FIELDS = {"max_instance_hours", "max_cost_usd"}


class RunPlan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str = Field(pattern=RUN_ID_PATTERN)
    results_uri: str
    request: RunRequest
    waves: list[Wave]
    # the run's lane graph (pipeline.graph.Node.to_json()): the scheduler and the outcome decide over it
    nodes: list[dict[str, Any]] = Field(default_factory=list)
    skipped: list[SkippedLane] = Field(default_factory=list)
    max_instance_hours: float
    max_cost_usd: float
    price_source: str
    cost_ceiling_usd: float = DEFAULT_MAX_COST_USD
    # a run matrix: its cells (pipeline.matrix.Cell.to_json() + the cell's worst case), the boxes at once, the
    # region its prices are for, and the vCPUs each EC2 quota must allow (control_plane.quotas)
    cells: list[dict[str, Any]] = Field(default_factory=list)
    max_concurrency: int = 0  # 0: every segment of a wave at once (the two pinned boxes)
    region: str = "us-west-2"
    quota_needs: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def segments(self) -> list[Segment]:
        """Every segment, wave by wave (trn1 before inf2 within a wave, then the cells)."""
        return [seg for wave in self.waves for seg in wave.segments]

    @property
    def pinned_segments(self) -> list[Segment]:
        return [seg for seg in self.segments if seg.launch is None]

    @property
    def box_roles(self) -> list[str]:
        return list(dict.fromkeys(seg.box_role for seg in self.pinned_segments))

    @property
    def instance_ids(self) -> dict[str, str | None]:
        """pinned box role -> instance id (None until resolved); a cell's box is launched by the run."""
        return {seg.box_role: seg.instance_id for seg in self.pinned_segments}

    @property
    def lane_steps(self) -> list[LaneStep]:
        return [step for seg in self.segments for step in seg.lanes]

    def with_instances(self, ids: dict[str, str]) -> RunPlan:
        """The plan with every pinned segment's instance id set from ``ids`` (box role -> instance id)."""
        waves = [
            w.model_copy(
                update={
                    "segments": [
                        s
                        if s.launch is not None
                        else s.model_copy(update={"instance_id": ids.get(s.box_role, s.instance_id)})
                        for s in w.segments
                    ]
                }
            )
            for w in self.waves
        ]
        return self.model_copy(update={"waves": waves})

    def execution_input(self, plan_uri: str | None = None, plan_digest: str | None = None) -> dict[str, Any]:
        """The Step Functions input: what the generic state machine iterates. A matrix's plan too large for it
        (``needs_plan_in_s3``) goes to ``plan_uri`` (written by the caller: :meth:`plan_document`), and the input
        keeps only what the state machine reads from it itself (run, boxes, cells, concurrency) and the plan's
        ``plan_digest``, which the scheduler checks (``control_plane.control_data``)."""
        missing = [role for role, iid in self.instance_ids.items() if not iid]
        if missing:
            raise PlanNotReadyError(f"no instance id for box role(s) {', '.join(missing)}")
        if not self.results_uri.startswith("s3://"):
            raise PlanNotReadyError(f"results_uri must be s3:// for an AWS run, got {self.results_uri!r}")
        data = self._input()
        if plan_uri is not None:
            if not plan_digest:
                raise PlanNotReadyError(f"the plan kept at {plan_uri} needs its digest in the execution input")
            data = {**data, "waves": [], "nodes": [], "plan_uri": plan_uri, "plan_digest": plan_digest}
            check_input_size(data)
            return data
        check_input_size(data, extra=self._largest_wave(data))
        return data

    def plan_document(self) -> dict[str, Any]:
        """What a plan kept in S3 holds (the scheduler reads ``waves`` and ``nodes`` from it)."""
        data = self._input()
        return {"run_id": self.run_id, "waves": data["waves"], "nodes": data["nodes"], "cells": self.cells}

    @property
    def needs_plan_in_s3(self) -> bool:
        """A matrix whose execution input exceeds :data:`MATRIX_INLINE_INPUT_BYTES`."""
        ids = {role: iid or PLACEHOLDER_INSTANCE_ID for role, iid in self.instance_ids.items()}
        data = self.with_instances(ids)._input()
        return bool(self.cells) and _size(data) > MATRIX_INLINE_INPUT_BYTES

    def check_input_size(self) -> int:
        """The execution input's size plus its largest wave's, in bytes (placeholder ids where instances are not
        resolved yet); :class:`ExecutionInputTooLargeError` above :data:`MAX_EXECUTION_INPUT_BYTES`."""
        ids = {role: iid or PLACEHOLDER_INSTANCE_ID for role, iid in self.instance_ids.items()}
        data = self.with_instances(ids)._input()
        return check_input_size(data, extra=self._largest_wave(data))

    @staticmethod
    def _largest_wave(data: dict[str, Any]) -> int:
        return max((_size(w) for w in data["waves"]), default=0)

    def _input(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "results_uri": self.results_uri,
            "boxes": [{"box_role": role, "instance_id": iid} for role, iid in self.instance_ids.items()],
            "cells": [c["cell"] for c in self.cells],
            "max_concurrency": self.max_concurrency,
            "plan_uri": None,
            "plan_digest": None,
            "nodes": self.nodes,
            "waves": [
                {"wave": w.wave, "segments": [s.model_dump(mode="json", exclude=COST_FIELDS) for s in w.segments]}
                for w in self.waves
            ],
            "request": self.request.model_dump(mode="json"),
        }


class RunRequestError(ValueError):
    """An invalid run request; the message names each field and the reason."""


class ExecutionInputTooLargeError(ValueError):
    """The execution input would exceed :data:`MAX_EXECUTION_INPUT_BYTES`."""


def _size(data: dict[str, Any]) -> int:
    return len(json.dumps(data).encode())


def check_input_size(data: dict[str, Any], what: str = "execution input", extra: int = 0) -> int:
    """``data``'s size plus ``extra`` (the largest wave the state machine holds beside it) under the cap."""
    size = _size(data) + extra
    if size > MAX_EXECUTION_INPUT_BYTES:
        raise ExecutionInputTooLargeError(
            f"{what}{' with its largest wave' if extra else ''}: {size:,} bytes exceeds the cap of "
            f"{MAX_EXECUTION_INPUT_BYTES:,} bytes (Step Functions "
            "allows 256 KiB); shorten lane_config or run fewer lanes"
        )
    return size


def describe_validation_error(exc: ValidationError) -> str:
    """``field: reason`` for each problem pydantic found, one per line."""
    lines = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err.get("loc", ())) or "request"
        # a validator's own ValueError is the whole reason: pydantic's "Value error, " prefix says nothing
        lines.append(f"{field}: {str(err.get('msg', 'invalid')).removeprefix('Value error, ')}")
    return "\n".join(lines)


def parse_request(data: Any) -> RunRequest:
    """Validate a request (a dict or JSON text); raises :class:`RunRequestError` naming field and reason."""
    try:
        if isinstance(data, (str, bytes)):
            return RunRequest.model_validate_json(data)
        return RunRequest.model_validate(data)
    except ValidationError as exc:
        raise RunRequestError(describe_validation_error(exc)) from exc


def parse_lane_from_comment(comment: str | None) -> str | None:
    """The lane a command runs, from its ``Comment`` (``neuronpipe <lane> <run_id>``)."""
    m = re.match(r"^neuronpipe (\S+)", comment or "")
    return m.group(1) if m else None


def parse_run_from_comment(comment: str | None) -> str | None:
    """The run id from a command's ``Comment`` (may be cut at 100 characters)."""
    m = re.match(r"^neuronpipe \S+ (\S+)", comment or "")
    return m.group(1) if m else None
