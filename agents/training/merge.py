"""Merge a LoRA adapter into its base (bf16, low host memory, safetensors) and verify copies by SHA-256.

Adapter layouts: a plain PEFT directory (``adapter_config.json`` +
``adapter_model.safetensors``), or optimum-neuron's sharded layout
(``adapter_default/adapter_shards``), which is consolidated first.
:func:`fetch_merged_model` is the serving side's half of the round trip: it
downloads the latest committed merge and re-hashes every file against the merge
lane's ``artifacts`` rows.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any, Literal

from agents.training.catalogue import sha256_file
from pipeline.containment import PathEscapeError, contained

AdapterLayout = Literal["peft", "neuron_sharded"]
NEURON_SHARDS = Path("adapter_default") / "adapter_shards"
BASE_SIDE_FILES = (
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "special_tokens_map.json",
    "tokenizer.model",
)


class AdapterLayoutError(ValueError):
    """A directory holds no adapter layout we know."""


class MergeInputError(RuntimeError):
    """What the merge needs from the store (a committed sft or merge attempt) is missing."""


class HashMismatchError(RuntimeError):
    """A downloaded file's SHA-256 differs from the one recorded after the merge."""

    def __init__(self, message: str, rows: list[dict]):
        super().__init__(message)
        self.rows = rows


def detect_adapter_layout(adapter_dir: Path) -> tuple[AdapterLayout, Path]:
    """(layout, the directory that holds it); searches one level of checkpoint subdirectories too."""
    root = Path(adapter_dir)
    candidates = [root] + sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    for d in candidates:
        if (d / "adapter_config.json").is_file() and any(
            (d / n).is_file() for n in ("adapter_model.safetensors", "adapter_model.bin")
        ):
            return "peft", d
        if (d / NEURON_SHARDS).is_dir():
            return "neuron_sharded", d
    found = sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))[:20] if root.is_dir() else []
    raise AdapterLayoutError(
        f"{root}: no adapter found (want adapter_config.json + adapter_model.safetensors, "
        f"or {NEURON_SHARDS.as_posix()}/); it holds: {found or 'nothing'}"
    )


def consolidate_command(sharded_dir: Path, out_dir: Path) -> list[str]:
    return ["optimum-cli", "neuron", "consolidate", str(sharded_dir), str(out_dir)]


def consolidate_neuron_adapter(sharded_dir: Path, out_dir: Path, run: Any = None) -> Path:
    """optimum-neuron's consolidation of TP-sharded adapter weights into one PEFT adapter directory."""
    from agents.box_env import lane_environment

    run = run or subprocess.run
    # optimum-cli lives in the DLAMI's training venv: the lane environment puts its bin first on PATH (a bare SSM
    # shell's PATH has no optimum-cli, the predecessor's "libneuronpjrt-path" lesson in another form)
    proc = run(
        consolidate_command(sharded_dir, out_dir), capture_output=True, text=True, env=lane_environment("training")
    )
    if proc.returncode != 0:
        raise AdapterLayoutError(f"consolidating {sharded_dir} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    layout, where = detect_adapter_layout(out_dir)
    if layout != "peft":
        raise AdapterLayoutError(f"consolidation of {sharded_dir} left no PEFT adapter in {out_dir}")
    return where


def peft_adapter_dir(adapter_dir: Path, consolidated_dir: Path) -> Path:
    """The PEFT adapter directory of what a training run saved (TP-sharded Neuron adapters consolidated first)."""
    layout, where = detect_adapter_layout(adapter_dir)
    if layout == "neuron_sharded":
        where = consolidate_neuron_adapter(where, consolidated_dir)
    return where


def adapter_files(marker: Any, run_id: str, model: str) -> tuple[str, list[str]]:
    """(key prefix, keys) of ``model``'s adapter among the files an sft attempt committed."""
    base = f"models/{run_id}/{model}/"
    keys = [k for k in marker.files if k.startswith(base) and "/adapter/" in k[len(base) - 1 :]]
    if not keys:
        return "", []
    prefix = keys[0][: keys[0].index("/adapter/", len(base) - 1) + len("/adapter")]
    return prefix, [k for k in keys if k.startswith(prefix + "/")]


def fetch_sft_adapter(store: Any, run_id: str, model: str, dest: Path) -> Path:
    """``model``'s adapter from the latest succeeded sft attempt committed for ``run_id``, downloaded to ``dest``
    (MergeInputError: no such attempt, or it committed no adapter for the model)."""
    marker = store.latest_committed(run_id, "sft")
    if marker is None or marker.status != "succeeded":
        raise MergeInputError(
            f"no succeeded sft attempt committed for run {run_id!r}"
            + (f" (latest: {marker.status})" if marker else "")
            + "; run the sft lane first"
        )
    prefix, keys = adapter_files(marker, run_id, model)
    if not keys:
        raise MergeInputError(f"sft attempt {marker.attempt} committed no adapter for {model!r}")
    targets = [(k, _local(dest, k[len(prefix) + 1 :], k)) for k in keys]  # every key checked before a download
    for k, target in targets:
        store.download(k, target)
    return Path(dest)


def _local(dest: Path, relative: str, named_by: str) -> Path:
    """Where a file the store names lands under ``dest``; MergeInputError when the name would leave it."""
    try:
        return contained(dest, relative)
    except PathEscapeError as exc:
        raise MergeInputError(f"{named_by}: the name leaves {dest} ({exc})") from exc


def merge_adapter(base_dir: Path, adapter_dir: Path, out_dir: Path, max_shard_size: str = "5GB") -> Path:
    """Load the base in bf16 (weights streamed, no fp32 copy), apply the adapter, merge, save safetensors."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    where = peft_adapter_dir(adapter_dir, Path(out_dir).parent / "adapter-consolidated")
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.bfloat16, low_cpu_mem_usage=True)
    merged = PeftModel.from_pretrained(base, where).merge_and_unload()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    merged.save_pretrained(out, safe_serialization=True, max_shard_size=max_shard_size)
    for name in BASE_SIDE_FILES:  # tokenizer and generation settings travel with the weights
        src = Path(base_dir) / name
        if src.is_file() and not (out / name).exists():
            shutil.copy2(src, out / name)
    return out


def generate_check(model_dir: Path, prompts: list[str], max_new_tokens: int = 16) -> list[dict[str, Any]]:
    """Reload a checkpoint from disk and generate greedily through its chat template."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.eval()
    out = []
    for prompt in prompts:
        enc = tok.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        with torch.no_grad():
            gen = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tok.pad_token_id)
        new = gen[0, enc["input_ids"].shape[1] :]
        out.append(
            {"prompt": prompt, "output_tokens": int(new.numel()), "text": tok.decode(new, skip_special_tokens=True)}
        )
    return out


