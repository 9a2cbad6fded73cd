"""The encode lane's gate and views on a fake task (a seeded linear layer: no transformers): a backend returning NaN
and one diverging from the CPU fp32 reference are numerics exclusions with their evidence and no speed rows; one
that matches is timed, and its rows come back from the views as percentiles, items/s and the encode decision, and
as REPORT.md's Encoders section. Bad workload specs and input files are one line naming the field or the file."""

from __future__ import annotations

import struct
import wave
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from agents.encoders.measure import measure_workload
from agents.encoders.models import EncoderTask
from agents.encoders.numerics import compare
from agents.encoders.placement import ExportRefusedError, place
from analytics.report.comparison import existing_views
from analytics.report.document import Encoders
from analytics.report.encoders import encoders_section
from analytics.report.encoders_md import s_encoders
from analytics.store import LocalStore
from analytics.views import connect, view_files_through
from pipeline.encoders import EncodeWorkload
from pipeline.lane_configs.encode import Config
from tests.support.views import q

T0 = datetime(2026, 12, 1, tzinfo=timezone.utc)
EXPORT = "ValueError: Dictionary inputs to traced functions must have consistent type"


def _workload(name: str, **kw) -> EncodeWorkload:
    spec = {
        "name": name,
        "modality": "text_embedding",
        "model": "tiny-bert-embedding",
        "batch_sizes": [1, 4],
        "shapes": [8],
        "items": 6,
        "slo": {"p99_ms": 10_000.0},
    }
    return EncodeWorkload.model_validate({**spec, **kw})


def _fake_build(w: EncodeWorkload, shape: int, seed: int) -> EncoderTask:
    import torch

    torch.manual_seed(seed)
    layer = torch.nn.Linear(shape, 4)
    return EncoderTask(
        w.model,
        w.family,
        w.modality,
        shape,
        {"encoder": layer},
        lambda b: {"encoder": [np.zeros((b, shape), dtype=np.float32)]},
        lambda items: [np.asarray(items, dtype=np.float32)],
        lambda calls, batch: calls["encoder"](batch[0])[0],
    )


def _items_as_vectors(monkeypatch):
    """The fake task's items: seeded vectors of the shape's width, whatever the modality."""
    import agents.encoders.measure as measure

    monkeypatch.setattr(
        measure,
        "raw_items",
        lambda w, shape, seed, inputs: list(np.random.default_rng(seed).standard_normal((w.items, shape))),
    )


def _corrupting(kind: str):
    def place_fn(module, example, *, backend, key, cache_dir, **_neuron):
        graph = place(module, example, backend="cpu", key=key)
        if kind == "nan":
            bad = lambda *a: tuple(np.full_like(o, np.nan) for o in graph.call(*a))  # noqa: E731
        elif kind == "diverged":
            bad = lambda *a: tuple(-o for o in graph.call(*a))  # noqa: E731
        elif kind == "fallback":  # the exporter refused, the trace placed it (neuron path auto)
            return replace(
                graph, backend=backend, path="torch_neuronx.trace", refusal=f"optimum-neuron export: {EXPORT}"
            )
        elif kind == "refused":
            raise ExportRefusedError(
                "KeyError: \"fake is not supported yet for transformers. Only ['bert'] are supported\""
            )
        else:
            return replace(graph, backend=backend)
        return replace(graph, call=bad, backend=backend)

    return place_fn


def _measure(kind: str, name: str, **kw):
    return measure_workload(
        _workload(name, **kw),
        backend="neuron",
        seed=0,
        calls=3,
        warmup=1,
        cache_dir=None,
        place_fn=_corrupting(kind),
        build=_fake_build,
    )


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    _items_as_vectors(mp)
    try:
        rows = {k: _measure(k, k) for k in ("ok", "nan", "diverged", "refused", "fallback")}
    finally:
        mp.undo()
    store = LocalStore(tmp_path_factory.mktemp("enc") / "results")
    w = store.begin_attempt("e1", "encode")
    for table in ("models", "numerics", "calls"):
        w.add_rows(f"encode_{table}", [r for k in rows for r in getattr(rows[k], table)])
    w.add_rows(
        "lane_runs",
        [
            {
                "status": "succeeded",
                "supersedes": True,
                "started_at": T0,
                "ended_at": T0 + timedelta(seconds=5),
                "backend": "neuron",
                "host": "box",
                "box_role": "inf2",
                "instance_type": "inf2.xlarge",
            }
        ],
    )
    w.commit("succeeded")
    con = connect(store, view_files=view_files_through("48_report_encoders.sql"))
    return rows, con


def test_nan_and_diverging_outputs_are_numerics_exclusions_with_evidence_and_no_speed_rows(results):
    rows, con = results
    assert [n["verdict"] for n in rows["nan"].numerics] == ["nan", "nan"]
    assert rows["nan"].numerics[0]["nan_count"] == 6 * 4 and rows["nan"].calls == []
    assert [n["verdict"] for n in rows["diverged"].numerics] == ["diverged", "diverged"]
    assert rows["diverged"].numerics[0]["min_cosine"] == pytest.approx(-1.0) and rows["diverged"].calls == []
    assert [m["status"] for m in rows["refused"].models] == ["export_refused", "export_refused"]
    assert rows["refused"].numerics == [] and rows["refused"].calls == []
    excluded = q(con, "SELECT kind, subject, reason FROM report_exclusions WHERE lane = 'encode' ORDER BY ALL")
    kinds = sorted({(r["kind"], r["subject"].split(" (")[1].split(",")[0]) for r in excluded})
    assert kinds == [
        ("export_refused", "fallback"),
        ("export_refused", "refused"),
        ("numerics_excluded", "diverged"),
        ("numerics_excluded", "nan"),
    ]
    fallback = (
        f"optimum-neuron export refused first: optimum-neuron export: {EXPORT} (placed by torch_neuronx.trace instead)"
    )
    assert fallback in {r["reason"] for r in excluded}
    assert any("24 of 24 output values are NaN" in r["reason"] for r in excluded)
    assert any("fake is not supported yet" in r["reason"] for r in excluded)
    timed = q(con, "SELECT DISTINCT workload FROM report_encoders WHERE n IS NOT NULL")
    assert sorted(r["workload"] for r in timed) == ["fallback", "ok"]  # the trace fallback is measured


