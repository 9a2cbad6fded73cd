"""Synthetic committed results, for tests, demos and the scale benchmark.

Writes a run's lanes through the real store (``begin_attempt → add_rows →
commit``), shaped like what the lanes write: provenance, host bench, compiles
(cold and warm), SFT steps and run, artifacts with hashes, sweep points with
per-request rows and telemetry inside each point's window, a sustained closed
loop, quality, and one failed lane. Numbers are drawn from a seeded RNG: they
are plausible shapes, not measurements, and every row says ``synthetic``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import numpy as np
import pyarrow as pa

from analytics.store import ResultStore

T0 = datetime(2026, 7, 1, 12, 0, 0, tzinfo=timezone.utc)


@dataclass(frozen=True)
class SyntheticRun:
    run_id: str = "synthetic-run"
    model: str = "tiny-llama"
    server_configs: tuple[str, ...] = ("tp2-bs8",)
    concurrencies: tuple[int, ...] = (1, 2, 4, 8)
    requests_per_point: int = 40
    input_len: int = 64
    output_len: int = 16
    failure_rate: float = 0.01
    box_role: str = "inf2"  # "local" for a laptop run (cost NULL)
    instance_types: dict[str, str] = field(default_factory=lambda: {"trn1": "trn1.2xlarge", "inf2": "inf2.xlarge"})
    train_steps: int = 20
    sustained_windows: int = 8
    seed: int = 0
    ttft_factor: float = 1.0  # every TTFT times this (compare's tests: the same draws, a known shift)
    slowdown: float = 0.0  # every request's TTFT and inter-token gaps (1 + slowdown) times as long: a slower server
    repeats: int = 1  # every serving point measured this many times (sweep_points.repeat_index when > 1)
    lanes: tuple[str, ...] = (
        "provenance",
        "host_cpu",
        "precompile",
        "sft",
        "merge",
        "serve_sweep",
        "sustained",
        "quality",
        "finetune_serve",
        "qwen3_attempt",
    )
    # (variant, base) pairs among server_configs: the variant's boots record config_json naming its base
    # (report_server_configs; comparison.json's variants compares it with the base at the points both measured)
    variants: tuple[tuple[str, str], ...] = ()


def _box(spec: SyntheticRun, lane: str) -> tuple[str, str | None]:
    if spec.box_role == "local":
        return "local", None
    role = "trn1" if lane in ("precompile", "sft", "merge") else "inf2"
    return role, spec.instance_types.get(role)


def _lane_row(
    spec: SyntheticRun,
    lane: str,
    start: datetime,
    wall_s: float,
    status: str = "succeeded",
    error: tuple[str, str] | None = None,
) -> dict:
    role, itype = _box(spec, lane)
    return {
        "status": status,
        "supersedes": True,
        "started_at": start,
        "ended_at": start + timedelta(seconds=wall_s),
        "wall_s": wall_s,
        "backend": "cpu" if role == "local" else "neuron",
        "host": f"synthetic-{role}",
        "box_role": role,
        "instance_type": itype,
        "profile": "tiny",
        "forced": False,
        "harness_sha": "0" * 40,
        "error_type": error[0] if error else None,
        "error_message": error[1] if error else None,
    }


def _declared(spec: SyntheticRun, config: str) -> dict:
    """A server config's declaration on its boots: config_json (name, base) and a fingerprint, where it has a base
    in ``spec.variants`` or is one's base; nothing otherwise (as before variants were recorded)."""
    base = dict(spec.variants).get(config)
    if base is None and config not in dict(spec.variants).values():
        return {}
    fingerprint = f"synthetic-{config}"
    return {
        "config_fingerprint": fingerprint,
        "config_json": json.dumps({"name": config, "base": base, "fingerprint": fingerprint}, sort_keys=True),
    }


def _telemetry(start: datetime, seconds: float, n: int = 4) -> list[dict]:
    out = []
    for i in range(n):
        ts = start + timedelta(seconds=seconds * (i + 0.5) / n)
        out.append({"ts": ts, "source": "host", "metric": "host_cpu_util_pct", "value": 50.0 + i, "unit": "%"})
        out.append(
            {
                "ts": ts,
                "source": "host",
                "metric": "power_w",
                "value": None,
                "unit": "W",
                "note": "synthetic: power is not exposed on this platform",
            }
        )
    return out


