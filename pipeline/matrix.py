"""A run matrix: the serving lanes fanned out over instance types × models × server configs × workloads.

A request's ``matrix`` names what varies; every combination not ``exclude``-d is a **cell**, and each cell runs
on its own ephemeral box of its instance type (launched from the fleet's launch template for the type, tagged
with the run and the cell, terminated at the cell's end): provenance, the preflight gate, the request's smoke
gate when it runs one, then the matrix's lanes (default: the request's lanes among :data:`MATRIX_LANES`). A cell's
lanes commit as ``<lane>@<cell>`` (``serve_sweep@c03``), so the report groups them by the cell's instance type,
model, server config and workload. The training lanes stay on the pinned trn1 box (a cell is a serving box: a
matrix that lists a training lane is refused).

Pure and cheap (no AWS): the request model validates a matrix with :func:`check_matrix`; the planner expands it
with :func:`expand_cells`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pipeline.lane_configs.bounds import MATRIX_BOXES
from pipeline.spec_types import first_refusal

# The serving lanes a matrix fans out (the lanes that measure one served model and config at a time).
MATRIX_LANES: tuple[str, ...] = ("serve_sweep", "capacity", "quality", "accuracy")
# What every cell runs before its matrix lanes (the gate of every box), and the request's gate it also runs.
CELL_PRELUDE: tuple[str, ...] = ("provenance", "preflight")
CELL_OPTIONAL_GATES: tuple[str, ...] = ("smoke",)
DEFAULT_MAX_CONCURRENCY = 4  # boxes at once when the matrix does not say
MAX_CELLS = 256  # a matrix above this is refused (the plan, the report and the account would not thank you)
CELL_ID_WIDTH = 2
DIMENSIONS = ("instance_type", "model", "server_config", "workload")


class MatrixError(ValueError):
    """A matrix that cannot be expanded; the message is ``matrix.<field>: reason``."""


class Exclusion(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    instance_type: str | None = None
    model: str | None = None
    server_config: str | None = None
    workload: str | None = None

    def matches(self, cell: Cell) -> bool:
        given = {k: v for k, v in self.model_dump().items() if v is not None}
        return bool(given) and all(getattr(cell, k) == v for k, v in given.items())


class AdaptiveSpec(BaseModel):
    """``matrix.adaptive``: spend the matrix's budget where the answer is open (control_plane/adaptive.py,
    docs/explanation/decision-noise.md). After each wave a cell whose probability of being the cheapest of its
    Decision group, or within ``margin_pct`` of the cheapest, is below ``threshold`` stops; the cells still in
    contention get another repeat until the cheapest is ``cheaper`` than every other (the Decision's verdict), each has
    ``max_repeats`` or the box-hours reach ``budget_box_hours``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    threshold: float = Field(
        0.05, gt=0, lt=1, description="stop a cell whose P(cheapest within the margin) is below it"
    )
    margin_pct: float = Field(5.0, ge=0, le=100, description="within this many % of the cheapest counts as cheapest")
    budget_box_hours: float | None = Field(None, gt=0, description="box-hours the matrix may spend (default: none)")
    max_repeats: int = Field(5, ge=1, le=20, description="runs of one cell at most (its first included)")


class MatrixSpec(BaseModel):
    """``matrix`` of a request (docs/reference/fleet.md). Strict: a number is a JSON number, a list a JSON list (a
    string ``"4"`` is refused, not read as 4)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    instance_types: list[str] = Field(min_length=1, description="catalogued instance types (pipeline.instance_types)")
    models: list[str] | None = Field(None, min_length=1, description="default: the request's models")
    server_configs: list[str] | None = Field(
        None, min_length=1, description="names among the request's server configs (default: all)"
    )
    workloads: list[str] | None = Field(
        None,
        min_length=1,
        description="names among the request's workloads (default: one cell per "
        "other combination, the lanes' own shapes)",
    )
    lanes: list[str] | None = Field(
        None,
        min_length=1,
        description=f"serving lanes each cell runs (default: the request's lanes among {', '.join(MATRIX_LANES)})",
    )
    exclude: list[Exclusion] = Field(default_factory=list, description="cells to leave out (any fields given match)")
    max_concurrency: int | None = Field(
        None,
        ge=MATRIX_BOXES["min"],
        le=MATRIX_BOXES["max"],
        description=f"boxes at once (default min(cells, {DEFAULT_MAX_CONCURRENCY}))",
    )
    adaptive: AdaptiveSpec | None = Field(
        None, description="stop dominated cells early (default: every cell runs once)"
    )

    @field_validator("instance_types")
    @classmethod
    def _known_types(cls, value: list[str]) -> list[str]:
        from pipeline.instance_types import UnknownInstanceTypeError, get_instance_type

        for name in value:
            try:
                get_instance_type(name)
            except UnknownInstanceTypeError as exc:
                raise ValueError(str(exc)) from None
        _unique(value)
        return value

    @field_validator("models", "server_configs", "workloads")
    @classmethod
    def _unique_names(cls, value: list[str] | None) -> list[str] | None:
        return _unique(value) if value is not None else None

    @field_validator("lanes")
    @classmethod
    def _matrix_lanes(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        from pipeline.lanes import UnknownLaneError, get_lane

        for name in value:
            try:
                spec = get_lane(name)
            except UnknownLaneError as exc:
                raise ValueError(str(exc)) from None
            if "inf2" not in spec.boxes or spec.gate or name in CELL_PRELUDE:
                raise ValueError(
                    f"{name!r} is not a serving lane; a cell is a serving box (e.g. "
                    f"{', '.join(MATRIX_LANES)}; the training lanes stay on the trn1 box, every cell "
                    f"runs {', '.join(CELL_PRELUDE)} and the request's gates itself)"
                )
        return _unique(value)


def _unique(value: list[str]) -> list[str]:
    twice = sorted({v for v in value if value.count(v) > 1})
    if twice:
        raise ValueError("listed twice: " + ", ".join(twice))
    return value


@dataclass(frozen=True)
class Cell:
    """One combination: its id (``c01``), what it runs on and what it serves."""

    cell: str
    instance_type: str
    model: str
    server_config: str
    workload: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "cell": self.cell,
            "instance_type": self.instance_type,
            "model": self.model,
            "server_config": self.server_config,
            "workload": self.workload,
        }

    @property
    def label(self) -> str:
        return " · ".join(x for x in (self.instance_type, self.model, self.server_config, self.workload) if x)


def parse_matrix(data: Any) -> MatrixSpec:
    try:
        return MatrixSpec.model_validate(data)
    except ValidationError as exc:
        raise MatrixError(first_refusal(exc, "matrix").replace("matrix.: ", "matrix: ")) from None


def server_config_names(server_configs: Any) -> list[str]:
    return list(server_configs) if isinstance(server_configs, (list, tuple, dict)) else []


def expand_cells(
    spec: MatrixSpec, *, models: Sequence[str], server_configs: Any, workloads: Mapping[str, Any]
) -> list[Cell]:
    """The matrix's cells in a stable order (type, model, config, workload), numbered from c01; refused
    (:class:`MatrixError`) when a name is not the request's, when every cell is excluded, or above
    :data:`MAX_CELLS`."""
    chosen_models = spec.models or list(models)
    unknown = [m for m in chosen_models if m not in models]
    if unknown:
        raise MatrixError(f"matrix.models: {unknown[0]!r} is not a model of the request ({', '.join(models)})")
    names = server_config_names(server_configs)
    chosen_configs = spec.server_configs or names
    unknown = [c for c in chosen_configs if c not in names]
    if unknown:
        raise MatrixError(
            f"matrix.server_configs: {unknown[0]!r} is not a server config of the request ({', '.join(names)})"
        )
    chosen_workloads: list[str | None] = list(spec.workloads) if spec.workloads else [None]
    unknown = [w for w in chosen_workloads if w is not None and w not in workloads]
    if unknown:
        raise MatrixError(
            f"matrix.workloads: {unknown[0]!r} is not a workload of the request "
            f"({', '.join(workloads) or 'it declares none'})"
        )
    total = len(spec.instance_types) * len(chosen_models) * len(chosen_configs) * len(chosen_workloads)
    if total > MAX_CELLS:
        raise MatrixError(f"matrix: {total} cells exceed the limit of {MAX_CELLS}; narrow it or exclude cells")
    raw = [
        Cell("", t, m, c, w)
        for t in spec.instance_types
        for m in chosen_models
        for c in chosen_configs
        for w in chosen_workloads
    ]
    for i, ex in enumerate(spec.exclude):
        for dim in DIMENSIONS:
            value = getattr(ex, dim)
            if value is not None and not any(getattr(c, dim) == value for c in raw):
                raise MatrixError(f"matrix.exclude.{i}.{dim}: {value!r} is in no cell of the matrix")
    kept = [c for c in raw if not any(ex.matches(c) for ex in spec.exclude)]
    if not kept:
        raise MatrixError("matrix.exclude: every cell is excluded")
    width = max(CELL_ID_WIDTH, len(str(len(kept))))
    return [
        Cell(f"c{i:0{width}d}", c.instance_type, c.model, c.server_config, c.workload) for i, c in enumerate(kept, 1)
    ]


def cell_lanes(spec: MatrixSpec, request_lanes: Sequence[str]) -> list[str]:
    """What each cell runs, in lane order: the prelude, the request's optional gates, the matrix lanes."""
    matrix = list(spec.lanes) if spec.lanes else [n for n in MATRIX_LANES if n in request_lanes]
    if not matrix:
        raise MatrixError(
            f"matrix.lanes: the request runs none of the matrix lanes ({', '.join(MATRIX_LANES)}); "
            "name them in lanes or matrix.lanes"
        )
    gates = [g for g in CELL_OPTIONAL_GATES if g in request_lanes]
    return [*CELL_PRELUDE, *gates, *matrix]


def concurrency(spec: MatrixSpec, cells: int) -> int:
    return min(cells, spec.max_concurrency or DEFAULT_MAX_CONCURRENCY)


def is_cell_box(box: str) -> bool:
    """A graph box that is a matrix cell (``c01``), not a pinned box (``trn1``, ``inf2``) nor ``local``."""
    return len(box) > 1 and box[0] == "c" and box[1:].isdigit()
