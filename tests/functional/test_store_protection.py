"""The store protects itself (rule 16): no writer aims inside or around a store, `verify --repair` leaves a
nested store and everything any marker names alone, a marker stripped of its checks is never "clean", sequence
claims are checked, and imports refuse what would read as a measurement that is not one."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest

from analytics.store import LocalStore
from analytics.store.integrity import plan_reads, reset_warnings
from analytics.store.locate import IDENTITY, Relation, StoreOverlapError, store_relation
from analytics.store.verify import verify_store
from control_plane.cli import main
from tests.support import attempts

T0 = datetime(2026, 7, 1, 12, tzinfo=timezone.utc)
ROOT = Path(__file__).resolve().parents[1]
VLLM_DEFAULT = ROOT / "fixtures" / "vllm_bench" / "default.json"
TNX = ROOT / "fixtures" / "torchneuronx"
LOAD = [
    "loadgen",
    "--base-url",
    "http://127.0.0.1:9",
    "--input-len",
    "8",
    "--output-len",
    "4",
    "--concurrency",
    "1",
    "--num-prompts",
    "1",
]


def _lane_row():
    """A second's attempt whose clock does not move (its end is its start), on no box."""
    return {**attempts.lane_row("succeeded", 1.0, None, None, "cpu", "h", T0), "ended_at": T0}


def small_store(root: Path, run_id: str = "r1", lane: str = "host_cpu", log: Path | None = None) -> LocalStore:
    store = LocalStore(root)
    w = store.begin_attempt(run_id, lane)
    w.add_rows("host_bench", [{"bench": "triad", "threads": t, "value": 10.0 + t, "unit": "GB/s"} for t in (1, 2)])
    w.add_rows("lane_runs", [_lane_row()])
    if log is not None:
        w.add_file(w.log_key("lane.log"), log)
    w.commit("succeeded")
    return store


def snapshot(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            out[os.path.relpath(os.path.join(dirpath, name), root) + "/"] = "dir"
        for name in filenames:
            p = os.path.join(dirpath, name)
            out[os.path.relpath(p, root)] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
    return out


def problem_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith("usage:") and not ln.startswith(" ")]


