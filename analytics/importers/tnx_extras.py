"""torchneuronx ``inf2/results/extras/`` (its Phase 2) → our variants, limits and tenants.

* ``ctx_bisect/len_<N>.json`` (+ ``.boot.json``, ``.boot.server.tail.log``) → the ``limits`` lane: one
  ``limit_probes`` row per length (``max_model_len`` at ``max_num_seqs`` 8; healthy or the compiler crash, its
  verbatim ``NCC_*`` line from the server log) and its boot in ``compiles``; ``load_failure.json`` is a failed boot
  of an earlier attempt at the bisection (a ``compiles`` failure row).
* ``quant/fp8kv*`` → serve_sweep's variant ``fp8kv`` of the source's ``short`` config (``kv_cache_dtype`` fp8): its
  boot (``config_json`` says what it sets), its c8 point, its earlier failed boot.
* ``serve/mistral7b_short/`` → serve_sweep's Mistral-7B points and its cold compile, parsed like ``serve/``.
* ``multitenant/tenant<i>_c4.json`` → serve_sweep's variant ``tenant`` (TinyLlama, one NeuronCore each, loaded
  together): points ``tenant.t0`` and ``tenant.t1``; its failed dual boot.
* ``trn1/results/extras/ctx_<N>.json`` / ``ctx_<N>.failure.json`` (+ ``.log``, ``.telemetry.csv``) → the
  ``train_limits`` lane: one ``limit_probes`` row per sequence length (``train_seq_len`` at the run's micro-batch;
  the run that trained, or the compiler's verbatim ``[NCC_*]`` line from the log), its peak device memory from the
  telemetry CSV's ``mem_used_mib`` (neuron-monitor), and the run that trained as a training run (``train_steps``,
  ``train_runs``, ``telemetry``: read like ``train/<model>_lora.json``).

Not imported, with the reason (:data:`NOT_IMPORTED`): the cold-start timing (deploy to first token: no lane of
ours measures a deploy), speculative decoding (its metrics are a text extract of the server log, not a point). The
encoder models (CLIP, Whisper, SigLIP) are the encode lane's (``tnx_encoders``).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from datetime import timedelta
from typing import Any

from analytics.importers.common import LaneImport, load_json, num, parse_time, telemetry_table
from analytics.importers.source import Tree
from analytics.importers.tnx_inf2 import add_serve_dir, aggregate_row, boot_row, failure_row
from analytics.importers.tnx_served import served_json
from analytics.importers.tnx_trn1 import train_run

EXTRAS = "inf2/results/extras/"
LEN_RE = re.compile(r"ctx_bisect/len_(\d+)\.json$")
NCC_RE = re.compile(r"\[(NCC_[A-Z]+\d+)\][^\n]*")
TRN1_EXTRAS = "trn1/results/extras/"
CTX_RE = re.compile(r"extras/ctx_(\d+)(\.failure)?\.json$")
MICRO_RE = re.compile(r"batch\s*:\s*micro=(\d+)")  # its log's run banner: "batch : micro=1 grad_accum=8"
TRAIN_SEARCH = "torchneuronx-ctx-train"
PEAK_SOURCE = "neuron-monitor mem_used_mib: the highest 1 Hz sample of the source's telemetry CSV during the run"
NOT_IMPORTED = {
    "c3_cold_start.json": "deploy-to-first-token timing (cdk deploy, SSM, cache seed, boot): no lane of ours measures "
    "a deploy yet (the real-box issue's cold-start measurement)",
    "spec_decode/": "its metrics are a text extract of the server log and a status, not a measured point: nothing "
    "for sweep_points to hold",
}


def _config_json(name: str, base: str | None, sets: dict[str, Any]) -> str:
    return json.dumps({"name": name, "base": base, "fingerprint": None, **sets}, sort_keys=True)


def _limits(tree: Tree, files: list[str]) -> LaneImport | None:
    lens = sorted((p for p in files if LEN_RE.search(p)), key=lambda p: int(LEN_RE.search(p).group(1)))
    if not lens:
        return None
    li = LaneImport("limits", "inf2")
    li.config["search"] = {
        "source": "torchneuronx extras: max_model_len probed by hand at max_num_seqs 8",
        "search_id": "torchneuronx-ctx-bisect",
    }
    probes = []
    for path in lens:
        d = load_json(tree, path)
        value = int(LEN_RE.search(path).group(1))
        ok = d.get("status") == "healthy"
        boot = EXTRAS + "ctx_bisect/" + str(d.get("boot_json") or f"len_{value}.boot.json")
        tail = path[: -len(".json")] + ".boot.server.tail.log"
        error = kind = None
        if not ok:
            m = NCC_RE.search(tree.text(tail)) if tail in files else None
            error = m.group(0).strip() if m else str(d.get("status"))
            kind = "compile_error" if "NCC_" in str(d.get("status")) or m else "exited"
        captured = parse_time(d.get("captured"))
        probes.append((captured, value, ok, kind, error, int(d.get("max_num_seqs") or 0) or None))
        if boot in files:
            row = boot_row(tree, boot)
        else:
            row = {
                "what": "serving_config",
                "model": "meta-llama/Llama-3.1-8B-Instruct",
                "cache": "none",
                "succeeded": False,
                "backend": "neuron",
                "ts": captured,
                "error": f"{kind}: {error}",
            }
        row["config"] = f"short-max_model_len-{value}"
        row["config_json"] = _config_json(
            row["config"], "short", {"max_model_len": value, "max_num_seqs": probes[-1][5]}
        )
        li.add("compiles", row)
        li.paths += [p for p in (path, boot, tail) if p in files]
        li.ended_at = max(filter(None, [li.ended_at, captured]), default=None)
    # every row of the search (no bounds, precision or budget recorded: NULL)
    search = {
        "search_id": "torchneuronx-ctx-bisect",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "kind": "max_model_len",
        "at_field": "max_num_seqs",
        "at_value": probes[0][5],
        "backend": "neuron",
    }
    for i, (_captured, value, ok, kind, error, seqs) in enumerate(sorted(probes, key=lambda p: (p[0] is None, p[0]))):
        li.add(
            "limit_probes",
            {
                **search,
                "at_value": seqs,
                "probe": i + 1,
                "phase": "bisect",
                "value": value,
                "succeeded": ok,
                "error_kind": kind,
                "error": error,
                "config": f"short-max_model_len-{value}",
            },
        )
    li.add(
        "limit_probes",
        {
            **search,
            "phase": "outcome",
            "stop_reason": "probed by hand (the source's ctx_bisect): no budget or precision recorded",
        },
    )
    failure = EXTRAS + "ctx_bisect/load_failure.json"
    if failure in files:
        row = failure_row(tree, failure)
        row["config"] = "short-ctx-bisect"
        li.add("compiles", row)
        li.paths.append(failure)
    return li


def _csv_peak(tree: Tree, path: str, column: str) -> float | None:
    """The largest value of ``column`` in the source's telemetry CSV (blank cells skipped; None: no value)."""
    try:
        values = [num(r.get(column)) for r in csv.DictReader(io.StringIO(tree.text(path))) if r.get(column)]
    except csv.Error:  # telemetry_table drops the file with a note naming it
        return None
    return max((v for v in values if v is not None and math.isfinite(v)), default=None)


