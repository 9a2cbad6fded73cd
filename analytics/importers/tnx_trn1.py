"""torchneuronx ``trn1/results/…`` → our training-side lanes.

provenance@trn1 (specs.txt, model_hashes.txt), host_cpu@trn1 (cpu/cpu.json), precompile
(compile/*.json), sft (train/<model>_lora.json + telemetry), smoke@trn1 (train/smoke_*.json),
merge (train/merge_*.json). The mapping is written out in docs/guides/import.md.
"""

from __future__ import annotations

import re
from typing import Any

from analytics.importers.common import LaneImport, dumps, integer, load_json, num, parse_time, telemetry_table
from analytics.importers.source import Tree
from pipeline.mfu import compute_mfu, flops_per_token
from pipeline.steps import StepRecord, summarize

ROOT = "trn1/results/"
BACKEND = "neuron"
# What the source's per-step ``ms`` measures (its train_bench.py callback): the interval between two
# optimizer-step callbacks of the harness, not the whole training loop.
STEP_CLOCK = "harness on_step_end interval (source loss_trace ms)"


def parse_specs(text: str) -> list[dict[str, Any]]:
    """``=== section ===`` blocks of ``key: value`` lines and ``package version`` lines."""
    rows: list[dict[str, Any]] = []
    section = ""
    sub = ""
    category_of = {
        "os": "os",
        "cpu": "cpu",
        "memory": "memory",
        "storage": "os",
        "accelerator": "device",
        "accelerator stack": "package",
        "neuron compile cache": "harness",
        "captured": "harness",
    }
    for line in text.splitlines():
        m = re.match(r"^=== (.+) ===$", line.strip())
        if m:
            section, sub = m.group(1), ""
            continue
        if line.startswith("-- "):
            sub = line[3:].rstrip(":").strip()
            if ":" in sub and section == "accelerator":
                k, v = sub.split(":", 1)
                rows.append({"category": "device", "name": k.strip(), "value": v.strip(), "source": "specs.txt"})
            continue
        cat = category_of.get(section, "harness")
        kv = re.match(r"^([A-Za-z][\w .()/-]*):\s+(\S.*)$", line)
        if kv and section != "accelerator stack":
            rows.append(
                {
                    "category": cat,
                    "name": kv.group(1).strip(),
                    "value": kv.group(2).strip(),
                    "source": f"specs.txt [{section}]",
                }
            )
            continue
        pkg = re.match(r"^([A-Za-z][\w.+-]*)\s+(\d\S*)$", line.strip())
        if pkg and section == "accelerator stack":
            category = "driver" if "driver" in sub or "runtime" in sub else "package"
            rows.append(
                {
                    "category": category,
                    "name": pkg.group(1),
                    "value": pkg.group(2),
                    "source": f"specs.txt [{section}] {sub}",
                }
            )
        elif section == "captured" and line.strip():
            rows.append(
                {"category": "harness", "name": "specs_captured_at", "value": line.strip(), "source": "specs.txt"}
            )
    return rows


def spec_value(rows: list[dict[str, Any]], name: str) -> str | None:
    for r in rows:
        if r["name"] == name:
            return r["value"]
    return None


def parse_hashes(text: str) -> list[dict[str, Any]]:
    """model_hashes.txt: ``## <model> @ <revision>`` headers, then ``<sha256>  <file>`` lines."""
    rows, model = [], None
    for line in text.splitlines():
        head = re.match(r"^## (\S+)(?: @ (\S+))?", line)
        if head:
            model = head.group(1)
            continue
        m = re.match(r"^([0-9a-f]{64})\s+(\S.*)$", line.strip())
        if m and model:
            rows.append(
                {
                    "model": model,
                    "kind": "base",
                    "stage": "download",
                    "path": f"{model}/{m.group(2)}",
                    "sha256": m.group(1),
                }
            )
    return rows


def provenance(tree: Tree, root: str, role: str) -> LaneImport | None:
    spec_path, hash_path = root + "specs.txt", root + "model_hashes.txt"
    have = set(tree.files(root))
    if spec_path not in have and hash_path not in have:
        return None
    li = LaneImport(f"provenance@{role}", role)
    if spec_path in have:
        rows = parse_specs(tree.text(spec_path))
        li.add("provenance", rows)
        li.ended_at = parse_time(spec_value(rows, "specs_captured_at"))
        li.paths.append(spec_path)
    if hash_path in have:
        text = tree.text(hash_path)
        li.add("artifacts", parse_hashes(text))
        li.paths.append(hash_path)
        m = re.search(r"^# captured: (\S+)", text, re.M)
        li.ended_at = li.ended_at or (parse_time(m.group(1)) if m else None)
    return li


