"""Trace replay input: request arrival times and lengths from Mooncake, BurstGPT and our own JSONL traces.

* Mooncake JSONL: ``{"timestamp": <ms>, "input_length": n, "output_length": n, "hash_ids": [int, ...]}``
  (``hash_ids``: the prompt's block hashes; requests sharing leading ids share a prefix).
* Our JSONL: the same field names, ``timestamp`` in ``timestamp_unit`` ("ms" as Mooncake, or "s"),
  optional ``prefix_group`` (int). A ``.jsonl`` file is labelled "jsonl" when ``timestamp_unit`` is given
  or any line has ``prefix_group``, else "mooncake"; both read the same way.
* BurstGPT CSV: a header with ``Timestamp`` (seconds), ``Request tokens``, ``Response tokens``; other
  columns (``Model``, ``Log Type``, ...) are ignored. Rows with 0 response tokens are BurstGPT's failed
  requests: they are skipped and counted in :attr:`Trace.skipped`.

Times are re-based on the first request (its ``t_s`` is 0.0) and every gap is multiplied by ``time_scale``; a
request more than :data:`~pipeline.lane_configs.bounds.REPLAY_S` (a day) after the first, after scaling, is refused
(a replay that long is a typo or a unit mistake). The file is a regular file of at most :data:`TRACE_MAX_BYTES`,
read as the request reader reads (:func:`pipeline.jsonio.read_bytes`: never a pipe or a device).
Every bad input raises one :class:`TraceError` of one line, ``<path>:<line>: <what>``.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pipeline import jsonio
from pipeline.lane_configs.bounds import REPLAY_S, TRACE_MAX_BYTES, shown

TraceFormat = Literal["mooncake", "burstgpt", "jsonl"]
TRACE_FORMATS: tuple[str, ...] = ("mooncake", "burstgpt", "jsonl")
TIMESTAMP_UNITS: dict[str, float] = {"ms": 1e-3, "s": 1.0}  # seconds per unit
BURSTGPT_COLUMNS = ("Timestamp", "Request tokens", "Response tokens")
JSONL_FIELDS = ("timestamp", "input_length", "output_length")


class TraceError(ValueError):
    """A trace file that cannot be replayed; the message is one line naming the file and line."""


@dataclass(frozen=True)
class TraceRequest:
    t_s: float  # seconds after the trace's first request (after time scaling); the first is 0.0
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...] | None = None  # Mooncake's prompt-block hashes (shared prefixes), when present
    prefix_group: int | None = None  # an explicit prefix group id, when present


@dataclass(frozen=True)
class Trace:
    path: str
    sha256: str  # of the whole file's bytes (also when ``limit`` read only its head)
    format: str  # "mooncake" | "burstgpt" | "jsonl"
    requests: tuple[TraceRequest, ...]
    skipped: int = 0  # BurstGPT rows with 0 response tokens (failed requests), not replayed
    time_scale: float = 1.0

    def duration_s(self) -> float:
        """Seconds from the first request to the last (after time scaling)."""
        return self.requests[-1].t_s - self.requests[0].t_s

    def rate(self) -> float:
        """Requests per second over the trace: one over the mean gap, ``(n - 1) / duration_s``."""
        duration = self.duration_s()
        if len(self.requests) < 2 or duration <= 0:
            raise TraceError(f"{self.path}: rate undefined: {len(self.requests)} requests spanning {duration} s")
        return (len(self.requests) - 1) / duration


@dataclass(frozen=True)
class _Row:
    line: int
    timestamp: float  # in the file's unit
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...] | None = None
    prefix_group: int | None = None


def read_trace(
    path: str | Path,
    *,
    time_scale: float = 1.0,
    timestamp_unit: str | None = None,
    max_model_len: int | None = None,
    limit: int | None = None,
) -> Trace:
    """Reads a trace (see module doc). ``time_scale`` multiplies every gap (2.0: half the rate);
    ``timestamp_unit`` ("ms" | "s") is for JSONL; ``max_model_len`` bounds input + output per request;
    ``limit`` keeps the first N requests (the rest of the file is not parsed)."""
    name = str(path)
    path = Path(path)
    if not isinstance(time_scale, (int, float)) or not math.isfinite(time_scale) or time_scale <= 0:
        raise TraceError(f"{name}: time_scale must be a finite number > 0, got {time_scale!r}")
    if timestamp_unit is not None and timestamp_unit not in TIMESTAMP_UNITS:
        raise TraceError(f"{name}: unknown timestamp_unit {timestamp_unit!r}; valid: {', '.join(TIMESTAMP_UNITS)}")
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise TraceError(f"{name}: limit must be an integer >= 1, got {limit!r}")
    if max_model_len is not None and (not isinstance(max_model_len, int) or max_model_len < 2):
        raise TraceError(f"{name}: max_model_len must be an integer >= 2, got {max_model_len!r}")
    if not os.path.lexists(path):
        raise TraceError(f"{name}: no such file")
    try:  # a regular file only (a pipe or a device would block or never end), within the cap
        raw = jsonio.read_bytes(path, TRACE_MAX_BYTES, why="a trace file")
    except jsonio.JsonInputError as exc:
        raise TraceError(str(exc)) from None
    lines = _decode_lines(name, raw)
    fmt = _detect_format(name, path, lines, timestamp_unit)
    if fmt == "burstgpt":
        if timestamp_unit not in (None, "s"):
            raise TraceError(
                f"{name}: BurstGPT timestamps are in seconds; timestamp_unit={timestamp_unit!r} does not apply"
            )
        unit, rows = 1.0, _burstgpt_rows(name, lines)
    else:
        unit, rows = TIMESTAMP_UNITS[timestamp_unit or "ms"], _jsonl_rows(name, lines)
    kept: list[_Row] = []
    skipped = 0
    for row in rows:
        if row is None:
            skipped += 1
            continue
        if kept and row.timestamp < kept[-1].timestamp:
            raise TraceError(
                f"{name}:{row.line}: timestamp {row.timestamp:g} is before line {kept[-1].line}'s "
                f"{kept[-1].timestamp:g} (timestamps must not go backwards)"
            )
        if max_model_len is not None and row.input_length + row.output_length > max_model_len:
            raise TraceError(
                f"{name}:{row.line}: input_length + output_length = {row.input_length} + "
                f"{row.output_length} = {row.input_length + row.output_length} > max_model_len "
                f"{max_model_len}"
            )
        if kept:
            after = (row.timestamp - kept[0].timestamp) * unit * time_scale
            if not after <= REPLAY_S:  # also inf: timestamps at the ends of the float range
                raise TraceError(
                    f"{name}:{row.line}: timestamp {row.timestamp:g} is {after:g} s after the first "
                    f"request (after time_scale): a replay spans at most {shown(REPLAY_S)} s; scale it "
                    "(time_scale) or replay its head (limit)"
                )
        kept.append(row)
        if limit is not None and len(kept) == limit:
            break
    if not kept:
        why = f" ({skipped} rows with 0 response tokens skipped)" if skipped else ""
        raise TraceError(f"{name}: empty trace: no requests{why}")
    t0 = kept[0].timestamp
    requests = tuple(
        TraceRequest(
            (r.timestamp - t0) * unit * time_scale, r.input_length, r.output_length, r.hash_ids, r.prefix_group
        )
        for r in kept
    )
    return Trace(name, hashlib.sha256(raw).hexdigest(), fmt, requests, skipped, float(time_scale))


def _decode_lines(name: str, raw: bytes) -> list[str]:
    if not raw.strip():
        raise TraceError(f"{name}: empty trace: the file is empty")
    lines = []
    for no, line in enumerate(raw.split(b"\n"), start=1):
        try:
            lines.append(line.decode("utf-8").rstrip("\r"))
        except UnicodeDecodeError as exc:
            raise TraceError(f"{name}:{no}: not UTF-8 ({exc.reason} at byte {exc.start} of the line)") from exc
    if lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]
    return lines


def _detect_format(name: str, path: Path, lines: list[str], timestamp_unit: str | None) -> str:
    first = next((line for line in lines if line.strip()), "")
    suffix = path.suffix.lower()
    is_csv = suffix == ".csv" or (suffix != ".jsonl" and not first.lstrip().startswith("{") and "Timestamp" in first)
    if is_csv:
        header = next(csv.reader([first]))
        missing = [c for c in BURSTGPT_COLUMNS if c not in header]
        if missing:
            raise TraceError(
                f"{name}:1: not a BurstGPT header: missing column {', '.join(missing)} (found: {', '.join(header)})"
            )
        return "burstgpt"
    if suffix != ".jsonl" and not first.lstrip().startswith("{"):
        raise TraceError(
            f"{name}: cannot tell the trace format: expected .jsonl (one JSON object per line) or "
            f".csv (a BurstGPT header)"
        )
    if timestamp_unit is not None or any('"prefix_group"' in line for line in lines):
        return "jsonl"
    return "mooncake"


def _jsonl_rows(name: str, lines: list[str]) -> Iterator[_Row | None]:
    for no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TraceError(f"{name}:{no}: invalid JSON: {exc.msg} at column {exc.colno}") from exc
        where = f"{name}:{no}"
        if not isinstance(record, dict):
            raise TraceError(f"{where}: expected a JSON object, got {type(record).__name__}")
        missing = [f for f in JSONL_FIELDS if f not in record]
        if missing:
            raise TraceError(f"{where}: missing field {', '.join(missing)} (found: {', '.join(record) or 'nothing'})")
        hash_ids = record.get("hash_ids")
        if hash_ids is not None:
            if not isinstance(hash_ids, list) or not all(_is_int(h) for h in hash_ids):
                raise TraceError(f"{where}: hash_ids is {hash_ids!r:.60}, expected a list of integers")
            hash_ids = tuple(hash_ids)
        group = record.get("prefix_group")
        if group is not None and not _is_int(group):
            raise TraceError(f"{where}: prefix_group is {group!r:.60}, expected an integer")
        yield _Row(
            no,
            _timestamp(where, "timestamp", record["timestamp"]),
            _length(where, "input_length", record["input_length"]),
            _length(where, "output_length", record["output_length"]),
            hash_ids,
            group,
        )


def _burstgpt_rows(name: str, lines: list[str]) -> Iterator[_Row | None]:
    kept = [line for line in lines if line.strip()]
    numbers = [no for no, line in enumerate(lines, start=1) if line.strip()]  # file line of each CSV line
    reader = csv.DictReader(iter(kept), strict=True)
    _ = reader.fieldnames  # the header, read first: line_num then counts the lines before each record
    while True:
        start = reader.line_num  # the index in ``kept`` of the record's first line
        try:
            record = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            at = f"{name}:{numbers[min(start, len(numbers) - 1)]}"
            if kept[min(start, len(kept) - 1)].count('"') % 2:
                raise TraceError(
                    f"{at}: unterminated quote: the quoted field opened on this line never closes"
                ) from None
            raise TraceError(f"{at}: not CSV ({exc})") from None
        where = f"{name}:{numbers[reader.line_num - 1]}"
        missing = [c for c in BURSTGPT_COLUMNS if record.get(c) in (None, "")]
        if missing:
            raise TraceError(f"{where}: missing field {', '.join(missing)}")
        response = _length(where, "Response tokens", _csv_value(record["Response tokens"], int), allow_zero=True)
        if response == 0:
            yield None  # a failed request in BurstGPT
            continue
        yield _Row(
            numbers[reader.line_num - 1],
            _timestamp(where, "Timestamp", _csv_value(record["Timestamp"], float)),
            _length(where, "Request tokens", _csv_value(record["Request tokens"], int)),
            response,
        )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _length(where: str, field: str, value: Any, allow_zero: bool = False) -> int:
    if not _is_int(value):
        raise TraceError(f"{where}: {field} is {value!r:.40}, expected an integer")
    if value < 0 or (value == 0 and not allow_zero):
        raise TraceError(f"{where}: {field} is {value}, must be > 0")
    return value


def _timestamp(where: str, field: str, value: Any) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        raise TraceError(f"{where}: {field} is {value!r:.40}, expected a finite number")
    return float(value)


def _csv_value(text: str, kind: type) -> Any:
    """``text`` as ``kind``, or the text itself for the checks to report."""
    try:
        return kind(text.strip())
    except ValueError:
        return text