def _merge_artifact_rows(store: Any, marker: Any, model: str) -> list[dict]:
    from analytics.store.base import read_parquet_bytes

    key = marker.tables.get("artifacts")
    if not key:
        raise MergeInputError(f"merge attempt {marker.attempt} of run {marker.run_id} committed no artifacts rows")
    rows = read_parquet_bytes(store.get_bytes(key)).to_pylist()
    return [r for r in rows if r["model"] == model and r["kind"] == "merged" and r["stage"] == "after_merge"]


def fetch_merged_model(
    store: Any, run_id: str, model: str, dest: Path, strict: bool = False
) -> tuple[Path, list[dict]]:
    """Download ``model``'s merged weights from the latest committed merge and re-hash every file.

    Returns (directory, ``artifacts`` rows with stage ``after_copy``, ``expected_sha256`` and
    ``roundtrip_verified``). With ``strict`` a mismatch raises :class:`HashMismatchError` (rows attached).
    """
    marker = store.latest_committed(run_id, "merge")
    if marker is None or marker.status != "succeeded":
        raise MergeInputError(
            f"no succeeded merge committed for run {run_id!r}"
            + (f" (latest is {marker.status})" if marker else "")
            + "; run the merge lane first"
        )
    expected = _merge_artifact_rows(store, marker, model)
    if not expected:
        raise MergeInputError(
            f"merge attempt {marker.attempt} of run {run_id!r} holds no merged files for model {model!r}"
        )
    by_uri = {store.uri(k): k for k in marker.files}
    dest = Path(dest)
    planned = []
    for r in sorted(expected, key=lambda r: r["path"]):  # every row checked before a download
        key = by_uri.get(r["uri"])
        if key is None:
            raise MergeInputError(f"{r['uri']} is recorded in artifacts but not among the merge attempt's files")
        planned.append((r, key, _local(dest, r["path"], f"artifacts row {r['uri']}")))
    rows = []
    for r, key, local in planned:
        store.download(key, local)
        sha = sha256_file(local)
        rows.append(
            {
                "model": model,
                "kind": "merged",
                "stage": "after_copy",
                "path": r["path"],
                "uri": r["uri"],
                "bytes": local.stat().st_size,
                "sha256": sha,
                "expected_sha256": r["sha256"],
                "roundtrip_verified": sha == r["sha256"],
            }
        )
    bad = [r["path"] for r in rows if not r["roundtrip_verified"]]
    if bad and strict:
        raise HashMismatchError(f"SHA-256 mismatch after copy for {', '.join(bad)}", rows)
    return dest, rows
