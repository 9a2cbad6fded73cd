"""Import ``vllm bench serve --save-result`` files as reference points (``neuronpipe import vllm-bench``).

Why: the decision this pipeline serves is "this box against a GPU at the latency I need", and the GPU numbers
usually exist already as a vLLM result file from another machine. Each file becomes one point of run
``ref-<label>``, lane ``reference``: its own summary statistics in ``serving_aggregates`` (always, with vLLM's
definitions beside them), and — when the file kept per-request lists (``--save-detailed``) — ``sweep_points``
and ``requests`` rows, so the views derive the point like our own (intervals, goodput against the SLO). A list
that is missing or of the wrong length leaves the point aggregate-only with a note: values are never invented.
``reference_runs`` carries the label, instance, declared price and SLO of each point.

Everything is read and conformed before the first write: bad input gets one line and the store is untouched.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa

from analytics.importers.common import (
    ImportExistsError,
    ImportInputError,
    dumps,
    non_finite,
    parse_time,
    refuse_same_bytes,
)
from analytics.schema import SchemaMismatchError, conform
from analytics.store import ResultStore, validate_component
from pipeline import jsonio

SOURCE_NAME = "vllm-bench"
LANE = "reference"
BOX_ROLE = "reference"
CLIENT = "vllm bench serve"
PRICE_DECLARED = "declared at import"
# Present in every vLLM result file from benchmarks/benchmark_serving.py (0.6) to `vllm bench serve` (0.33)
REQUIRED_KEYS = (
    "model_id",
    "num_prompts",
    "request_rate",
    "duration",
    "completed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "output_throughput",
)
DETAIL_LISTS = ("start_times", "ttfts", "itls", "latencies", "input_lens", "output_lens", "errors")
METRICS = ("ttft", "tpot", "itl", "e2el")
COLUMN_STATS = ("mean", "median", "std", "p50", "p90", "p99")
STAT_KEY = re.compile(r"^(mean|median|std|p\d+(?:\.\d+)?)_([a-z0-9_]+)_ms$")
# vLLM's own definitions (vllm/benchmarks/serve.py, calculate_metrics), stored beside its numbers
DEFINITIONS = {
    "client": "vllm bench serve (vllm/benchmarks/serve.py; benchmarks/benchmark_serving.py before 0.10)",
    "output_tokens": "the server's usage.completion_tokens when reported, else the generated text re-tokenized "
    "by the client's tokenizer; successful requests only",
    "input_tokens": "the dataset's prompt length by the client's tokenizer; successful requests only",
    "ttft": "first stream chunk with choices - request start (time.perf_counter before the POST)",
    "e2el": "last stream chunk with choices - request start (the 'latencies' list)",
    "tpot": "(E2EL - TTFT) / (output_tokens - 1), requests with output_tokens > 1; excludes the first token",
    "itl": "gaps between consecutive stream chunks (per chunk, not per token), pooled over successful requests",
    "percentiles": "numpy.percentile (linear interpolation) over successful requests; std is numpy's population "
    "std; an empty list gives 0.0 (np.mean(x or 0))",
    "duration": "benchmark wall time: first dispatch to the end of the last request (client perf_counter)",
    "throughput": "completed requests / duration; output_throughput = output tokens / duration",
    "failed": "any request whose stream raised or never delivered a chunk (errors[i] non-empty)",
    "client_queue_time": "request start - scheduled arrival (waiting for a --max-concurrency slot)",
}
DATE_NOTE = "vLLM writes 'date' in the client's local time without a zone; read as UTC"
LATENCY_LISTS = ("ttfts", "latencies", "itls")  # seconds a request took: never below zero
VERSION_KEYS = ("vllm_version", "version")  # what a user may have added with --metadata KEY=VALUE


def client_of(d: dict[str, Any]) -> str:
    """'vllm bench serve', with the version when the file states one (vLLM itself does not write it)."""
    version = next((d[k] for k in VERSION_KEYS if isinstance(d.get(k), str) and d[k].strip()), None)
    return f"{CLIENT} {version.strip()}" if version else CLIENT


@dataclass
class ResultFile:
    """One vLLM result object (a file, or one line of an --append-result file) and where it came from."""

    data: dict[str, Any]
    path: str
    source_uri: str


@dataclass
class PlannedPoint:
    point_id: str
    source: ResultFile
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    per_request: bool = False
    notes: list[str] = field(default_factory=list)
    measured_at: datetime | None = None
    duration: float | None = None


@dataclass
class ReferenceSummary:
    run_id: str
    attempt: str
    points: list[PlannedPoint]


def slugify(label: str) -> str:
    return re.sub(r"[^a-z0-9_-]+", "-", label.strip().lower()).strip("-")  # a run id (pipeline.names)


def read_results(path: str) -> list[ResultFile]:
    """The result objects in ``path``: one JSON object, or one per line (vLLM's --append-result)."""
    try:  # a regular file only (a pipe or a device would block or grow without end), within the cap
        raw = jsonio.read_bytes(path, 512 * 1024 * 1024, why="a vllm bench serve result file")
    except jsonio.JsonInputError as exc:
        raise ImportInputError(str(exc)) from None
    digest = hashlib.sha256(raw).hexdigest()
    uri = f"{os.path.abspath(path)} sha256:{digest}"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ImportInputError(f"{path} is not UTF-8 text (a vLLM result file is JSON)") from None
    try:
        objs = [jsonio.loads(text, allow_nan=True)]  # vLLM writes NaN for an empty statistic
        uris = [uri]
    except ValueError as exc:
        lines = [(i, ln) for i, ln in enumerate(text.splitlines(), 1) if ln.strip()]
        try:  # one JSON document per line when its first line is one; else the document's own error
            objs = [jsonio.loads(lines[0][1], allow_nan=True)] if len(lines) > 1 else None
        except ValueError:
            objs = None
        if not objs:
            raise ImportInputError(f"{path}: {exc}") from None
        objs = []
        for i, ln in lines:  # one result per line (--append-result): a bad line is named by its own number
            try:
                objs.append(jsonio.loads(ln, allow_nan=True))
            except ValueError as line_exc:
                raise ImportInputError(f"{path}:{i}: {str(line_exc).replace('(line 1, column', '(column')}") from None
        uris = [f"{uri} line:{i}" for i, _ in lines]
    out = []
    for obj, u in zip(objs, uris):
        if not isinstance(obj, dict):
            raise ImportInputError(f"{path}: expected a JSON object (vLLM's result), got {type(obj).__name__}")
        missing = [k for k in REQUIRED_KEYS if k not in obj]
        if missing:
            raise ImportInputError(f"{path} is not a vllm bench serve result: missing keys {', '.join(missing)}")
        out.append(ResultFile(obj, path, u))
    return out


def _number(d: dict[str, Any], key: str, path: str, integer: bool = False, minimum: float = 0.0) -> Any:
    """A top-level figure: absent/null -> None; NaN -> None (vLLM's empty statistic: the point's note names the
    field, :func:`nan_note`); else checked."""
    v = d.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ImportInputError(f"{path}: {key} is {v!r}, not a number")
    if isinstance(v, float) and math.isnan(v):
        return None
    if math.isinf(v) or v < minimum:
        raise ImportInputError(f"{path}: {key} = {v!r} is out of range")
    if integer:
        if float(v) != int(v):
            raise ImportInputError(f"{path}: {key} = {v!r} is not a whole number")
        return int(v)
    return float(v)


def measured_at(d: dict[str, Any]) -> tuple[datetime | None, str | None]:
    """The file's ``date`` and its note: a date that cannot be read is no measurement time, stored NULL with a
    note naming the field (as a NaN is); absent, (None, None)."""
    if "date" not in d or d["date"] is None:
        return None, None
    at = parse_time(d["date"])
    if at is None:
        return None, f"date: {json.dumps(d['date'])} is not a date vLLM writes (YYYYmmdd-HHMMSS), stored NULL"
    return at, DATE_NOTE


def refuse_impossible(d: dict[str, Any], path: str) -> None:
    """Counts no benchmark can produce, refused naming the fields: requests completed in no time, more completed
    (or completed and failed) than prompts sent. Negative figures are :func:`_number`'s and :func:`_floats`'."""
    duration, completed = _number(d, "duration", path), _number(d, "completed", path, integer=True)
    prompts, failed = _number(d, "num_prompts", path, integer=True), _number(d, "failed", path, integer=True)
    if duration == 0 and completed:
        raise ImportInputError(
            f"{path}: duration = 0 s but completed = {completed}: requests cannot complete in no time"
        )
    if prompts is not None and completed is not None and completed > prompts:
        raise ImportInputError(f"{path}: completed = {completed} is more than num_prompts = {prompts}")
    if prompts is not None and completed is not None and failed is not None and completed + failed > prompts:
        raise ImportInputError(
            f"{path}: completed + failed = {completed} + {failed} is more than num_prompts = {prompts}"
        )


def nan_note(d: dict[str, Any], path: str) -> str | None:
    """A NaN statistic is stored NULL and named in the point's note; Infinity (anywhere but ``request_rate``,
    vLLM's 'all at once') is refused, naming the field: no non-finite number is stored as a number."""
    bad = [(f, v) for f, v in non_finite(d) if math.isinf(v) and f != "request_rate"]
    if bad:
        raise ImportInputError(f"{path}: field {bad[0][0]} is {bad[0][1]}, not a finite number")
    nan = sorted(k for k, v in d.items() if isinstance(v, float) and math.isnan(v))
    return f"{', '.join(nan)}: NaN in the file (vLLM's empty statistic), stored NULL" if nan else None


def _rate(d: dict[str, Any], path: str) -> float | None:
    """vLLM writes "inf" for 'send everything at once' (our NULL); a finite rate is requests/s."""
    v = d.get("request_rate")
    if isinstance(v, str):
        try:
            v = float(v)
        except ValueError:
            v = None if v == "inf" else v
    if v is None or (isinstance(v, float) and math.isinf(v) and v > 0):
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
        raise ImportInputError(f'{path}: request_rate is {v!r}, not a positive number or "inf"')
    return float(v)


def _point_id(d: dict[str, Any], rate: float | None, taken: set[str]) -> str:
    conc = d.get("max_concurrency")
    base = (f"c{int(conc)}" if isinstance(conc, int) and not isinstance(conc, bool) else "uncapped") + (
        "-rinf" if rate is None else f"-r{rate:g}"
    )
    pid, n = base, 1
    while pid in taken:
        n += 1
        pid = f"{base}-{n}"
    taken.add(pid)
    return pid


def _endpoint(backend: Any) -> str | None:
    return (
        {"openai": "/v1/completions", "vllm": "/v1/completions", "openai-chat": "/v1/chat/completions"}.get(backend)
        if isinstance(backend, str)
        else None
    )


def aggregate_row(
    f: ResultFile, point_id: str, label: str, mode: str, rate: float | None, note: str | None
) -> dict[str, Any]:
    d, path = f.data, f.path
    row: dict[str, Any] = {
        "point_id": point_id,
        "model": d.get("model_id"),
        "server_config": label,
        "mode": mode,
        "client": client_of(d),
        "input_len": None,
        "output_len": None,  # vLLM does not write the dataset's requested lengths
        "max_concurrency": _number(d, "max_concurrency", path, integer=True, minimum=1),
        "num_prompts": _number(d, "num_prompts", path, integer=True),
        "completed": _number(d, "completed", path, integer=True),
        "failed": _number(d, "failed", path, integer=True),
        "duration": _number(d, "duration", path),
        "total_input_tokens": _number(d, "total_input_tokens", path, integer=True),
        "total_output_tokens": _number(d, "total_output_tokens", path, integer=True),
        "request_throughput": _number(d, "request_throughput", path),
        "output_throughput": _number(d, "output_throughput", path),
        "total_token_throughput": _number(d, "total_token_throughput", path),
        "max_output_tokens_per_s": _number(d, "max_output_tokens_per_s", path),
        "max_concurrent_requests": _number(d, "max_concurrent_requests", path, integer=True),
        "measured_at": measured_at(d)[0],
        "definitions_json": dumps(DEFINITIONS),
        "source_uri": f.source_uri,
        "note": note,
    }
    extra: dict[str, Any] = {}
    for key, value in d.items():
        m = STAT_KEY.match(key)
        if not m:
            continue
        stat, metric = m.groups()
        if metric in METRICS and stat in COLUMN_STATS:
            row[key] = _number(d, key, path)
        else:
            extra[key] = None if isinstance(value, float) and math.isnan(value) else value  # nan_note names it
    for key in ("request_goodput", "request_goodput:"):  # older files wrote the key with a colon
        if d.get(key) is not None:
            extra[key.rstrip(":")] = None if isinstance(d[key], float) and math.isnan(d[key]) else d[key]
    for key in ("burstiness", "ramp_up_strategy", "ramp_up_start_rps", "ramp_up_end_rps", "rtfx"):
        if d.get(key) is not None:
            extra[key] = d[key]
    row["stats_json"] = dumps(extra) if extra else None
    return row


def _detail_problem(d: dict[str, Any]) -> str | None:
    """Why the per-request lists cannot be used (None: they can)."""
    missing = [k for k in DETAIL_LISTS if not isinstance(d.get(k), list)]
    if all(k in missing for k in DETAIL_LISTS if k != "latencies"):  # vLLM >= 0.10 always writes latencies
        return "the file has no per-request lists (saved without --save-detailed): aggregate only, no interval"
    if missing:
        return f"per-request lists {', '.join(missing)} missing: aggregate only, no interval"
    lengths = {k: len(d[k]) for k in DETAIL_LISTS}
    n = lengths["start_times"]
    if n == 0 or any(v != n for v in lengths.values()):
        return (
            "per-request lists of different lengths ("
            + ", ".join(f"{k} {v}" for k, v in lengths.items())
            + "): aggregate only, no interval"
        )
    completed, failed = d.get("completed"), d.get("failed")
    if isinstance(failed, int) and isinstance(completed, int) and completed + failed != n:
        return f"{n} per-request entries but completed + failed = {completed + failed}: aggregate only"
    ok = sum(1 for e in d["errors"] if not e)
    if isinstance(completed, int) and ok != completed:
        return f"{ok} entries without an error but completed = {completed}: aggregate only"
    return None


def _floats(values: Any, key: str, i: int, path: str) -> list[float]:
    """Entry ``i`` of a per-request list as finite numbers; a latency (:data:`LATENCY_LISTS`) is never below 0."""
    vals = values if isinstance(values, list) else [values]
    out = []
    for v in vals:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ImportInputError(f"{path}: {key}[{i}] holds {v!r}, not a finite number")
        if key in LATENCY_LISTS and v < 0:
            raise ImportInputError(f"{path}: {key}[{i}] holds {v!r}: a latency below 0 s is impossible")
        out.append(float(v))
    return out


def request_rows(f: ResultFile, point_id: str, label: str) -> list[dict[str, Any]]:
    """One requests row per list entry, failed ones included; vLLM's 0.0 'not measured' values are NULL."""
    d, path = f.data, f.path
    queue = d.get("queue_times")
    queue = queue if isinstance(queue, list) and len(queue) == len(d["start_times"]) else None
    endpoint = _endpoint(d.get("backend"))
    rows = []
    for i in range(len(d["start_times"])):
        error = d["errors"][i]
        if error is not None and not isinstance(error, str):
            raise ImportInputError(f"{path}: errors[{i}] is {error!r}, not text")
        success = not error

        def unmeasured(v: Any) -> Any:  # a failed request's null is vLLM's 0.0: not measured
            return 0.0 if v is None and not success else v  # noqa: B023 - called within this iteration

        (start,) = _floats(d["start_times"][i], "start_times", i, path)
        (ttft,) = _floats(unmeasured(d["ttfts"][i]), "ttfts", i, path)
        (latency,) = _floats(unmeasured(d["latencies"][i]), "latencies", i, path)
        itls = _floats(d["itls"][i] if d["itls"][i] is not None or success else [], "itls", i, path)
        out_len, in_len = d["output_lens"][i], d["input_lens"][i]
        for key, v in (("output_lens", out_len), ("input_lens", in_len)):
            if (v is not None or success) and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise ImportInputError(f"{path}: {key}[{i}] is {v!r}, not a token count")
        # chunk arrivals: TTFT, then each ITL gap added (a failed request keeps what arrived before it failed)
        chunks: list[float] = []
        if success or ttft > 0:
            t = ttft
            chunks = [t]
            for gap in itls:
                t += gap
                chunks.append(t)
        q = None
        if queue is not None:
            (q,) = _floats(queue[i], "queue_times", i, path)
        t_sent = int(round(start * 1e9))
        kind = error.split(":", 1)[0].strip() if error and ":" in error else None
        rows.append(
            {
                "point_id": point_id,
                "request_id": f"{point_id}-{i}",
                "request_index": i,
                "model": d.get("model_id"),
                "server_config": label,
                "endpoint": endpoint,
                "warmup": False,
                "t_scheduled_ns": t_sent - int(round(q * 1e9)) if q is not None else None,
                "t_sent_ns": t_sent,
                "t_done_ns": t_sent + int(round(latency * 1e9)) if success else None,
                "client_queue_s": q,
                "ttft_s": ttft if chunks else None,
                "e2el_s": latency if success else None,
                "chunk_times_s": chunks,
                "chunk_tokens": [1] * len(chunks),
                "chunk_tokens_source": "assumed_one",
                "prompt_tokens": in_len,
                "prompt_tokens_source": "built",
                "output_tokens": out_len if success else None,
                "tokens_source": "vllm_output_lens",
                "input_len": None,
                "output_len": None,
                "http_status": None,
                "success": success,
                "error_type": kind if kind and re.fullmatch(r"[\w.]+", kind) else None,
                "error": error or None,
            }
        )
    return rows


def plan_point(f: ResultFile, point_id: str, label: str, slo_json: str, rate: float | None) -> PlannedPoint:
    """``rate``: the file's request rate as :func:`_rate` reads it (None: closed loop, --request-rate inf)."""
    d, path = f.data, f.path
    mode = "closed" if rate is None else "open"
    refuse_impossible(d, path)
    at, date_note = measured_at(d)
    p = PlannedPoint(point_id, f, measured_at=at, duration=_number(d, "duration", path))
    if date_note:
        p.notes.append(date_note)
    if note := nan_note(d, path):
        p.notes.append(note)
    if d.get("ramp_up_strategy"):
        p.notes.append(f"request rate ramped ({d['ramp_up_strategy']}): request_rate is the file's, not constant")
    problem = _detail_problem(d)
    if problem is None:
        p.rows["requests"] = request_rows(f, point_id, label)
        starts = [r["t_sent_ns"] for r in p.rows["requests"]]
        p.rows["sweep_points"] = [
            {
                "point_id": point_id,
                "model": d.get("model_id"),
                "server_config": label,
                "server_kind": d.get("backend") if isinstance(d.get("backend"), str) else None,
                "endpoint": _endpoint(d.get("backend")),
                "mode": mode,
                "tokenizer": d.get("tokenizer_id") if isinstance(d.get("tokenizer_id"), str) else None,
                "max_concurrency": _number(d, "max_concurrency", path, integer=True, minimum=1),
                "request_rate": rate,
                "burstiness": _number(d, "burstiness", path),
                "num_prompts": _number(d, "num_prompts", path, integer=True),
                "t_start_ns": min(starts),
                "slo_json": slo_json,
                "note": f"imported from vllm bench serve ({f.source_uri}); per-request lists as requests rows",
            }
        ]
        p.per_request = True
    else:
        p.notes.append(problem)
    p.rows["serving_aggregates"] = [aggregate_row(f, point_id, label, mode, rate, "; ".join(p.notes) or None)]
    return p


def import_vllm_bench(
    paths: list[str],
    store_opener: Any,
    label: str,
    instance_type: str,
    slo: dict[str, Any],
    usd_per_hour: float | None = None,
    run_id: str | None = None,
    force: bool = False,
) -> tuple[ResultStore, ReferenceSummary]:
    """Read and conform every file, then (and only then) open the store and commit one attempt."""
    if not label.strip():
        raise ImportInputError("--label is empty")
    if not instance_type.strip() or any(c.isspace() for c in instance_type):
        raise ImportInputError(f"--instance-type {instance_type!r}: give the instance's type, e.g. p5.48xlarge")
    if usd_per_hour is not None and not (math.isfinite(usd_per_hour) and usd_per_hour > 0):
        raise ImportInputError(f"--price-usd-per-h {usd_per_hour!r}: must be a positive number of USD per hour")
    run_id = run_id or f"ref-{slugify(label)}"
    if run_id == "ref-":
        raise ImportInputError(f"--label {label!r} has no letters or digits to name the run (give --run-id)")
    validate_component("run_id", run_id)
    per_path = [read_results(path) for path in paths]
    if not force:  # by the SHA-256 each source_uri records
        refuse_same_bytes(
            [(found[0].path, found[0].source_uri.split(" sha256:", 1)[1].split()[0]) for found in per_path]
        )
    files = [rf for found in per_path for rf in found]
    slo_json = dumps(slo)
    taken: set[str] = set()
    points = []
    for f in files:
        rate = _rate(f.data, f.path)
        points.append(plan_point(f, _point_id(f.data, rate, taken), label, slo_json, rate))
    for p in points:
        p.rows["reference_runs"] = [
            {
                "point_id": p.point_id,
                "label": label,
                "instance_type": instance_type,
                "usd_per_hour": usd_per_hour,
                "price_source": PRICE_DECLARED if usd_per_hour is not None else None,
                "slo_json": slo_json,
                "per_request": p.per_request,
                "source_uri": p.source.source_uri,
                "client": client_of(p.source.data),
                "note": "; ".join(p.notes) or None,
            }
        ]
    tables = _conform(points, lane_runs_row(points, label, instance_type, usd_per_hour, force))
    store = store_opener()
    if store.markers(run_id) and not force:
        raise ImportExistsError(
            f"run {run_id} (label {label!r}) is already in {store.root}: importing twice is "
            "refused (--force adds a new attempt that supersedes it; --run-id names another run)"
        )
    writer = store.begin_attempt(run_id, LANE)
    for table, data in sorted(tables.items()):
        writer.add_rows(table, data.drop_columns(["run_id", "lane", "attempt"]))
    writer.commit("succeeded")
    return store, ReferenceSummary(run_id, writer.attempt, points)


def lane_runs_row(
    points: list[PlannedPoint], label: str, instance_type: str, usd_per_hour: float | None, forced: bool
) -> dict[str, Any]:
    ends = [p.measured_at for p in points if p.measured_at]
    starts = [p.measured_at - timedelta(seconds=p.duration or 0) for p in points if p.measured_at]
    null_reasons = {
        "host": "the result file names no client host (stored as 'unrecorded')",
        "backend": "the result file names no accelerator (stored as 'unrecorded')",
        "instance_id": "not recorded in a vLLM result file",
        "wall_s": "the import's, not a lane's: the files' durations are in serving_aggregates",
    }
    now = datetime.now(timezone.utc)
    if not ends:
        null_reasons["started_at"] = "no file has a readable 'date': started_at/ended_at are the import's time"
    config = {
        "imported": {
            "source": SOURCE_NAME,
            "paths": sorted({os.path.abspath(p.source.path) for p in points}),
            "source_uris": [p.source.source_uri for p in points],
            "label": label,
        },
        "price_usd_per_hour": usd_per_hour,
        "null_reasons": null_reasons,
    }
    return {
        "status": "succeeded",
        "supersedes": True,
        "started_at": min(starts) if starts else now,
        "ended_at": max(ends) if ends else now,
        "wall_s": None,
        "backend": "unrecorded",
        "host": "unrecorded",
        "box_role": BOX_ROLE,
        "instance_type": instance_type,
        "instance_id": None,
        "profile": None,
        "forced": forced,
        "config_json": dumps(config),
        "harness_sha": None,
        "telemetry_samples": 0,
        "log_uri": None,
    }


def _conform(points: list[PlannedPoint], lane_row: dict[str, Any]) -> dict[str, pa.Table]:
    keys = {"run_id": "-", "lane": LANE, "attempt": "-"}
    merged: dict[str, list[dict[str, Any]]] = {"lane_runs": [lane_row]}
    for p in points:
        for table, rows in p.rows.items():
            merged.setdefault(table, []).extend(rows)
    try:
        return {table: conform(table, rows, defaults=keys) for table, rows in merged.items() if rows}
    except SchemaMismatchError as exc:
        raise ImportInputError(f"{', '.join(sorted({p.source.path for p in points}))}: {exc}") from None