def request_rows(
    rng: np.random.Generator,
    n: int,
    input_len: int,
    output_len: int,
    concurrency: int,
    failure_rate: float,
    point_id: str,
    start: datetime,
    t0_ns: int,
    time_scale: float = 1.0,
) -> tuple[pa.Table, float]:
    """n closed-loop requests at ``concurrency``: per-request arrays built vectorised (every time ``time_scale``
    times as long). Returns rows, span s."""
    ttft = rng.gamma(4.0, 0.01 * (1 + 0.3 * concurrency), n) * time_scale
    tpot = rng.gamma(8.0, 0.002 * (1 + 0.15 * concurrency), n) * time_scale
    gaps = tpot[:, None] * rng.gamma(8.0, 1 / 8.0, (n, output_len))
    gaps[:, 0] = 0.0
    chunk_rel = ttft[:, None] + np.cumsum(gaps, axis=1)
    e2el = chunk_rel[:, -1]
    stream = np.arange(n) % concurrency
    sent = np.zeros(n)
    for s in range(concurrency):  # back-to-back per stream
        idx = np.nonzero(stream == s)[0]
        sent[idx] = np.concatenate([[0.0], np.cumsum(e2el[idx])[:-1] + 0.001 * np.arange(1, len(idx))])
    success = rng.random(n) >= failure_rate
    t_sent_ns = t0_ns + (sent * 1e9).astype(np.int64)
    offsets = np.arange(0, (n + 1) * output_len, output_len, dtype=np.int32)
    chunks = pa.ListArray.from_arrays(pa.array(offsets), pa.array(chunk_rel.ravel()))
    tokens = pa.ListArray.from_arrays(pa.array(offsets), pa.array(np.ones(n * output_len, dtype=np.int32)))
    sent_at = pa.array(
        (np.datetime64(start.replace(tzinfo=None), "us") + (sent * 1e6).astype("timedelta64[us]")),
        type=pa.timestamp("us"),
    ).cast(pa.timestamp("us", tz="UTC"))
    table = pa.table(
        {
            "point_id": pa.array([point_id] * n),
            "request_id": pa.array([f"{point_id}-{i}" for i in range(n)]),
            "request_index": pa.array(np.arange(n, dtype=np.int32)),
            "warmup": pa.array(np.zeros(n, dtype=bool)),
            "t_scheduled_ns": pa.array(t_sent_ns),
            "t_sent_ns": pa.array(t_sent_ns),
            "t_done_ns": pa.array(t_sent_ns + (e2el * 1e9).astype(np.int64)),
            "client_queue_s": pa.array(np.zeros(n)),
            "ttft_s": pa.array(np.where(success, ttft, np.nan), mask=~success),
            "e2el_s": pa.array(np.where(success, e2el, np.nan), mask=~success),
            "chunk_times_s": chunks,
            "chunk_tokens": tokens,
            "prompt_tokens": pa.array(np.full(n, input_len, dtype=np.int32)),
            "output_tokens": pa.array(np.full(n, output_len, dtype=np.int32), mask=~success),
            "tokens_source": pa.array(["usage"] * n),
            "input_len": pa.array(np.full(n, input_len, dtype=np.int32)),
            "output_len": pa.array(np.full(n, output_len, dtype=np.int32)),
            "success": pa.array(success),
            "error_type": pa.array(np.where(success, None, "HttpStatusError").tolist(), type=pa.string()),
            "error": pa.array(np.where(success, None, "HTTP 503 (synthetic)").tolist(), type=pa.string()),
            "sent_at": sent_at,
        }
    )
    return table, float((t_sent_ns.max() - t0_ns) / 1e9 + e2el.max())


def scale_ttft(t: pa.Table, factor: float) -> pa.Table:
    """Request rows with every TTFT times ``factor``: each stream moves later (its chunks, E2EL and completion
    with it); send times and decode stay, so a known TTFT shift leaves throughput's decode unchanged."""
    ttft = t["ttft_s"].to_numpy(zero_copy_only=False)
    extra = np.nan_to_num((factor - 1.0) * ttft)  # a failed request has no TTFT: nothing moves
    chunks = t["chunk_times_s"].combine_chunks()
    moved = chunks.flatten().to_numpy() + np.repeat(extra, np.diff(chunks.offsets.to_numpy()))
    for name, col in (
        ("ttft_s", pa.array(ttft * factor)),
        ("e2el_s", pa.array(t["e2el_s"].to_numpy(zero_copy_only=False) + extra)),
        ("t_done_ns", pa.array(t["t_done_ns"].to_numpy() + (extra * 1e9).astype(np.int64))),
        ("chunk_times_s", pa.ListArray.from_arrays(chunks.offsets, pa.array(moved))),
    ):
        t = t.set_column(t.schema.get_field_index(name), name, col)
    return t


