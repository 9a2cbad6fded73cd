"""torchneuronx ``trn1/results/extras/{whisper,clip,siglip}.*`` (its Phase 2 Track A, measured on trn1's training venv:
optimum-neuron cannot live in inf2's vLLM venv) → the ``encode`` lane's rows.

* ``whisper.json`` (+ ``whisper.log``, ``whisper.telemetry.csv``) → ``openai/whisper-small``, speech_to_text, one 11 s
  clip at batch 1: its placement (optimum-neuron's export, ``compile_s`` and ``load_s`` as recorded, the cache state
  from the log's ``cached=`` banner), one timed call (``transcribe_wall_s`` for ``audio_s`` seconds of audio: the
  view's RTF), and its numerics row: the source checked the transcript's head against the reference text, not a CPU
  fp32 run, so the row says that and carries no cosine or error (NULL).
* ``clip.failure.json`` (+ ``clip.log``) → ``openai/clip-vit-base-patch32``, zero-shot at 224 px, batch 1 (the log's
  banner): optimum-neuron's export refused (its verbatim error from the log), the ``torch_neuronx.trace`` fallback
  compiled and ran, and its outputs were NaN: a numerics row ``nan`` with the source's own words as the evidence
  (how many values were NaN is not recorded: NULL). No timed call.
* ``siglip.json`` → ``google/siglip-base-patch16-224``, zero-shot at 224 px: optimum-neuron's refusal, verbatim
  (``status`` ``export_refused``); nothing placed, nothing timed.

Not imported (:data:`NOT_IMPORTED`): trn1's ``whisper.failure.json`` (an earlier attempt that failed importing the
runtime, superseded by ``whisper.json``) and inf2's three receipts (optimum missing from inf2's venv: an environment
failure, not a model's result).
"""

from __future__ import annotations

import re
from typing import Any

from analytics.importers.common import LaneImport, load_json, num, parse_time, telemetry_table
from analytics.importers.source import Tree

EXTRAS = "trn1/results/extras/"
WHISPER, CLIP, SIGLIP = EXTRAS + "whisper.json", EXTRAS + "clip.failure.json", EXTRAS + "siglip.json"
CACHED = re.compile(r"\bcached=(True|False)\b")
BANNER_INT = r"\b{}=(\d+)\b"
OPTIMUM_REFUSAL = re.compile(r"optimum export failed \((.*)\); falling back to raw torch_neuronx\.trace")
NOT_IMPORTED = {
    "trn1/results/extras/whisper.failure.json": "an earlier Whisper attempt that failed importing the Neuron runtime, "
    "superseded by whisper.json",
    "inf2/results/extras/{whisper.failure,clip.failure,siglip}.json": "optimum is not installed in inf2's vLLM venv: "
    "an environment failure, not a model's result (the lanes ran on trn1's training venv)",
}


def _banner(log: str, key: str) -> int | None:
    m = re.search(BANNER_INT.format(key), log)
    return int(m.group(1)) if m else None


def _cache(log: str) -> str | None:
    m = CACHED.search(log)
    return None if m is None else ("warm" if m.group(1) == "True" else "cold")


def _subject(model: str, family: str, modality: str, shape: int | None, unit: str, batch: int | None) -> dict:
    return {
        "workload": family,
        "modality": modality,
        "model": model,
        "family": family,
        "backend": "neuron",
        "shape": shape,
        "shape_unit": unit,
        "batch_size": batch,
    }


def _text(tree: Tree, files: list[str], path: str) -> str:
    return tree.text(path) if path in files else ""


def _telemetry(li: LaneImport, tree: Tree, files: list[str], stem: str, captured: Any) -> None:
    csv_path = EXTRAS + stem + ".telemetry.csv"
    if csv_path in files:
        li.add_table("telemetry", telemetry_table(tree, csv_path, captured))
        li.paths.append(csv_path)