def test_a_matching_backend_is_timed_and_its_percentiles_items_and_decision_come_back(results):
    rows, con = results
    assert [n["verdict"] for n in rows["ok"].numerics] == ["pass", "pass"]
    calls = rows["ok"].calls
    assert len(calls) == 3 * 6 + 3 * 2  # 3 passes of 6 batches of 1, and of 2 batches of 4 (the last short)
    assert [c["items"] for c in calls if c["batch_size"] == 4] == [4, 2] * 3
    stats = {r["batch_size"]: r for r in q(con, "SELECT * FROM report_encoders WHERE workload = 'ok'")}
    for b in (1, 4):
        lat = sorted(c["latency_ms"] for c in calls if c["batch_size"] == b)
        assert stats[b]["n"] == len(lat) and stats[b]["p50_ms"] == pytest.approx(float(np.percentile(lat, 50)))
        assert stats[b]["items_per_s"] == pytest.approx(6 * 3 / (sum(lat) / 1000.0))
        assert stats[b]["rtf"] is None and stats[b]["headline"]
    decision = q(con, "SELECT * FROM report_encode_decision WHERE workload = 'ok'")
    assert len(decision) == 1 and decision[0]["meets_slo"] and decision[0]["batch_size"] == 4
    assert decision[0]["usd_per_1k_items"] == pytest.approx(0.76 / (stats[4]["items_per_s"] * 3600) * 1000)
    section = encoders_section(con, existing_views(con))
    text = "\n".join(s_encoders(type("C", (), {"encoders": Encoders(**section)})()))
    assert "## Encoders" in text and "### Encode decision" in text and "24 of 24 output values are NaN" in text


def test_the_gate_compares_rows_by_cosine_and_error():
    want = np.array([[1.0, 0.0], [0.0, 2.0]])
    assert compare(want + 1e-4, want, min_cosine=0.99, max_abs_err=0.01).verdict == "pass"
    off = compare(want + [[0, 0], [0, 0.5]], want, min_cosine=0.99, max_abs_err=0.01)
    assert off.verdict == "diverged" and off.max_abs_err == pytest.approx(0.5) and "max abs error 0.5" in off.reason
    inf = compare(np.array([[np.inf, 0.0], [0.0, 2.0]]), want, min_cosine=0.99, max_abs_err=0.01)
    assert (inf.verdict, inf.nan_count, inf.min_cosine) == ("nan", 1, pytest.approx(1.0))


def _wav(path, frames: int) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(b"".join(struct.pack("<h", (i * 37) % 2000) for i in range(frames)))


def test_bad_specs_and_input_files_are_one_line_naming_the_field_or_the_file(tmp_path):
    base = {"name": "w", "modality": "speech_to_text", "model": "tiny-whisper", "batch_sizes": [1], "shapes": [1]}
    (tmp_path / "empty.wav").write_bytes(b"")
    _wav(tmp_path / "silent.wav", 0)
    (tmp_path / "x.png").write_bytes(b"\x89PNG not really")
    (tmp_path / "t.jsonl").write_text('{"text": "fine"}\n{"txt": "wrong key"}\n')
    cases = [
        ({"model": "tiny-nope"}, "encoders.0.model: unknown encoder model 'tiny-nope'"),
        ({"model": "tiny-clip"}, "encoders.0.modality: tiny-clip is a clip model: it runs image_embedding, zero_shot"),
        ({"slo": {"p99_ms": 0}}, "encoders.0.slo.p99_ms:"),
        ({"slo": {}}, "encoders.0.slo.p99_ms: Field required"),
        ({"shapes": [31]}, "encoders.0.shapes.0: speech_to_text shapes are in s, within [1, 30], got 31"),
        ({"inputs": str(tmp_path / "empty.wav")}, f"{tmp_path / 'empty.wav'}: not a PCM WAV file"),
        ({"inputs": str(tmp_path / "silent.wav")}, f"{tmp_path / 'silent.wav'}: no audio frames"),
        ({"inputs": str(tmp_path / "nope")}, "no such file or directory"),
        (
            {"modality": "zero_shot", "model": "tiny-clip", "shapes": [32], "inputs": str(tmp_path / "x.png")},
            f"{tmp_path / 'x.png'}: not a PNG, JPEG, GIF, BMP or WebP image",
        ),
        (
            {
                "modality": "text_embedding",
                "model": "tiny-bert-embedding",
                "shapes": [16],
                "inputs": str(tmp_path / "t.jsonl"),
            },
            f"{tmp_path / 't.jsonl'}:2: an object with non-empty 'text'",
        ),
    ]
    for change, line in cases:
        with pytest.raises(ValueError) as exc:
            Config(encoders=[{**base, **change}])
        assert line in str(exc.value) and "\n" not in str(exc.value), (change, str(exc.value))
    _wav(tmp_path / "ok.wav", 800)
    assert Config(encoders=[{**base, "inputs": str(tmp_path / "ok.wav")}]).encoders[0]["inputs"].endswith("ok.wav")
    assert Config(encoders=[{**base, "inputs": "s3://bucket/audio/"}]).encoders[0]["inputs"] == "s3://bucket/audio/"
