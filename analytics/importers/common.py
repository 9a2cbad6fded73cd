"""Shapes shared by the importers: one lane's import, times, telemetry CSVs.

An importer turns a tree of someone else's files into ``LaneImport`` values —
our lane name, its lane_runs fields and its rows per table — and nothing else;
``analytics.importers.commit`` writes them through the store API, so every
imported row passes ``conform`` like a row any lane writes.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa

from analytics.importers.source import Tree
from pipeline import jsonio


class ImportInputError(ValueError):
    """A source file that exists but cannot be read as the format says (one line, nothing written)."""


class ImportExistsError(ValueError):
    """The run was already imported (``--force`` adds new attempts instead)."""


@dataclass
class LaneImport:
    lane: str
    box_role: str
    status: str = "succeeded"
    ended_at: datetime | None = None
    wall_s: float | None = None
    error_type: str | None = None
    error_message: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    tables: dict[str, list[pa.Table]] = field(default_factory=dict)  # columnar batches (telemetry)
    paths: list[str] = field(default_factory=list)  # source files this lane read

    def add(self, table: str, rows: list[dict[str, Any]] | dict[str, Any]) -> None:
        self.rows.setdefault(table, []).extend([rows] if isinstance(rows, dict) else rows)

    def add_table(self, table: str, data: pa.Table) -> None:
        if data.num_rows:
            self.tables.setdefault(table, []).append(data)

    def add_point_file(self, tree: Any, files: Any, path: str, captured: Any) -> None:
        """A point's JSON file read: the lane ends no earlier than its capture, and the telemetry CSV beside it
        (``<point>.telemetry.csv``), where there is one, lands in ``telemetry``."""
        self.ended_at = max(filter(None, [self.ended_at, captured]), default=None)
        self.paths.append(path)
        csv_path = path[: -len(".json")] + ".telemetry.csv"
        if csv_path in files:
            self.add_table("telemetry", telemetry_table(tree, csv_path, captured))
            self.paths.append(csv_path)

    def row_count(self, table: str) -> int:
        return len(self.rows.get(table, [])) + sum(t.num_rows for t in self.tables.get(table, []))


def load_json(tree: Tree, path: str) -> dict[str, Any]:
    try:
        data = jsonio.loads(tree.read(path), allow_nan=True)
    except ValueError as exc:
        raise ImportInputError(f"{tree.uri(path)} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ImportInputError(f"{tree.uri(path)}: expected a JSON object, got {type(data).__name__}")
    nulled = null_nan(data, tree.uri(path))
    if nulled:
        tree.nulled()[path] = nulled
    return data


def non_finite(value: Any, name: str = "") -> list[tuple[str, float]]:
    """(field, value) of every NaN or ±Infinity number in parsed JSON (``steps[3].loss``), in order."""
    if isinstance(value, float) and not math.isfinite(value):
        return [(name, value)]
    if isinstance(value, dict):
        return [x for k, v in value.items() for x in non_finite(v, f"{name}.{k}" if name else str(k))]
    if isinstance(value, list):
        return [x for i, v in enumerate(value) for x in non_finite(v, f"{name}[{i}]")]
    return []


def null_nan(data: Any, where: str) -> list[str]:
    """Imported numbers are finite or NULL: each NaN becomes None in place and its field is returned (the
    caller names them in a note); an Infinity is refused with one line naming the field."""
    found = non_finite(data)
    inf = [(f, v) for f, v in found if math.isinf(v)]
    if inf:
        raise ImportInputError(f"{where}: field {inf[0][0]} is {inf[0][1]}, not a finite number")

    def clear(value: Any) -> Any:
        if isinstance(value, float) and math.isnan(value):
            return None
        if isinstance(value, dict):
            return {k: clear(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clear(v) for v in value]
        return value

    if found:
        cleared = clear(data)
        data.clear()
        data.update(cleared)
    return [f for f, _ in found]


def refuse_same_bytes(files: list[tuple[str, str]]) -> None:
    """(path, SHA-256) of each source file given: the same bytes twice (one path twice, or a copy) would
    import one measurement as two (``--force`` skips this check)."""
    first: dict[str, str] = {}
    for path, digest in files:
        if digest in first:
            raise ImportInputError(
                f"{path} has the same bytes as {first[digest]} (sha256 {digest[:12]}...): "
                "importing one file twice counts one measurement twice (--force imports it "
                "anyway)"
            )
        first[digest] = path


def parse_time(value: Any) -> datetime | None:
    """The source's stamps: ISO 8601 ``...Z`` (captured) or ``YYYYmmdd-HHMMSS`` UTC (a point's date)."""
    if not isinstance(value, str) or not value:
        return None
    for fmt in ("%Y-%m-%dT%H:%M:%SZ", "%Y%m%d-%H%M%S"):
        try:
            return datetime.strptime(value, fmt).replace(tzinfo=timezone.utc)
        except ValueError:
            pass
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(timezone.utc)
    except ValueError:
        return None


def num(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def integer(value: Any) -> int | None:
    x = num(value)
    return int(x) if x is not None else None


# source CSV column -> (telemetry source, metric, device, unit)
TELEMETRY_COLUMNS: dict[str, tuple[str, str, str | None, str]] = {
    "gpu_util_pct": ("neuron_monitor", "accel_util_pct", None, "pct"),
    "mem_used_mib": ("neuron_monitor", "device_mem_used_mib", None, "MiB"),
    "power_w": ("neuron_monitor", "power_w", None, "W"),
    "temp_c": ("neuron_monitor", "temp_c", None, "C"),
    "sclk_mhz": ("neuron_monitor", "sclk_mhz", None, "MHz"),
    "mclk_mhz": ("neuron_monitor", "mclk_mhz", None, "MHz"),
    "host_mem_used_mib": ("host", "host_mem_used_mib", None, "MiB"),
}
BLANK_NOTE = "blank in the source CSV: the sensor gave no value at this sample"
NAN_NOTE = "NaN in the source CSV: stored NULL (not a measurement)"
DROPPED = "telemetry CSV dropped"


def not_a_number_note(raw: str) -> str:
    return f"not a number in the source CSV ({raw[:40]!r}): stored NULL"


def _drop(tree: Tree, path: str, why: str) -> pa.Table:
    """No telemetry from ``path``: named in ``tree.dropped()`` (lane_runs' null_reasons, the import's output)."""
    tree.dropped()[path] = f"{DROPPED}: {why}"
    return pa.table({})


def telemetry_table(tree: Tree, path: str, ended_at: datetime | None) -> pa.Table:
    """The source's wide 1 Hz CSV (``t_s`` since the sampler started) as long telemetry rows.

    The source never wrote the sampler's start; ``ts`` is anchored so the last sample falls at ``ended_at``
    (the paired JSON's capture time). A blank cell is a NULL value with a note, never zero, as is a cell that
    is no number. A file that holds no telemetry (not CSV, no ``t_s`` column, no column we read, no capture
    time to anchor it) is dropped with a note naming it (:func:`_drop`); a ``t_s`` that is no finite number is
    refused.
    """
    if not tree.telemetry:  # superseded versions: their JSON records only (docs/guides/import.md)
        return pa.table({})
    if ended_at is None:
        return _drop(tree, path, "the paired JSON records no capture time to anchor its samples")
    try:
        reader = csv.DictReader(io.StringIO(tree.text(path)))
        samples = [r for r in reader if r.get("t_s") not in (None, "")]
    except csv.Error as exc:
        return _drop(tree, path, f"not CSV ({exc})")
    if not samples:
        return _drop(tree, path, "no sample with a t_s (seconds since the sampler started)")
    known = [n for n in (reader.fieldnames or []) if n in TELEMETRY_COLUMNS or n.startswith("util_nc")]
    if not known:
        return _drop(
            tree, path, f"none of its columns is one the import reads ({', '.join(TELEMETRY_COLUMNS)}, util_nc<N>)"
        )
    try:
        last = max(float(r["t_s"]) for r in samples)
    except ValueError as exc:
        raise ImportInputError(f"{tree.uri(path)}: t_s is not a number: {exc}") from None
    if not all(math.isfinite(float(r["t_s"])) for r in samples):
        raise ImportInputError(f"{tree.uri(path)}: column t_s holds a value that is not a finite number")
    start = ended_at - timedelta(seconds=last)
    cols: dict[str, list[Any]] = {k: [] for k in ("ts", "source", "metric", "device", "value", "unit", "note")}
    for r in samples:
        ts = start + timedelta(seconds=float(r["t_s"]))
        for name, raw in r.items():
            if name == "t_s" or name is None:
                continue
            spec = TELEMETRY_COLUMNS.get(name)
            if spec is None and name.startswith("util_nc"):
                spec = ("neuron_monitor", "accel_util_pct", "nc" + name[len("util_nc") :], "pct")
            if spec is None:
                continue
            value = num(raw) if raw not in (None, "") else None
            garbage = value is None and raw not in (None, "")
            if value is not None and math.isinf(value):
                raise ImportInputError(
                    f"{tree.uri(path)}: column {name} at t_s={r['t_s']} is {raw!r}, not a finite number"
                )
            nan = value is not None and math.isnan(value)
            value = None if nan else value
            cols["ts"].append(ts)
            cols["source"].append(spec[0])
            cols["metric"].append(spec[1])
            cols["device"].append(spec[2])
            cols["value"].append(value)
            cols["unit"].append(spec[3])
            cols["note"].append(
                NAN_NOTE if nan else not_a_number_note(raw) if garbage else None if value is not None else BLANK_NOTE
            )
    return pa.table(cols)


def dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, default=str)