def _serve_points(
    spec: SyntheticRun, rng: np.random.Generator, w, start: datetime, lane: str, mode: str = "closed"
) -> float:
    t = 0.0
    grid = {
        "values": list(spec.concurrencies),
        "bound": max(spec.concurrencies),
        "reduced": False,
        "reason": "synthetic",
        "kv_bytes_per_token": 131072,
    }
    configs = spec.server_configs if mode == "closed" else spec.server_configs[:1]
    concs = spec.concurrencies if mode == "closed" else (max(spec.concurrencies),)
    for repeat, config, conc in ((r, cfg, c) for r in range(spec.repeats) for cfg in configs for c in concs):
        pid = f"{lane}-{config}-c{conc}" + (f"-r{repeat}" if spec.repeats > 1 else "")
        pstart = start + timedelta(seconds=t)
        n = spec.requests_per_point if mode == "closed" else spec.requests_per_point * 4
        reqs, span = request_rows(
            rng,
            n,
            spec.input_len,
            spec.output_len,
            conc,
            spec.failure_rate,
            pid,
            pstart,
            int(t * 1e9),
            1.0 + spec.slowdown,
        )
        if spec.ttft_factor != 1.0:
            reqs = scale_ttft(reqs, spec.ttft_factor)
        w.add_rows(
            "requests",
            reqs.append_column("model", pa.array([spec.model] * n)).append_column(
                "server_config", pa.array([config] * n)
            ),
        )
        extra = (
            {"window_s": span / spec.sustained_windows, "warmup_windows": 1, "retention_k": 2, "duration_limit_s": span}
            if mode == "sustained"
            else {}
        )
        w.add_rows(
            "sweep_points",
            [
                {
                    "point_id": pid,
                    "model": spec.model,
                    "server_config": config,
                    "backend": "synthetic",
                    "mode": mode,
                    "input_len": spec.input_len,
                    "output_len": spec.output_len,
                    "max_concurrency": conc,
                    "num_prompts": n,
                    "window_start": pstart,
                    "window_end": pstart + timedelta(seconds=span),
                    "t_start_ns": int(t * 1e9),
                    "grid_json": json.dumps(grid, sort_keys=True),
                    "client_lag_bound_ms": 50.0,
                    "note": "synthetic",
                    **extra,
                    **({"repeat_index": repeat} if spec.repeats > 1 else {}),
                }
            ],
        )
        w.add_rows("telemetry", _telemetry(pstart, span))
        t += span + 1.0
    return t


