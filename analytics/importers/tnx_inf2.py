"""torchneuronx ``inf2/results/…`` → our serving-side lanes.

serve/<model>_<config>/ → serve_sweep (base models), finetune_serve (the merged fine-tune), qwen3_attempt
(Qwen3) or smoke@inf2 (TinyLlama): boots into ``compiles``, grid + points into ``sweep_points``, each
point's summary into ``serving_aggregates``, its telemetry CSV into ``telemetry``; Qwen3's per-request
failures (the point logs' ``request N FAILED: …`` lines) into ``requests``. sustained/ → sustained
(iterations as ``sustained_windows``), quality/ → quality. The mapping is written out in docs/guides/import.md.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

from analytics.importers.common import LaneImport, integer, load_json, num, parse_time
from analytics.importers.source import Tree
from analytics.importers.tnx_served import served_json
from analytics.importers.tnx_trn1 import host_cpu, provenance

ROOT = "inf2/results/"
BACKEND = "neuron"
CLIENT_DEFINITIONS = {
    "client": "torchneuronx shared/serve/fallback_client.py (stdlib, streaming /v1/completions)",
    "output_tokens": "non-empty SSE text chunks received (max_tokens + ignore_eos pin the true count)",
    "input_tokens": "configured input length (truncate_prompt_tokens makes it exact), not measured",
    "ttft": "first non-empty text chunk - request start (before the POST)",
    "e2el": "end of the response body (stream closed or [DONE]) - request start",
    "tpot": "(E2EL - TTFT) / (chunks - 1), requests with more than one chunk",
    "itl": "gaps between consecutive non-empty chunks, pooled over requests",
    "percentiles": "linear interpolation between closest ranks; std is the population std",
    "duration": "first dispatch -> last completion of the point, client wall clock",
    "failed": "any exception in a request (HTTP status != 200, no tokens, transport errors)",
}
POINT_RE = re.compile(r"isl(\d+)_osl(\d+)_c(\d+)\.json$")
FAILED_RE = re.compile(r"^\s*request (\d+) FAILED: (.*)$")
_STATS = ("mean", "median", "std", "p50", "p90", "p99")


def lane_for(model_key: str) -> tuple[str, str]:
    """(our lane, variant) for the source's model key."""
    if model_key.startswith("smoke"):
        return "smoke@inf2", "base"
    if model_key.startswith("qwen3"):
        return "qwen3_attempt", "base"
    if "dolly" in model_key:
        return "finetune_serve", "finetune"
    return "serve_sweep", "base"


def boot_row(tree: Tree, path: str) -> dict[str, Any]:
    d = load_json(tree, path)
    before, after = num(d.get("cache_dir_size_mb_before")), num(d.get("cache_dir_size_mb_after"))
    # The source's "warm" flag speaks of its per-model compiled-artifacts dir; the shared compiler cache
    # tells what was compiled: it grew -> cold (new graphs), unchanged -> warm (every graph hit the cache).
    cache = (
        "cold"
        if (before is not None and after is not None and after > before)
        else ("warm" if before is not None and after is not None else "none")
    )
    return {
        "what": "serving_config",
        "model": d.get("model_id"),
        "config": d.get("config"),
        "cache": cache,
        # the shared compiler cache's size, not a count of its graphs: the state is inferred from a proxy
        "cache_scope": "shared_compiler_cache" if cache != "none" else None,
        "cache_basis": "inferred" if cache != "none" else None,
        "wall_s": num(d.get("boot_wall_s")),
        "cache_bytes_before": int(before * 2**20) if before is not None else None,
        "cache_bytes_after": int(after * 2**20) if after is not None else None,
        "new_artifacts": None,
        "succeeded": True,
        "backend": BACKEND,
        "ts": parse_time(d.get("captured")),
    }


def failure_row(tree: Tree, path: str) -> dict[str, Any]:
    d = load_json(tree, path)
    return {
        "what": "serving_config",
        "model": d.get("model_id"),
        "config": d.get("config"),
        "cache": "none",
        "succeeded": False,
        "backend": BACKEND,
        "ts": parse_time(d.get("captured")),
        "error": f"{d.get('status') or 'load_failure'}: {d.get('reason') or '(no reason recorded)'}",
    }