def cli(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture()
def no_lanes(monkeypatch):
    """`run --local` must refuse before any lane starts: a lane launcher that fails the test if reached."""
    import control_plane.local

    def accepted(*args, **kwargs):
        raise AssertionError("input accepted: lanes would have run")

    for name in ("run_local", "run_plan"):
        monkeypatch.setattr(control_plane.local, name, accepted, raising=False)


# ---- 1. the nested-store chain: refused, then (made by hand) left alone by repair, and still whole -------------


def test_a_store_inside_a_store_is_refused_and_one_made_by_hand_survives_repair_whole(tmp_path, capsys, no_lanes):
    outer_root = tmp_path / "STORE"
    small_store(outer_root)
    inner_root = outer_root / "v1" / "host_bench"
    before = snapshot(outer_root)

    code, _out, err = cli(
        ["run", "--local", "--lanes", "provenance", "--results", str(inner_root), "--run-id", "inner", "--no-live"],
        capsys,
    )
    lines = problem_lines(err)
    assert code == 2 and len(lines) == 1 and str(outer_root) in lines[0] and "inside" in lines[0], err
    assert snapshot(outer_root) == before

    # an older tool (or a hand copy) put a whole store there anyway: no identity file, only its layout
    log = tmp_path / "lane.log"
    log.write_text("inner lane log\n")
    elsewhere = tmp_path / "elsewhere"
    small_store(elsewhere, run_id="inner", lane="provenance", log=log)
    shutil.copytree(elsewhere, inner_root, dirs_exist_ok=True)
    (inner_root / IDENTITY).unlink()
    inner_files = {k: v for k, v in snapshot(inner_root).items() if v != "dir"}
    # the inner store's 2 tables, log, claim and marker, and the outer store's own host_bench file beside them
    assert len(inner_files) == 6 and any(k.startswith("v1/_commits/run_id=inner/") for k in inner_files)

    code, out, _err = cli(["verify", "--results", str(outer_root), "--repair", "--min-age-hours", "0"], capsys)
    assert "nested store at v1/host_bench: left alone" in out, out
    assert not [ln for ln in out.splitlines() if ln.startswith("orphaned") and "v1/host_bench/" in ln]
    assert code == 1  # a store inside a store is a problem repair cannot fix: a person moves it out
    assert {k: v for k, v in snapshot(inner_root).items() if v != "dir"} == inner_files

    code, out, err = cli(["verify", "--results", str(inner_root)], capsys)
    assert code == 0 and "checked 1 marker(s)" in out and out.rstrip().endswith("clean"), out
    assert str(outer_root) in err  # said, once, where it sits
    code, _out, err = cli(["verify", "--results", str(inner_root), "--repair"], capsys)
    assert code == 2 and len(problem_lines(err)) == 1 and str(outer_root) in err


def test_the_commit_protocol_refuses_a_root_inside_or_around_a_store(tmp_path):
    outer = small_store(tmp_path / "a" / "store")
    before = snapshot(tmp_path)
    for root, where in ((outer.path / "v1", "inside"), (tmp_path / "a", "contains")):
        with pytest.raises(StoreOverlapError) as caught:
            LocalStore(root).begin_attempt("x", "host_cpu")
        assert where in str(caught.value) and str(outer.path) in str(caught.value)
    assert snapshot(tmp_path) == before
    assert store_relation(outer.path).kind is Relation.IS_STORE
    assert store_relation(outer.path / "v1" / "anything").kind is Relation.INSIDE
    assert store_relation(tmp_path).kind is Relation.CONTAINS
    assert store_relation(tmp_path / "b").kind is Relation.UNRELATED


# ---- 2. every writer refuses a path inside or around a store ----------------------------------------------------

WRITERS = [
    ("run-results-inside", ["run", "--local", "--lanes", "host_cpu", "--results", "{store}/v1/host_bench"], "store"),
    ("run-results-around", ["run", "--local", "--lanes", "host_cpu", "--results", "{around}"], "store"),
    (
        "run-report-inside",
        ["run", "--local", "--lanes", "host_cpu", "--results", "{fresh}", "--report", "{store}/v1"],
        "store",
    ),
    (
        "run-report-own-store",
        ["run", "--local", "--lanes", "host_cpu", "--results", "{fresh}", "--report", "{fresh}/rep"],
        "fresh",
    ),
    (
        "import-vllm-inside",
        [
            "import",
            "vllm-bench",
            str(VLLM_DEFAULT),
            "--label",
            "x",
            "--instance-type",
            "t",
            "--results",
            "{store}/v1/x",
        ],
        "store",
    ),
    (
        "import-vllm-around",
        ["import", "vllm-bench", str(VLLM_DEFAULT), "--label", "x", "--instance-type", "t", "--results", "{around}"],
        "store",
    ),
    ("import-tnx-inside", ["import", "torchneuronx", str(TNX), "--results", "{store}/v1"], "store"),
    ("import-tnx-around", ["import", "torchneuronx", str(TNX), "--results", "{around}"], "store"),
    ("pull-to-inside", ["pull", "--from", "{store}", "--to", "{store}/v1/mirror"], "store"),
    ("pull-to-around", ["pull", "--from", "{store}", "--to", "{around}"], "store"),
    (
        "pull-duckdb-inside",
        ["pull", "--from", "{store}", "--to", "{fresh}", "--duckdb", "{store}/v1/x.duckdb"],
        "store",
    ),
    (
        "pull-duckdb-in-mirror",
        ["pull", "--from", "{store}", "--to", "{fresh}", "--duckdb", "{fresh}/x.duckdb"],
        "fresh",
    ),
    ("report-out-inside", ["report", "--results", "{store}", "--out", "{store}/v1"], "store"),
    ("report-out-is-store", ["report", "--results", "{store}", "--out", "{store}"], "store"),
    ("report-out-around", ["report", "--results", "{store}", "--out", "{around}"], "store"),
    ("loadgen-json-inside", [*LOAD, "--save-vllm-json", "{store}/v1/x.json"], "store"),
    ("loadgen-json-in-store", [*LOAD, "--save-vllm-json", "{store}/x.json"], "store"),
    ("loadgen-json-own-store", [*LOAD, "--results", "{fresh}", "--save-vllm-json", "{fresh}/x.json"], "fresh"),
    ("loadgen-results-inside", [*LOAD, "--results", "{store}/v1/lg"], "store"),
    ("loadgen-results-around", [*LOAD, "--results", "{around}"], "store"),
]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("protect")
    store = small_store(root / "around" / "store")
    return root, {"store": str(store.path), "around": str(root / "around"), "fresh": str(root / "fresh")}


@pytest.mark.parametrize("case", WRITERS, ids=[c[0] for c in WRITERS])
def test_every_writer_refuses_a_path_inside_or_around_a_store(case, world, capsys, no_lanes):
    _name, argv, named = case
    root, paths = world
    before = snapshot(root)
    code, out, err = cli([a.format(**paths) for a in argv], capsys)
    lines = problem_lines(err)
    assert code == 2, (code, out[-300:], err[-300:])
    assert len(lines) == 1 and paths[named] in lines[0], lines
    assert snapshot(root) == before


def test_verify_refuses_a_path_that_is_not_a_store(tmp_path, capsys):
    store = small_store(tmp_path / "holder" / "store")
    (tmp_path / "empty").mkdir()
    for path, fragment in (
        (tmp_path / "empty", "not a results store"),
        (tmp_path / "holder", "contains one"),
        (store.path / "v1", "inside the results store"),
    ):
        code, out, err = cli(["verify", "--results", str(path)], capsys)
        lines = problem_lines(err)
        assert code == 2 and len(lines) == 1 and fragment in lines[0] and not out, (path, err)


# ---- 3. a marker stripped of its checks is never clean -------------------------------------------------------


def _legacy(store: LocalStore) -> Path:
    """Rewrite the store's one marker as a marker from before checksums (no format, digest, checksums)."""
    (key,) = [k for k in store.list_keys("v1/_commits/")]
    raw = json.loads((store.path / key).read_bytes())
    old = {k: v for k, v in raw.items() if k not in ("format", "digest", "checksums", "sequence")}
    (store.path / key).write_text(json.dumps(old, indent=1))
    return store.path / key


def test_a_legacy_marker_is_reported_unchecked_and_accepted_only_when_asked(tmp_path, capsys, caplog):
    store = small_store(tmp_path / "old")
    key = _legacy(store)
    code, out, _err = cli(["verify", "--results", str(store.path)], capsys)
    assert code == 3 and "unchecked (legacy marker format)" in out and not out.rstrip().endswith("clean"), out
    code, out, _err = cli(["verify", "--results", str(store.path), "--allow-legacy-markers"], capsys)
    assert code == 0 and "unchecked" in out and "accepted" in out and not out.rstrip().endswith("clean")
    reset_warnings()
    with caplog.at_level(logging.WARNING, logger="analytics"):
        plan = plan_reads(store)
    assert [m.attempt for m in plan.unchecked] == [key.stem]
    assert any("unchecked (legacy marker format)" in r.getMessage() for r in caplog.records)


def test_a_flipped_parquet_under_a_legacy_marker_is_not_clean_and_a_stripped_digest_is_damage(tmp_path, capsys):
    store = small_store(tmp_path / "old")
    _legacy(store)
    (table,) = [k for k in store.list_keys("v1/host_bench/")]
    path = store.path / table
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x5A
    path.write_bytes(bytes(data))
    code, out, _err = cli(["verify", "--results", str(store.path)], capsys)
    assert code != 0 and not out.rstrip().endswith("clean"), out

    other = small_store(tmp_path / "new")
    (key,) = other.list_keys("v1/_commits/")
    raw = json.loads((other.path / key).read_bytes())
    (other.path / key).write_text(json.dumps({k: v for k, v in raw.items() if k != "digest"}, indent=1))
    report = verify_store(other)
    assert report.exit_code(allow_legacy=True) == 1
    assert any(f.kind == "corrupt" and "without its digest" in f.reason for f in report.findings)


# ---- 4. sequence claims ----------------------------------------------------------------------------------------


def test_sequence_claims_are_checked(tmp_path):
    store = small_store(tmp_path / "s")
    assert verify_store(store).clean
    store.begin_attempt("r1", "sft")  # claimed, then the writer stopped before its first file
    report = verify_store(store)
    assert report.clean and [f.kind for f in report.findings] == ["unused"]
    seq = store.path / "v1" / "_seq"
    (seq / "run_id=r1" / "lane=host_cpu" / "notes.txt").write_text("hello")
    (seq / "run_id=r1" / "lane=host_cpu" / "00000007").write_text("not json")
    (claim,) = [p for p in (seq / "run_id=r1" / "lane=host_cpu").iterdir() if p.name == "00000001"]
    body = json.loads(claim.read_text())
    claim.write_text(json.dumps({**body, "stamp": "20200101T000000000000Z-abcdef"}))
    kinds = {(f.kind, Path(f.key).name) for f in verify_store(store).findings}
    assert {("stray", "notes.txt"), ("malformed", "00000007"), ("malformed", "00000001")} <= kinds
    assert verify_store(store).exit_code() == 1


# ---- 5. imports: NaN is NULL with a note, Infinity is refused, one file is one point --------------------------


def _vllm(results: Path, *files: str, extra: tuple[str, ...] = ()) -> list[str]:
    return ["import", "vllm-bench", *files, "--label", "nan", "--instance-type", "t", "--results", str(results), *extra]


def test_nan_in_an_imported_number_is_null_with_a_note_and_infinity_is_refused(tmp_path, capsys):
    from analytics.views import connect

    d = json.loads(VLLM_DEFAULT.read_text())
    d["std_ttft_ms"] = float("nan")
    (tmp_path / "nan.json").write_text(json.dumps(d))
    d["std_ttft_ms"], d["p99_tpot_ms"] = 1.0, float("inf")
    (tmp_path / "inf.json").write_text(json.dumps(d))
    results = tmp_path / "r"
    code, _out, err = cli(_vllm(results, str(tmp_path / "inf.json")), capsys)
    assert code == 2 and len(problem_lines(err)) == 1 and "p99_tpot_ms" in err and not results.exists()
    assert cli(_vllm(results, str(tmp_path / "nan.json")), capsys)[0] == 0
    ((std, note),) = connect(LocalStore(results)).execute("select std_ttft_ms, note from serving_aggregates").fetchall()
    assert std is None and "std_ttft_ms" in note and "NaN" in note

    src = tmp_path / "tnx"
    shutil.copytree(TNX, src)
    lora = src / "trn1/results/train/tiny_lora.json"
    text = lora.read_text()
    assert '"loss": 1.8' in text
    lora.write_text(text.replace('"loss": 1.8', '"loss": NaN'))
    tnx_results = tmp_path / "t"
    assert cli(["import", "torchneuronx", str(src), "--results", str(tnx_results), "--run-id", "t"], capsys)[0] == 0
    con = connect(LocalStore(tnx_results))
    losses = dict(
        con.execute("select step, loss from train_steps where lane = 'sft' and model = 'org/tiny'").fetchall()
    )
    assert losses[2] is None and losses[3] == 1.6
    (config,) = con.execute("select config_json from lane_runs where lane = 'sft'").fetchone()
    assert "loss_trace[1].loss" in json.dumps(json.loads(config)["null_reasons"])
    lora.write_text(text.replace('"peak_host_mem_mib": 100.0', '"peak_host_mem_mib": Infinity'))
    code, _out, err = cli(["import", "torchneuronx", str(src), "--results", str(tmp_path / "t2")], capsys)
    assert code == 2 and len(problem_lines(err)) == 1 and "peak_host_mem_mib" in err
    assert not (tmp_path / "t2").exists()


def test_the_same_file_twice_in_one_import_is_refused_unless_forced(tmp_path, capsys):
    from analytics.views import connect

    copy = tmp_path / "copy.json"
    copy.write_bytes(VLLM_DEFAULT.read_bytes())
    results = tmp_path / "r"
    for files in ((str(VLLM_DEFAULT), str(VLLM_DEFAULT)), (str(VLLM_DEFAULT), str(copy))):
        code, _out, err = cli(_vllm(results, *files), capsys)
        lines = problem_lines(err)
        assert code == 2 and len(lines) == 1 and "same bytes" in lines[0] and not results.exists(), err
    assert cli(_vllm(results, str(VLLM_DEFAULT), str(copy), extra=("--force",)), capsys)[0] == 0
    assert connect(LocalStore(results)).execute("select count(*) from serving_aggregates").fetchone()[0] == 2