def host_cpu(tree: Tree, root: str, role: str) -> LaneImport | None:
    path = root + "cpu/cpu.json"
    if path not in set(tree.files(root + "cpu/")):
        return None
    d = load_json(tree, path)
    li = LaneImport(f"host_cpu@{role}", role, ended_at=parse_time(d.get("captured")), paths=[path])
    note = d.get("note")
    if num(d.get("stream_triad_gb_s")) is not None:
        li.add("host_bench", {"bench": "triad", "value": num(d["stream_triad_gb_s"]), "unit": "GB/s", "note": note})
    for m in d.get("fp32_matmul") or []:
        if isinstance(m, dict) and num(m.get("tflops")) is not None:
            li.add(
                "host_bench",
                {
                    "bench": "matmul",
                    "threads": integer(m.get("threads")),
                    "value": num(m["tflops"]) * 1000.0,
                    "unit": "GFLOP/s",
                    "note": note,
                },
            )
    tok = d.get("tokenizer") or {}
    if isinstance(tok, dict) and num(tok.get("tokens_per_s")) is not None:
        li.add(
            "host_bench",
            {
                "bench": "tokenizer",
                "size": integer(tok.get("tokens")),
                "value": num(tok["tokens_per_s"]),
                "unit": "tokens/s",
                "note": note,
            },
        )
    return li


def precompile(tree: Tree) -> LaneImport | None:
    paths = [p for p in tree.files(ROOT + "compile/") if p.endswith(".json")]
    if not paths:
        return None
    li = LaneImport("precompile", "trn1", paths=paths)
    for path in paths:
        d = load_json(tree, path)
        before, after = integer(d.get("neff_files_before")), integer(d.get("neff_files_after"))
        new = integer(d.get("graphs_compiled"))
        if new is None and before is not None and after is not None:
            new = after - before
        ok = integer(d.get("exit_code")) == 0
        li.add(
            "compiles",
            {
                "what": "training_graph",
                "model": d.get("model"),
                "config": f"max_steps={d.get('max_steps')}",
                # observed: the shared compiler cache gained NEFFs (cold for those graphs); none gained: warm
                "cache": "cold" if (new or 0) > 0 else ("warm" if new == 0 else "none"),
                "cache_scope": "shared_compiler_cache" if new is not None else None,
                "cache_basis": "observed" if new is not None else None,  # NEFFs counted before and after
                "wall_s": num(d.get("wall_s")),
                "cache_bytes_before": _mb(d.get("cache_dir_size_mb_before")),
                "cache_bytes_after": _mb(d.get("cache_dir_size_mb")),
                "new_artifacts": new,
                "succeeded": ok,
                "error": None if ok else f"exit code {d.get('exit_code')}",
                "backend": BACKEND,
                "ts": parse_time(d.get("captured")),
            },
        )
        li.ended_at = max(filter(None, [li.ended_at, parse_time(d.get("captured"))]), default=None)
        li.wall_s = (li.wall_s or 0.0) + (num(d.get("wall_s")) or 0.0)
    return li


def _mb(v: Any) -> int | None:
    x = num(v)
    return int(x * 2**20) if x is not None else None