def write_synthetic_run(store: ResultStore, spec: SyntheticRun = SyntheticRun()) -> None:
    """Commit one synthetic run, lane by lane, into ``store``."""
    rng = np.random.default_rng(spec.seed)
    clock = T0
    for lane in spec.lanes:
        w = store.begin_attempt(spec.run_id, lane, attempt=f"20260701T120000000000Z-{lane[:6]}")
        start, wall, status, error = clock, 10.0, "succeeded", None
        if lane == "provenance":
            w.add_rows(
                "provenance",
                [
                    {"category": "python", "name": "version", "value": "3.11 (synthetic)", "source": "sys.version"},
                    {"category": "package", "name": "vllm", "value": None, "note": "synthetic: not installed"},
                    {
                        "category": "instance",
                        "name": "instance_type",
                        "value": _box(spec, "serve_sweep")[1],
                        "source": "IMDSv2",
                    },
                ],
            )
        elif lane == "host_cpu":
            w.add_rows(
                "host_bench",
                [
                    {
                        "bench": b,
                        "threads": 1,
                        "size": 1 << 20,
                        "value": v,
                        "unit": u,
                        "median": v,
                        "repeats": 3,
                        "note": "synthetic",
                    }
                    for b, v, u in (("triad", 10.0, "GB/s"), ("matmul", 50.0, "GFLOP/s"))
                ],
            )
        elif lane == "precompile":
            w.add_rows(
                "compiles",
                [
                    {
                        "what": "training_graph",
                        "model": spec.model,
                        "config": "lora-r16",
                        "cache": c,
                        "wall_s": s,
                        "cache_bytes_before": b0,
                        "cache_bytes_after": b1,
                        "new_artifacts": a,
                        "succeeded": True,
                        "backend": "neuron",
                    }
                    for c, s, b0, b1, a in (("cold", 600.0, 0, 10 << 20, 12), ("warm", 30.0, 10 << 20, 10 << 20, 0))
                ],
            )
        elif lane == "sft":
            steps = np.arange(1, spec.train_steps + 1)
            loss = 2.5 * np.exp(-steps / 10) + 0.5 + rng.normal(0, 0.02, len(steps))
            w.add_rows(
                "train_steps",
                [
                    {"model": spec.model, "step": int(s), "loss": float(ln), "tokens": 4096, "step_s": 2.0}
                    for s, ln in zip(steps, loss)
                ],
            )
            w.add_rows(
                "train_runs",
                [
                    {
                        "model": spec.model,
                        "backend": "neuron",
                        "device": "trn1",
                        "num_devices": 1,
                        "params_trainable": 4_000_000,
                        "params_frozen": 1_000_000_000,
                        "steps": spec.train_steps,
                        "tokens_per_s": 2048.0,
                        "first_step_s": 90.0,
                        "median_step_s": 2.0,
                        "flops_per_token": 4.024e9,
                        "flops_formula": "6*N_trainable + 4*N_frozen",
                        "mfu": 2048 * 4.024e9 / 190e12,
                        "peak_flops": 190e12,
                        "peak_source": "synthetic",
                        "final_loss": float(loss[-1]),
                    }
                ],
            )
            w.add_rows("telemetry", _telemetry(start, wall))
        elif lane in ("merge", "finetune_serve"):
            stage = "after_merge" if lane == "merge" else "after_copy"
            w.add_rows(
                "artifacts",
                [
                    {
                        "model": spec.model,
                        "kind": "merged",
                        "stage": stage,
                        "path": p,
                        "bytes": 1000,
                        "sha256": h,
                        "expected_sha256": h,
                        "roundtrip_verified": True if lane == "finetune_serve" else None,
                    }
                    for p, h in (("model.safetensors", "a" * 64), ("config.json", "b" * 64))
                ],
            )
            if lane == "finetune_serve":
                wall = _serve_points(spec, rng, w, start, lane)
        elif lane == "serve_sweep":
            w.add_rows(
                "compiles",
                [
                    {
                        "what": "serving_config",
                        "model": spec.model,
                        "config": c,
                        "cache": k,
                        "wall_s": s,
                        "succeeded": True,
                        "backend": "neuron",
                        **_declared(spec, c),
                    }
                    for c in spec.server_configs
                    for k, s in (("cold", 900.0), ("warm", 60.0))
                ],
            )
            wall = _serve_points(spec, rng, w, start, lane)
        elif lane == "sustained":
            wall = _serve_points(spec, rng, w, start, lane, mode="sustained")
        elif lane == "quality":
            w.add_rows(
                "quality",
                [
                    {
                        "model": spec.model,
                        "variant": v,
                        "prompt_id": f"p{i}",
                        "prompt": "hi",
                        "text_1": f"{v} answer {i}",
                        "text_2": f"{v} answer {i}",
                        "deterministic": True,
                        "mean_logprob": None,
                        "logprob_note": "synthetic: logprobs not returned",
                        "output_tokens": 8,
                    }
                    for v in ("base", "finetune")
                    for i in range(3)
                ],
            )
        elif lane == "qwen3_attempt":
            status, error = "failed", ("ServerBootError", "synthetic: model architecture Qwen3ForCausalLM unsupported")
        w.add_rows("lane_runs", [_lane_row(spec, lane, start, wall, status, error)])
        w.commit(status)
        clock = start + timedelta(seconds=wall + 1)


def fixed_request(point_id: str, i: int, **extra: object) -> dict:
    """One successful request row of fixed shape (8 prompt tokens, 3 output chunks over 0.5 s, sent at i s): for
    view tests that need a point's requests, not their statistics; ``extra`` sets other columns."""
    return {
        "point_id": point_id,
        "request_id": f"{point_id}-{i}",
        "request_index": i,
        "warmup": False,
        "t_sent_ns": i * 10**9,
        "t_scheduled_ns": i * 10**9,
        "t_done_ns": i * 10**9 + 5 * 10**8,
        "client_queue_s": 0.0,
        "ttft_s": 0.1,
        "e2el_s": 0.5,
        "chunk_times_s": [0.1, 0.3, 0.5],
        "chunk_tokens": [1, 1, 1],
        "prompt_tokens": 8,
        "output_tokens": 3,
        "input_len": 8,
        "output_len": 3,
        "success": True,
        **extra,
    }