def aggregate_row(
    d: dict[str, Any], point_id: str, server_config: str | None, mode: str, source_uri: str
) -> dict[str, Any]:
    completed, duration = integer(d.get("completed")), num(d.get("duration"))
    row: dict[str, Any] = {
        "point_id": point_id,
        "model": d.get("model_id"),
        "server_config": server_config,
        "mode": mode,
        "client": d.get("backend"),
        "input_len": integer(d.get("input_len_configured")),
        "output_len": integer(d.get("output_len_configured")),
        "max_concurrency": integer(d.get("max_concurrency")),
        "num_prompts": integer(d.get("num_prompts")),
        "completed": completed,
        "failed": integer(d.get("failed")),
        "duration": duration,
        "total_input_tokens": integer(d.get("total_input_tokens")),
        "total_output_tokens": integer(d.get("total_output_tokens")),
        "request_throughput": (
            num(d.get("request_throughput"))
            if "request_throughput" in d
            else (completed / duration if completed is not None and duration else None)
        ),
        "output_throughput": num(d.get("output_throughput")),
        "total_token_throughput": num(d.get("total_token_throughput")),
        "max_output_tokens_per_s": num(d.get("max_output_tokens_per_s")),
        "max_concurrent_requests": integer(d.get("max_concurrent_requests")),
        "measured_at": parse_time(d.get("date")),
        "source_uri": source_uri,
        "definitions_json": _definitions_json(),
    }
    for m in ("ttft", "tpot", "itl", "e2el"):
        for s in _STATS:
            row[f"{s}_{m}_ms"] = num(d.get(f"{s}_{m}_ms"))
    return row


def _definitions_json() -> str:

    return json.dumps(CLIENT_DEFINITIONS, sort_keys=True)


def request_rows(
    tree: Tree, log_path: str, d: dict[str, Any], point_id: str, config: str | None
) -> list[dict[str, Any]]:
    """Every request of a point, when the log and the summary determine each one: the log names each
    failure verbatim; a point with at most one success carries that request's own values in its summary
    (n = 1: mean = median = the value). Otherwise [] (the point stays aggregate-only)."""
    n, completed = integer(d.get("num_prompts")), integer(d.get("completed")) or 0
    if n is None or completed > 1 or log_path not in set(tree.files(log_path.rsplit("/", 1)[0] + "/")):
        return []
    failed: dict[int, str] = {}
    for line in tree.text(log_path).splitlines():
        m = FAILED_RE.match(line)
        if m:
            failed[int(m.group(1))] = m.group(2).strip()
    if len(failed) + completed != n or any(i >= n for i in failed):
        return []
    base = {
        "point_id": point_id,
        "model": d.get("model_id"),
        "server_config": config,
        "endpoint": "/v1/completions",
        "warmup": False,
        "input_len": integer(d.get("input_len_configured")),
        "output_len": integer(d.get("output_len_configured")),
    }
    rows = []
    for i in range(n):
        row = {**base, "request_id": f"{point_id}#{i}", "request_index": i}
        if i in failed:
            msg = failed[i]
            kind = (
                "EmptyStreamError"
                if msg == "stream produced no tokens"
                else "HttpStatusError"
                if msg.startswith("HTTP ")
                else None
            )
            row.update(
                success=False,
                error_type=kind,
                error=msg,
                http_status=integer(msg[5:8]) if msg.startswith("HTTP ") else None,
            )
        else:
            ttft, e2el = num(d.get("median_ttft_ms")), num(d.get("median_e2el_ms"))
            ntok = integer(d.get("total_output_tokens"))
            row.update(
                success=True,
                http_status=200,
                ttft_s=ttft / 1000 if ttft is not None else None,
                e2el_s=e2el / 1000 if e2el is not None else None,
                output_tokens=ntok,
                tokens_source="chunk_count",
                prompt_tokens=integer(d.get("total_input_tokens")),
                prompt_tokens_source="built",
            )
        rows.append(row)
    return rows


def serve_dirs(tree: Tree) -> dict[str, list[str]]:
    """serve/<dir>/ → its files."""
    out: dict[str, list[str]] = {}
    for p in tree.files(ROOT + "serve/"):
        parts = p[len(ROOT + "serve/") :].split("/")
        if len(parts) == 2:
            out.setdefault(parts[0], []).append(p)
    return out


def serve_lanes(tree: Tree) -> list[LaneImport]:
    by_lane: dict[str, LaneImport] = {}
    for dirname, files in sorted(serve_dirs(tree).items()):
        key, _, config = dirname.rpartition("_")
        lane, _variant = lane_for(key or dirname)
        li = by_lane.setdefault(lane, LaneImport(lane, "inf2"))
        add_serve_dir(li, tree, dirname, files, config)
    return list(by_lane.values())