def train_run(tree: Tree, path: str, li: LaneImport) -> None:
    """One training JSON → train_steps, train_runs and its telemetry."""
    d = load_json(tree, path)
    model = d.get("model") or path.rsplit("/", 1)[-1]
    tokens = integer(d.get("tokens_per_optimizer_step"))
    steps = []
    for s in d.get("loss_trace") or []:
        if not isinstance(s, dict) or integer(s.get("step")) is None or num(s.get("ms")) is None:
            continue
        steps.append(
            StepRecord(
                step=integer(s["step"]),
                loss=num(s.get("loss")),
                learning_rate=None,
                grad_norm=None,
                tokens=tokens,
                step_s=num(s["ms"]) / 1000.0,
            )
        )
    li.add("train_steps", [r.as_row(model) for r in steps])
    summary = summarize(steps)
    cfg = d.get("config") or {}
    trainable, frozen = integer(d.get("params_trainable")), integer(d.get("params_frozen"))
    # Gradient checkpointing re-runs every forward: our rule counts 8T+6F. The source labels its value
    # "6*params_trainable + 4*params_frozen" but its number is 8T+6F exactly (docs/guides/import.md).
    recompute = bool(cfg.get("gradient_checkpointing"))
    fpt = flops_per_token(trainable, frozen, activation_recompute=recompute)
    mfu = compute_mfu(summary.tokens_per_s, fpt, "trn1", 1)
    captured = parse_time(d.get("captured"))
    li.add(
        "train_runs",
        {
            "model": model,
            "backend": BACKEND,
            "device": "trn1",
            "num_devices": 1,
            "params_trainable": trainable,
            "params_frozen": frozen,
            "lora_r": integer(cfg.get("lora_r")),
            "lora_alpha": integer(cfg.get("lora_alpha")),
            "steps": summary.steps,
            "epochs": num(cfg.get("epochs")),
            "tokens_total": summary.tokens_total,
            "tokens_per_s": summary.tokens_per_s,
            "first_step_s": summary.first_step_s,
            "median_step_s": summary.median_step_s,
            "flops_per_token": fpt.value,
            "flops_formula": fpt.formula,
            "activation_recompute": recompute,
            **mfu.as_row(),
            "peak_host_mem_mib": num(d.get("peak_host_mem_mib")),
            "final_loss": summary.final_loss,
            "max_seq_len": integer(cfg.get("seq_len")),
            "adapter_uri": d.get("adapter_out"),
            "train_loop_s": num(d.get("train_wall_s")),
            "step_clock": STEP_CLOCK,
        },
    )
    loop = li.config.setdefault("train_loop_wall_s", {})
    loop[model] = num(d.get("train_wall_s"))
    li.config["step_clock"] = STEP_CLOCK
    li.config.setdefault("source_headlines", {})[model] = {
        k: d.get(k)
        for k in (
            "tokens_per_s",
            "mfu_pct",
            "median_step_ms",
            "first_step_ms",
            "train_wall_s",
            "peak_bf16_flops",
            "flops_per_token",
        )
    }
    li.ended_at = max(filter(None, [li.ended_at, captured]), default=None)
    li.wall_s = (li.wall_s or 0.0) + (num(d.get("train_wall_s")) or 0.0)
    li.paths.append(path)
    csv_path = path[: -len(".json")] + ".telemetry.csv"
    if csv_path in set(tree.files(csv_path.rsplit("/", 1)[0] + "/")):
        li.add_table("telemetry", telemetry_table(tree, csv_path, captured))
        li.paths.append(csv_path)


def _training(tree: Tree, lane: str, paths: list[str]) -> LaneImport | None:
    """One training lane's import from its result files (none: the lane did not run)."""
    if not paths:
        return None
    li = LaneImport(lane, "trn1")
    for p in paths:
        train_run(tree, p, li)
    return li


def sft(tree: Tree) -> LaneImport | None:
    return _training(
        tree, "sft", [p for p in tree.files(ROOT + "train/") if p.endswith("_lora.json") and "/smoke" not in p]
    )


def smoke(tree: Tree) -> LaneImport | None:
    return _training(tree, "smoke@trn1", [p for p in tree.files(ROOT + "train/smoke_") if p.endswith(".json")])


def merge(tree: Tree) -> LaneImport | None:
    paths = [p for p in tree.files(ROOT + "train/merge_") if p.endswith(".json")]
    if not paths:
        return None
    li = LaneImport("merge", "trn1", paths=paths)
    for p in paths:
        d = load_json(tree, p)
        model = d.get("base")
        for name, sha in sorted((d.get("files") or {}).items()):
            li.add(
                "artifacts",
                {
                    "model": model,
                    "kind": "merged",
                    "stage": "after_merge",
                    "path": name,
                    "uri": d.get("upload_dest"),
                    "sha256": sha,
                },
            )
        li.ended_at = max(filter(None, [li.ended_at, parse_time(d.get("captured"))]), default=None)
        li.wall_s = (li.wall_s or 0.0) + (num(d.get("wall_s")) or 0.0)
        li.config["timings_s"] = d.get("timings_s")
        if d.get("upload_ok") is False:
            li.status, li.error_message = "failed", "upload to S3 did not succeed (upload_ok=false)"
    return li


def lanes(tree: Tree) -> list[LaneImport]:
    found = [
        provenance(tree, ROOT, "trn1"),
        host_cpu(tree, ROOT, "trn1"),
        precompile(tree),
        sft(tree),
        smoke(tree),
        merge(tree),
    ]
    return [li for li in found if li is not None]


__all__ = ["lanes", "parse_specs", "parse_hashes", "spec_value", "STEP_CLOCK", "dumps"]