def encode_lane(tree: Tree, files: list[str]) -> LaneImport | None:
    """The encode lane from the source's Track A receipts (None: it has none)."""
    if not {WHISPER, CLIP, SIGLIP} & set(files):
        return None
    li = LaneImport("encode", "trn1")
    li.config["not_imported"] = NOT_IMPORTED
    if WHISPER in files:
        d = load_json(tree, WHISPER)
        log = _text(tree, files, EXTRAS + "whisper.log")
        captured = parse_time(d.get("captured"))
        audio_s = num(d.get("audio_s"))
        model = str(d.get("model") or "openai/whisper-small")
        subject = _subject(model, "whisper", "speech_to_text", round(audio_s) if audio_s else None, "s", 1)
        li.add(
            "encode_models",
            {
                **subject,
                "exporter": "optimum-neuron",
                "status": "ok",
                "graphs": 2,  # the log compiles an encoder and a decoder
                "compile_s": num(d.get("compile_s")),
                "load_s": num(d.get("load_s")),
                "cache": _cache(log),
                "ts": captured,
            },
        )
        matched = d.get("transcript_matches_reference_head")
        li.add(
            "encode_numerics",
            {
                **subject,
                "reference": "the source's check: the transcript's head against the reference text (no CPU fp32 run)",
                "rows": 1,
                "verdict": "pass" if matched is True else "diverged",
                "reason": None if matched is True else f"transcript_matches_reference_head = {matched!r}",
                "ts": captured,
            },
        )
        wall = num(d.get("transcribe_wall_s"))
        if matched is True and wall is not None:
            li.add(
                "encode_calls",
                {**subject, "call": 0, "items": 1, "latency_ms": wall * 1000.0, "audio_s": audio_s, "ts": captured},
            )
        li.paths += [p for p in (WHISPER, EXTRAS + "whisper.log") if p in files]
        _telemetry(li, tree, files, "whisper", captured)
        li.ended_at = max(filter(None, [li.ended_at, captured]), default=None)
    if CLIP in files:
        d = load_json(tree, CLIP)
        log = _text(tree, files, EXTRAS + "clip.log")
        captured = parse_time(d.get("captured"))
        refusal = OPTIMUM_REFUSAL.search(log)
        subject = _subject(
            "openai/clip-vit-base-patch32", "clip", "zero_shot", _banner(log, "px"), "px", _banner(log, "image_batch")
        )
        li.add(
            "encode_models",
            {
                **subject,
                "exporter": "torch_neuronx.trace",
                "status": "ok",
                "reason": f"optimum-neuron export refused first: {refusal.group(1)}" if refusal else None,
                "cache": _cache(log),
                "ts": captured,
            },
        )
        li.add(
            "encode_numerics",
            {
                **subject,
                "reference": "the source's check: finite probabilities from the compiled graph (no CPU fp32 run)",
                "verdict": "nan",
                "reason": str(d.get("reason") or d.get("status")),
                "ts": captured,
            },
        )
        li.paths += [p for p in (CLIP, EXTRAS + "clip.log") if p in files]
        _telemetry(li, tree, files, "clip", captured)
        li.ended_at = max(filter(None, [li.ended_at, captured]), default=None)
    if SIGLIP in files:
        d = load_json(tree, SIGLIP)
        captured = parse_time(d.get("captured"))
        subject = _subject(str(d.get("model") or "google/siglip-base-patch16-224"), "siglip", "zero_shot", 224, "px", 1)
        refused = d.get("status") == "export_unsupported"
        li.add(
            "encode_models",
            {
                **subject,
                "exporter": "optimum-neuron",
                "status": "export_refused" if refused else "compile_failed",
                "reason": str(d.get("reason") or d.get("status")),
                "ts": captured,
            },
        )
        li.paths += [p for p in (SIGLIP, EXTRAS + "siglip.log") if p in files]
        _telemetry(li, tree, files, "siglip", captured)
        li.ended_at = max(filter(None, [li.ended_at, captured]), default=None)
    return li