def add_serve_dir(
    li: LaneImport, tree: Tree, dirname: str, files: list[str], config: str, point_config: Any = None
) -> None:
    """One serve/<dir>/ of the source into ``li``: its boot or load failure, its points (aggregate rows, the
    Qwen3 failures' requests, telemetry), its round-trip hashes and generation probe. ``point_config(name)``
    names a point's server config (default ``config``)."""
    names = {p.rsplit("/", 1)[-1]: p for p in files}
    grid = tree.text(names["grid.json"]) if "grid.json" in names else None
    for name, row_of in (("boot.json", boot_row), ("load_failure.json", failure_row)):
        if name in names:
            row = row_of(tree, names[name])
            li.add("compiles", row)
            li.paths.append(names[name])
            li.ended_at = max(filter(None, [li.ended_at, row["ts"]]), default=None)
    for name, path in sorted(names.items()):
        m = POINT_RE.match(name)
        if not m:
            continue
        d = load_json(tree, path)
        point_id = f"{dirname}/{name[: -len('.json')]}"
        captured = parse_time(d.get("date"))
        duration = num(d.get("duration"))
        cfg = point_config(name) if point_config else config
        li.add(
            "sweep_points",
            {
                # the point's window, so its telemetry is counted per point: the source stamps the point's end
                "window_end": captured,
                "window_start": captured - timedelta(seconds=duration) if captured and duration is not None else None,
                "point_id": point_id,
                "model": d.get("model_id"),
                "server_config": cfg,
                "server_kind": "vllm",
                "backend": BACKEND,
                "endpoint": "/v1/completions",
                "mode": "closed",
                "prompt_source": "random",
                "input_len": integer(m.group(1)),
                "output_len": integer(m.group(2)),
                "max_concurrency": integer(m.group(3)),
                "num_prompts": integer(d.get("num_prompts")),
                "warmup_requests": 0,
                "grid_json": grid,
                "served_json": served_json(d.get("model_id"), cfg),
                "note": f"imported aggregate-only point ({d.get('backend')}); see serving_aggregates",
            },
        )
        li.add("serving_aggregates", aggregate_row(d, point_id, cfg, "closed", tree.uri(path)))
        reqs = request_rows(tree, path[: -len(".json")] + ".log", d, point_id, cfg)
        if reqs:
            li.add("requests", reqs)
        li.add_point_file(tree, files, path, captured)
    if "roundtrip_hashes.json" in names:
        d = load_json(tree, names["roundtrip_hashes.json"])
        for fname, sha in sorted((d.get("inf2_hashes") or {}).items()):
            li.add(
                "artifacts",
                {
                    "model": None,
                    "kind": "merged",  # model: from the merge (collect)
                    "stage": "after_copy",
                    "path": fname,
                    "sha256": sha,
                    "expected_sha256": None,
                    "roundtrip_verified": None,
                },
            )
        li.config["roundtrip"] = {
            k: d.get(k) for k in ("verified", "compared_files", "mismatches", "trn1_source", "inf2_side")
        }
        li.paths.append(names["roundtrip_hashes.json"])
    if "generation_failure.json" in names:
        g = load_json(tree, names["generation_failure.json"])
        li.add(
            "sweep_points",
            {
                "point_id": f"qwen3-probe/{dirname}",
                "model": _model_of(li),
                "server_config": config,
                "mode": "closed",
                "backend": BACKEND,
                "note": _probe_note(g),
            },
        )
        li.paths.append(names["generation_failure.json"])


def _model_of(li: LaneImport) -> str | None:
    for row in li.rows.get("compiles", []):
        if row.get("model"):
            return row["model"]
    return None


def _probe_note(g: dict[str, Any]) -> str:

    return json.dumps(
        {
            "outcome": "failed",
            "phase": "first_token",
            "error_kind": g.get("status"),
            "error": g.get("probe"),
            "note": g.get("note"),
        },
        sort_keys=True,
    )


