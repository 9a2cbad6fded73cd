"""torchneuronx's training extras → our checkpoint-cost rows and the from_scratch lane.

* ``trn1/results/extras/ckpt_timing.json`` (+ ``.log``) → the ``sft`` lane: the run that saved its LoRA adapter every
  ``--save-steps`` (TinyLlama, TP=2) as one more training run (``train_steps``, ``train_runs``, read like
  ``train/<model>_lora.json``) and one ``train_saves`` row per ``checkpoint_saves`` entry (step, ``save_wall_s``).
  The log names each checkpoint's directory (``Saving model checkpoint to …/checkpoint-<step>``) and what was
  written (``saving of checkpoint adapter_shards``: the adapter only, no optimizer state, so ``kind`` adapter);
  the source records no sizes (``bytes`` and ``files`` NULL).
* ``trn1/results/academic/<dataset>_<arch>.json`` → the ``from_scratch`` lane: one ``scratch_runs`` row per file
  (device trn1, one NeuronCore, source ``imported``) and one ``scratch_epochs`` row per epoch; its accuracy, a
  percentage of the 10,000-image test split of MNIST and CIFAR-10 (the source's eval batch of 1,000 divides it
  exactly), becomes ``correct`` out of 10,000.
* ``academic/README.md``'s results table → ``scratch_runs`` rows with source ``reference``, device ``apple_m5``: the
  accuracy range the table states for the Apple M5 (mlx-models) per dataset and model, measured elsewhere; a cell
  that states no figure ("see mlx repo") makes no row.
"""

from __future__ import annotations

import json
import re

from analytics.importers.common import ImportInputError, LaneImport, integer, load_json, num, parse_time
from analytics.importers.source import Tree
from analytics.importers.tnx_trn1 import train_run

CKPT = "trn1/results/extras/ckpt_timing.json"
ACADEMIC = "trn1/results/academic/"
ACADEMIC_README = "academic/README.md"
ACADEMIC_RE = re.compile(r"academic/(mnist|cifar)_(mlp|cnn|vit)\.json$")
TEST_SPLIT = {"mnist": 10_000, "cifar": 10_000}  # MNIST's and CIFAR-10's test splits
IMAGE_SHAPE = {"mnist": "28x28x1", "cifar": "32x32x3"}
TRAIN_SPLIT = {"mnist": 60_000, "cifar": 50_000}
SAVE_DIR_RE = re.compile(r"Saving model checkpoint to (\S+/checkpoint-(\d+))")
ADAPTER_ONLY_RE = re.compile(r"saving of checkpoint adapter_shards began")
OPTIMIZER_RE = re.compile(r"saving of checkpoint optim", re.I)
M5_NOTE = "mlx-models (Apple M5), the range academic/README.md states: measured elsewhere, not re-measured"
RANGE_RE = re.compile(r"~?\s*(\d+(?:\.\d+)?)\s*(?:[–-]\s*(\d+(?:\.\d+)?))?\s*%")


def _ckpt(tree: Tree, lanes: list[LaneImport]) -> None:
    if not tree.exists(CKPT):
        return
    sft = next((li for li in lanes if li.lane == "sft"), None)
    if sft is None:
        sft = LaneImport("sft", "trn1")
        lanes.append(sft)
    d = load_json(tree, CKPT)
    saves = d.get("checkpoint_saves")
    if not isinstance(saves, list) or not all(isinstance(s, dict) for s in saves):
        raise ImportInputError(f"{tree.uri(CKPT)}: checkpoint_saves: expected a list of objects")
    train_run(tree, CKPT, sft)
    model = d.get("model") or "ckpt_timing"
    log_path = CKPT[: -len(".json")] + ".log"
    text = tree.text(log_path) if tree.exists(log_path) else ""
    dirs = {int(m.group(2)): m.group(1) for m in SAVE_DIR_RE.finditer(text)}
    kind = None
    if text:
        kind = "full_state" if OPTIMIZER_RE.search(text) else "adapter" if ADAPTER_ONLY_RE.search(text) else None
    captured = parse_time(d.get("captured"))
    for s in saves:
        step = integer(s.get("step"))
        if step is None:
            raise ImportInputError(f"{tree.uri(CKPT)}: checkpoint_saves: an entry without a step")
        sft.add(
            "train_saves",
            {
                "model": model,
                "step": step,
                "save_s": num(s.get("save_wall_s")),
                "bytes": None,
                "files": None,
                "kind": kind,
                "path": dirs.get(step),
                "ts": captured,
            },
        )
    sft.config.setdefault("train_saves", {})[model] = {
        "source": CKPT,
        "kind_from": f"{log_path}: the checkpoint saves name adapter_shards only" if kind == "adapter" else None,
        "null_reasons": {"bytes": "the source records no checkpoint sizes", "files": "nor their files"},
    }
    if text:
        sft.paths.append(log_path)