def _train_limits(tree: Tree, files: list[str]) -> LaneImport | None:
    found = sorted((int(m.group(1)), p, bool(m.group(2))) for p in files if (m := CTX_RE.search(p)))
    if not found:
        return None
    li = LaneImport("train_limits", "trn1")
    li.config["search"] = {
        "source": "torchneuronx extras: the training sequence length probed by hand (a LoRA SFT run per length)",
        "search_id": TRAIN_SEARCH,
    }
    probes = []
    for value, path, failed in found:
        d = load_json(tree, path)
        stem = path[: -len(".failure.json" if failed else ".json")]
        log, csv_path = stem + ".log", stem + ".telemetry.csv"
        text = tree.text(log) if log in files else ""
        captured = parse_time(d.get("captured"))
        kind = error = tokens = None
        if failed:
            m = NCC_RE.search(text) or NCC_RE.search("[" + str(d.get("reason")))  # its reason lost the "["
            error = m.group(0).strip() if m else str(d.get("reason") or d.get("status"))
            kind = "compile_error" if m else "exited"
            micro = MICRO_RE.search(text)
            batch = int(micro.group(1)) if micro else None
            if csv_path in files:
                li.add_table("telemetry", telemetry_table(tree, csv_path, captured))
                li.paths.append(csv_path)
            li.paths.append(path)
        else:
            train_run(tree, path, li)  # the run that trained: train_steps, train_runs, its telemetry
            batch = (d.get("config") or {}).get("micro_batch")
            tokens = li.rows["train_runs"][-1]["tokens_per_s"]  # ours, from its steps
        peak = _csv_peak(tree, csv_path, "mem_used_mib") if csv_path in files else None
        li.paths += [log] if log in files else []
        li.ended_at = max(filter(None, [li.ended_at, captured]), default=None)
        probes.append((captured, value, not failed, kind, error, batch, num(d.get("train_wall_s")), peak, tokens))
    batches = {p[5] for p in probes if p[5] is not None}
    search = {
        "search_id": TRAIN_SEARCH,
        "model": load_json(tree, found[0][1]).get("model") or "meta-llama/Llama-3.1-8B-Instruct",
        "kind": "train_seq_len",
        "at_field": "batch_size",
        "at_value": batches.pop() if len(batches) == 1 else None,
        "backend": "neuron",
    }
    for i, (_, value, ok, kind, error, batch, wall, peak, tokens) in enumerate(
        sorted(probes, key=lambda p: (p[0] is None, p[0]))
    ):
        li.add(
            "limit_probes",
            {
                **search,
                "at_value": batch,
                "probe": i + 1,
                "phase": "bisect",
                "value": value,
                "succeeded": ok,
                "error_kind": kind,
                "error": error,
                "wall_s": wall,
                "config": f"train-seq-{value}-bs{batch}",
                "tokens_per_s": tokens,
                "peak_mem_bytes": int(peak * 2**20) if peak is not None else None,
                "peak_mem_source": PEAK_SOURCE if peak is not None else None,
            },
        )
    li.add(
        "limit_probes",
        {
            **search,
            "phase": "outcome",
            "stop_reason": "probed by hand (the source's extras/ctx_<N>): no budget or precision recorded",
        },
    )
    return li