def sustained(tree: Tree) -> LaneImport | None:
    files = tree.files(ROOT + "sustained/")
    iters = sorted(
        (p for p in files if re.search(r"/iter_\d+\.json$", p)), key=lambda p: int(re.search(r"iter_(\d+)", p).group(1))
    )
    if not iters and ROOT + "sustained/boot.json" not in files:
        return None
    li = LaneImport("sustained", "inf2")
    names = set(files)
    if ROOT + "sustained/boot.json" in names:
        row = boot_row(tree, ROOT + "sustained/boot.json")
        li.add("compiles", row)
        li.ended_at = row["ts"]
        li.paths.append(ROOT + "sustained/boot.json")
    if ROOT + "sustained/load_failure.json" in names:
        li.add("compiles", failure_row(tree, ROOT + "sustained/load_failure.json"))
    first: dict[str, Any] | None = None
    for k, path in enumerate(iters):
        d = load_json(tree, path)
        first = first or d
        it = path.rsplit("/", 1)[-1][: -len(".json")]
        when = parse_time(d.get("date"))
        li.add(
            "serving_aggregates", aggregate_row(d, f"sustained/{it}", "short", "sustained_iteration", tree.uri(path))
        )
        li.add(
            "sustained_windows",
            {
                "point_id": "sustained",
                "model": d.get("model_id"),
                "server_config": "short",
                "window": k,
                "window_s": num(d.get("duration")),
                "window_start": None,
                "output_tokens": integer(d.get("total_output_tokens")),
                "output_throughput": num(d.get("output_throughput")),
                "completed": integer(d.get("completed")),
                "failed": integer(d.get("failed")),
                "p99_ttft_ms": num(d.get("p99_ttft_ms")),
                "warmup": False,
            },
        )
        li.ended_at = max(filter(None, [li.ended_at, when]), default=None)
        li.paths.append(path)
    if first is not None:
        li.add(
            "sweep_points",
            {
                "point_id": "sustained",
                "model": first.get("model_id"),
                "server_config": "short",
                "server_kind": "vllm",
                "backend": BACKEND,
                "endpoint": "/v1/completions",
                "mode": "sustained",
                "input_len": integer(first.get("input_len_configured")),
                "output_len": integer(first.get("output_len_configured")),
                "max_concurrency": integer(first.get("max_concurrency")),
                "num_prompts": integer(first.get("num_prompts")),
                "retention_k": 3,
                "note": "imported: each sustained_windows row is one closed-loop iteration of the source "
                "(variable length), not a fixed window; no request rows",
            },
        )
    if ROOT + "sustained/sustained.json" in names:
        s = load_json(tree, ROOT + "sustained/sustained.json")
        li.config["source_summary"] = {k: v for k, v in s.items() if k != "per_iteration"}
        li.paths.append(ROOT + "sustained/sustained.json")
    return li


def quality(tree: Tree) -> LaneImport | None:
    files = set(tree.files(ROOT + "quality/"))
    evals = sorted(
        p for p in files if p.endswith(".json") and not p.endswith("_boot.json") and not p.endswith("load_failure.json")
    )
    if not evals:
        return None
    li = LaneImport("quality", "inf2")
    for path in evals:
        key = path.rsplit("/", 1)[-1][: -len(".json")]
        variant = "finetune" if "dolly" in key else "base"
        d = load_json(tree, path)
        sampling = d.get("sampling") or {}
        for r in d.get("results") or []:
            if not isinstance(r, dict):
                continue
            ntok = integer(r.get("n_tokens"))
            li.add(
                "quality",
                {
                    "model": "meta-llama/Llama-3.1-8B-Instruct" if "llama31" in key else d.get("model"),
                    "variant": variant,
                    "server_config": "short",
                    "backend": BACKEND,
                    "endpoint": "/v1/completions",
                    "prompt_id": str(r.get("idx")),
                    "prompt": r.get("prompt"),
                    "temperature": num(sampling.get("temperature")),
                    "seed": integer(sampling.get("seed")),
                    "max_tokens": integer(sampling.get("max_tokens")),
                    "text_1": r.get("text"),
                    "mean_logprob": num(r.get("mean_logprob")),
                    "logprob_note": None
                    if num(r.get("mean_logprob")) is not None
                    else "the source recorded no logprob (its eval degrades when the backend rejects logprobs)",
                    "output_tokens": ntok if ntok else None,
                    "error": r.get("error"),
                },
            )
        li.ended_at = max(filter(None, [li.ended_at, parse_time(d.get("captured"))]), default=None)
        li.paths.append(path)
        boot = path[: -len(".json")] + "_boot.json"
        if boot in files:
            li.add("compiles", boot_row(tree, boot))
            li.paths.append(boot)
    if ROOT + "quality/load_failure.json" in files:
        li.add("compiles", failure_row(tree, ROOT + "quality/load_failure.json"))
        li.paths.append(ROOT + "quality/load_failure.json")
    return li


def lanes(tree: Tree) -> list[LaneImport]:
    from analytics.importers.tnx_knee import knee

    found = [
        provenance(tree, ROOT, "inf2"),
        host_cpu(tree, ROOT, "inf2"),
        *serve_lanes(tree),
        sustained(tree),
        quality(tree),
        knee(tree, aggregate_row),
    ]
    return [li for li in found if li is not None]