def _m5_ranges(tree: Tree) -> dict[tuple[str, str], tuple[float, float, str]]:
    """(dataset, arch) -> (low, high, the cell as written) from the README's results table's M5 column."""
    if not tree.exists(ACADEMIC_README):
        return {}
    out = {}
    header: list[str] | None = None
    for line in tree.text(ACADEMIC_README).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.lstrip().startswith("|") else None
        if cells is None:
            header = None
            continue
        if header is None:
            header = [c.lower() for c in cells]
            continue
        if set("".join(cells)) <= set("-: "):
            continue
        row = dict(zip(header, cells))
        m5 = next((v for k, v in row.items() if "m5" in k), None)
        if m5 is None or not row.get("dataset") or not row.get("arch"):
            continue
        m = RANGE_RE.search(m5)
        if m:
            lo = float(m.group(1)) / 100
            out[(row["dataset"].lower(), row["arch"].lower())] = (lo, float(m.group(2) or m.group(1)) / 100, m5)
    return out


def _academic(tree: Tree) -> LaneImport | None:
    found = sorted(p for p in tree.files(ACADEMIC) if ACADEMIC_RE.search(p))
    if not found:
        return None
    li = LaneImport("from_scratch", "trn1")
    li.config["source"] = "torchneuronx academic/: MNIST and CIFAR-10 on one Trainium1 NeuronCore (fp32, XLA)"
    li.config["column_null_reasons"] = {"dataset_sha256": "the source records no dataset hash"}
    for path in found:
        dataset, arch = ACADEMIC_RE.search(path).groups()
        d = load_json(tree, path)
        cfg = d.get("config") or {}
        n = TEST_SPLIT[dataset]
        captured = parse_time(d.get("captured"))
        epochs = [e for e in d.get("epochs") or [] if isinstance(e, dict) and integer(e.get("epoch")) is not None]
        common = {"model": arch, "dataset": dataset, "source": "imported", "device": "trn1"}
        for e in epochs:
            acc = num(e.get("test_acc"))
            li.add(
                "scratch_epochs",
                {
                    **common,
                    "epoch": integer(e["epoch"]),
                    "train_loss": num(e.get("train_loss")),
                    "correct": round(acc / 100 * n) if acc is not None else None,
                    "test_samples": n if acc is not None else None,
                    "epoch_s": num(e.get("wall_s")),
                    "ts": captured,
                },
            )
        first, median = num(d.get("first_step_ms")), num(d.get("median_step_ms"))
        batch = integer(cfg.get("batch_size"))
        li.add(
            "scratch_runs",
            {
                **common,
                "source_note": f"{path} ({cfg.get('device')}, {cfg.get('precision')})",
                "backend": "neuron",
                "image_shape": IMAGE_SHAPE[dataset],
                "num_classes": 10,
                "train_samples": TRAIN_SPLIT[dataset],
                "test_samples": n,
                "params": integer(d.get("params")),
                "epochs": integer(cfg.get("epochs")),
                "batch_size": batch,
                "learning_rate": num(cfg.get("lr")),
                "steps": (TRAIN_SPLIT[dataset] // batch) * integer(cfg.get("epochs"))
                if batch and cfg.get("epochs")
                else None,
                "first_step_s": first / 1000 if first is not None else None,
                "steady_step_s": median / 1000 if median is not None else None,
                "train_wall_s": num(d.get("total_wall_s")),
                "config_json": json.dumps(
                    {
                        **cfg,
                        "source_headlines": {
                            k: d.get(k)
                            for k in ("best_test_acc", "final_test_acc", "samples_per_s_steady", "compile_s_estimate")
                        },
                    },
                    sort_keys=True,
                ),
                "ts": captured,
            },
        )
        li.paths.append(path)
        log_path = path[: -len(".json")] + ".log"
        if tree.exists(log_path):
            li.paths.append(log_path)
        li.ended_at = max(filter(None, [li.ended_at, captured]), default=None)
        li.wall_s = (li.wall_s or 0.0) + (num(d.get("total_wall_s")) or 0.0)
    for (dataset, arch), (lo, hi, cell) in sorted(_m5_ranges(tree).items()):
        li.add(
            "scratch_runs",
            {
                "model": arch,
                "dataset": dataset,
                "source": "reference",
                "device": "apple_m5",
                "source_note": f"{M5_NOTE} ({cell!r})",
                "image_shape": IMAGE_SHAPE.get(dataset),
                "num_classes": 10,
                "test_samples": TEST_SPLIT.get(dataset),
                "reference_acc_low": lo,
                "reference_acc_high": hi,
            },
        )
    if tree.exists(ACADEMIC_README):
        li.paths.append(ACADEMIC_README)
    return li


def extras(tree: Tree, lanes: list[LaneImport]) -> list[LaneImport]:
    """``lanes`` with §13.7's checkpoint saves in the sft lane and the academic runs as the from_scratch lane."""
    out = list(lanes)
    _ckpt(tree, out)
    scratch = _academic(tree)
    if scratch is not None:
        out.append(scratch)
    return out