def _into_serve_sweep(li: LaneImport, tree: Tree, files: list[str]) -> None:
    quant = [p for p in files if p.startswith(EXTRAS + "quant/")]
    if EXTRAS + "quant/fp8kv.boot.json" in quant:
        row = boot_row(tree, EXTRAS + "quant/fp8kv.boot.json")
        row["config"] = "fp8kv"
        row["config_json"] = _config_json("fp8kv", "short", {"kv_cache_dtype": "fp8"})
        li.add("compiles", row)
        li.paths.append(EXTRAS + "quant/fp8kv.boot.json")
    if EXTRAS + "quant/load_failure.json" in quant:
        row = failure_row(tree, EXTRAS + "quant/load_failure.json")
        row["config"] = "fp8kv"
        li.add("compiles", row)
        li.paths.append(EXTRAS + "quant/load_failure.json")
    if EXTRAS + "quant/fp8kv_c8.json" in quant:
        _point(li, tree, quant, EXTRAS + "quant/fp8kv_c8.json", "quant/fp8kv_c8", "fp8kv")
    mistral = [p for p in files if p.startswith(EXTRAS + "serve/mistral7b_short/")]
    if mistral:
        add_serve_dir(li, tree, "extras/mistral7b_short", mistral, "short")
    tenants = [p for p in files if p.startswith(EXTRAS + "multitenant/")]
    for path in sorted(p for p in tenants if re.search(r"/tenant(\d+)_c\d+\.json$", p)):
        i = re.search(r"/tenant(\d+)_c\d+\.json$", path).group(1)
        _point(li, tree, tenants, path, f"multitenant/{path.rsplit('/', 1)[-1][:-5]}", f"tenant.t{i}")
    if EXTRAS + "multitenant/load_failure.json" in tenants:
        d = load_json(tree, EXTRAS + "multitenant/load_failure.json")
        li.add(
            "compiles",
            {
                "what": "serving_config",
                "model": "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
                "config": "tenant",
                "cache": "none",
                "succeeded": False,
                "backend": "neuron",
                "ts": parse_time(d.get("captured")),
                "error": f"{d.get('status')}: core0 healthy {d.get('core0_healthy')}, core1 healthy "
                f"{d.get('core1_healthy')}",
                "config_json": _config_json("tenant", "short", {"tenants": 2, "tensor_parallel_size": 1}),
            },
        )
        li.paths.append(EXTRAS + "multitenant/load_failure.json")


def _point(li: LaneImport, tree: Tree, files: list[str], path: str, point_id: str, config: str) -> None:
    d = load_json(tree, path)
    captured, duration = parse_time(d.get("date")), num(d.get("duration"))
    li.add(
        "sweep_points",
        {
            "window_end": captured,
            "window_start": captured - timedelta(seconds=duration) if captured and duration is not None else None,
            "point_id": point_id,
            "model": d.get("model_id"),
            "server_config": config,
            "server_kind": "vllm",
            "backend": "neuron",
            "endpoint": "/v1/completions",
            "mode": "closed",
            "prompt_source": "random",
            "input_len": d.get("input_len_configured"),
            "output_len": d.get("output_len_configured"),
            "max_concurrency": d.get("max_concurrency"),
            "num_prompts": d.get("num_prompts"),
            "warmup_requests": 0,
            # fp8kv: the source's short config with its KV cache in one byte; tenant.tN: one tenant's server
            "served_json": served_json(
                d.get("model_id"), "tenant" if config.startswith("tenant") else "short", 1 if config == "fp8kv" else 2
            ),
            "note": f"imported aggregate-only point ({d.get('backend')}, the source's Phase 2); see serving_aggregates",
        },
    )
    li.add("serving_aggregates", aggregate_row(d, point_id, config, "closed", tree.uri(path)))
    li.add_point_file(tree, set(files), path, captured)


def extras(tree: Tree, lanes: list[LaneImport]) -> list[LaneImport]:
    """``lanes`` with the Phase-2 extras added: the limits and train_limits lanes, and serve_sweep's variants,
    Mistral and tenants."""
    out = list(lanes)
    train = _train_limits(tree, tree.files(TRN1_EXTRAS))
    if train is not None:
        out.append(train)
    files = tree.files(EXTRAS)
    if not files:
        return out
    limits = _limits(tree, files)
    if limits is not None:
        out.append(limits)
    sweep = next((li for li in out if li.lane == "serve_sweep"), None)
    if sweep is None:
        sweep = LaneImport("serve_sweep", "inf2")
        out.append(sweep)
    _into_serve_sweep(sweep, tree, files)
    sweep.config["not_imported"] = NOT_IMPORTED
    return out
