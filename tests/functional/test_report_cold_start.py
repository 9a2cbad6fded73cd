"""Cold start as a result (analytics/views/sql/40_report_cold_start.sql): per box boot, the phases from the start
request to the first token, NULL where a mark is missing (never 0), the compile cache each boot seeded, and the
Cold start table under Compile in REPORT.md."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from analytics.report.comparison import build_comparison
from analytics.report.document import Comparison
from analytics.report.markdown import render
from analytics.schema import conform
from analytics.store import LocalStore
from analytics.views import connect
from tests.support import attempts
from tests.support.views import q

T0 = datetime(2026, 7, 1, 12, 0, tzinfo=timezone.utc)


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def lane_row(box_role="inf2", **extra):
    return attempts.lane_row(
        **{
            "wall_s": 3600.0,
            "box_role": box_role,
            "instance_type": f"{box_role}.xlarge",
            "instance_id": f"i-{box_role}",
            **extra,
        }
    )


def commit(store, run_id, lane, attempt="a1", lane_runs=None, **tables):
    attempts.commit(store, run_id, lane, attempt, lane_runs=lane_runs or lane_row(), **tables)


def boot(box_role="inf2", segment=0, start=0.0, **extra):
    """A box boot whose marks follow the start request by fixed steps (seconds after T0 + start)."""
    row = {
        "box_role": box_role,
        "segment": segment,
        "instance_id": f"i-{box_role}",
        "instance_type": f"{box_role}.xlarge",
        "boot_id": f"b-{box_role}-{segment}",
        "backend": "neuron",
        "start_requested_at": at(start),
        "kernel_boot_at": at(start + 40),
        "boot_done_at": at(start + 100),
        "sync_started_at": at(start + 130),
        "harness_synced_at": at(start + 160),
        "cache_seeded_at": at(start + 170),
        "seed_entries_fetched": 12,
        "seed_bytes_fetched": 1_200_000_000,
        "seed_entries_present": 3,
        "seed_s": 10.0,
        "push_entries": 2,
        "push_bytes": 5_000,
        "push_s": 1.5,
        "cache_uri": "s3://b/neff-cache/",
        "cache_namespace": "neuronx-cc-2.19",
        "ts": at(start + 3000),
    }
    return {**row, **extra}


def compile_row(ts: float, wall_s: float, cache="cold", basis="s3", succeeded=True, config="tp2-bs8"):
    return {
        "what": "serving_config",
        "model": "m",
        "config": config,
        "cache": cache,
        "cache_basis": basis,
        "cache_scope": "shared_compiler_cache",
        "wall_s": wall_s,
        "succeeded": succeeded,
        "ts": at(ts),
        "error": None if succeeded else "ServerBootError: exited 1",
    }


def request(i: int, sent: float, ttft: float = 0.25, success=True, warmup=False):
    return {
        "point_id": "p1",
        "request_id": f"r{i}",
        "request_index": i,
        "warmup": warmup,
        "t_sent_ns": i,
        "t_scheduled_ns": i,
        "t_done_ns": i + 1,
        "ttft_s": ttft if success else None,
        "e2el_s": 1.0,
        "success": success,
        "sent_at": at(sent),
    }


@pytest.fixture()
def store(tmp_path):
    return LocalStore(tmp_path / "results")


def test_the_schemas_are_registered_and_conform_rows():
    t = conform("box_boots", [boot()], defaults={"run_id": "r", "lane": "boot@inf2.w0", "attempt": "a"})
    assert t.num_rows == 1 and str(t.schema.field("start_requested_at").type) == "timestamp[us, tz=UTC]"
    assert str(t.schema.field("segment").type) == "int32"
    p = conform(
        "preflight_checks",
        [{"check": "venv.vllm", "status": "pass", "duration_s": 0.1}],
        defaults={"run_id": "r", "lane": "preflight@inf2", "attempt": "a"},
    )
    assert p.column("reason").to_pylist() == [None]


def test_every_phase_from_start_request_to_first_token(store):
    commit(store, "r1", "boot@inf2.w0", box_boots=[boot()])
    # a failed boot first, then the healthy one (started at 200 s, healthy at 500 s); another box's boot is ignored
    commit(
        store,
        "r1",
        "serve_sweep",
        compiles=[
            compile_row(180, 20, succeeded=False),
            compile_row(200, 300),
            compile_row(900, 30, cache="warm", basis="observed", config="b"),
        ],
        requests=[request(0, 490), request(1, 520, ttft=0.5), request(2, 510, success=False)],
    )
    commit(store, "r1", "sft", lane_runs=lane_row("trn1"), compiles=[compile_row(190, 5)])
    con = connect(store)
    [r] = q(con, "SELECT * FROM cold_start")
    assert (
        r["instance_start_s"],
        r["os_setup_s"],
        r["agent_registered_s"],
        r["harness_sync_s"],
        r["cache_seed_s"],
    ) == (40.0, 60.0, 30.0, 30.0, 10.0)
    assert r["server_boot_at"] == at(200) and r["server_healthy_at"] == at(500) and r["server_boot_s"] == 300.0
    assert r["server_healthy_s"] == pytest.approx(330.0)  # cache seeded (170 s) -> healthy (500 s)
    assert r["first_token_at"] == at(520.5) and r["first_token_lane"] == "serve_sweep"
    assert r["first_token_s"] == pytest.approx(20.5)  # the request sent before healthy (490 s) is not after the boot
    assert r["total_s"] == pytest.approx(520.5) and r["total_min"] == pytest.approx(520.5 / 60)
    assert (r["serving_config"], r["serving_cache"], r["serving_cache_basis"]) == ("tp2-bs8", "cold", "s3")
    assert r["missing"] is None
    [cache] = q(con, "SELECT * FROM boot_compile_cache")
    assert (cache["seed_entries_fetched"], cache["seed_entries_present"], cache["seed_bytes_fetched"]) == (
        12,
        3,
        1_200_000_000,
    )
    assert (
        cache["serving_boots"],
        cache["serving_boots_failed"],
        cache["serving_cold"],
        cache["serving_warm"],
        cache["serving_from_s3"],
    ) == (3, 1, 2, 1, 2)
    assert cache["serving_cache_labels"] == "cold/s3 ×2, warm/observed ×1"


def test_a_local_boot_has_no_instance_start_and_no_total_never_zero(store):
    commit(
        store,
        "r1",
        "boot@local.w0",
        lane_runs=lane_row("local", backend="cpu", instance_id=None),
        box_boots=[
            boot(
                "local",
                start_requested_at=None,
                instance_id=None,
                instance_type=None,
                cache_seeded_at=None,
                seed_entries_fetched=None,
                seed_s=None,
            )
        ],
    )
    commit(
        store,
        "r1",
        "serve_sweep",
        lane_runs=lane_row("local", backend="cpu", instance_id=None),
        compiles=[compile_row(200, 10, cache="none", basis=None)],
        requests=[request(0, 215)],
    )
    con = connect(store)
    [r] = q(con, "SELECT * FROM cold_start")
    assert r["instance_start_s"] is None and r["total_s"] is None and r["total_min"] is None
    assert r["cache_seed_s"] is None and r["server_healthy_s"] is None  # no seed ran: both phases touching it NULL
    assert r["os_setup_s"] == 60.0 and r["harness_sync_s"] == 30.0
    # the serving boot is still found (anchored on the latest earlier mark), so its first token is measured
    assert r["server_healthy_at"] == at(210) and r["first_token_s"] == pytest.approx(5.25)
    assert r["missing"] == "start_requested_at, cache_seeded_at"
    [cache] = q(con, "SELECT * FROM boot_compile_cache")
    assert cache["seed_entries_fetched"] is None and cache["serving_cache_labels"] == "none/? ×1"
    text = render(Comparison.model_validate(build_comparison(con, ["r1"], with_deltas=False)))
    row = next(ln for ln in text.splitlines() if ln.startswith("| r1 | local | 0 |"))
    assert "| NULL | 60.00 | 30.00 | 30.00 | NULL | NULL | 5.25 | NULL |" in row  # never 0
    assert "- local segment 0: missing start_requested_at, cache_seeded_at." in text


@pytest.mark.parametrize("sandboxed", [False, True])
def test_each_boot_of_a_box_gets_the_serving_boots_of_its_own_segment(store, sandboxed):
    # a sandboxed box (the rehearsal's) shares the host's kernel: no kernel boot time, the same boot id
    extra = {"kernel_boot_at": None, "boot_id": "host-boot"} if sandboxed else {}
    commit(store, "r1", "boot@inf2.w0", box_boots=[boot(segment=0, start=0, ts=at(3500), **extra)])
    commit(store, "r1", "boot@inf2.w1", box_boots=[boot(segment=1, start=2000, **extra)])
    # segment 0's server booted, but its first request came only after the box's next boot: not segment 0's token
    commit(store, "r1", "serve_sweep", compiles=[compile_row(300, 200)], requests=[request(0, 600)])
    commit(store, "r1", "limits", compiles=[compile_row(250, 10, config="probe")], requests=[request(0, 2100)])
    commit(
        store,
        "r1",
        "sustained",
        compiles=[compile_row(2300, 50, cache="warm", basis="observed")],
        requests=[request(0, 2400)],
    )
    con = connect(store)
    rows = {r["segment"]: r for r in q(con, "SELECT * FROM cold_start")}
    assert rows[0]["server_healthy_at"] == at(260) and rows[0]["serving_lane"] == "limits"
    assert rows[0]["first_token_at"] == at(600.25) and rows[0]["first_token_lane"] == "serve_sweep"
    assert rows[1]["server_healthy_at"] == at(2350) and rows[1]["serving_lane"] == "sustained"
    assert rows[1]["first_token_s"] == pytest.approx(50.25) and rows[1]["total_s"] == pytest.approx(400.25)
    assert (rows[0]["instance_start_s"] is None) is sandboxed and (rows[0]["os_setup_s"] is None) is sandboxed
    labels = {r["segment"]: r["serving_cache_labels"] for r in q(con, "SELECT * FROM boot_compile_cache")}
    assert labels == {0: "cold/s3 ×2", 1: "warm/observed ×1"}


def test_a_boot_with_no_serving_boot_says_so(store):
    commit(store, "r1", "boot@trn1.w0", lane_runs=lane_row("trn1"), box_boots=[boot("trn1")])
    [r] = q(connect(store), "SELECT * FROM cold_start")
    assert r["server_healthy_at"] is None and r["first_token_s"] is None and r["total_s"] is None
    assert r["instance_start_s"] == 40.0
    assert r["missing"] == "server healthy (no successful serving boot on this box boot)"


def test_report_shows_the_cold_start_table_under_compile_and_rebuilds_identically(store, tmp_path):
    commit(store, "r1", "boot@inf2.w0", box_boots=[boot()])
    commit(store, "r1", "serve_sweep", compiles=[compile_row(200, 300)], requests=[request(0, 510)])

    def build():
        return render(Comparison.model_validate(build_comparison(connect(store), ["r1"], with_deltas=False)))

    text = build()
    assert build() == text
    compile_at, cold_at = text.index("## Compile: cold vs warm cache"), text.index("### Cold start")
    assert compile_at < cold_at < text.index("## Training")
    header = next(ln for ln in text.splitlines() if ln.startswith("| run | box | segment | instance |"))
    assert "instance start s" in header and "first token s" in header and "total min" in header
    row = next(ln for ln in text.splitlines() if ln.startswith("| r1 | inf2 | 0 |"))
    assert "| 40.00 | 60.00 | 30.00 | 30.00 | 10.00 | 330.00 | 10.25 | 8.50 | tp2-bs8 | cold |" in row
    assert "| neuronx-cc-2.19 | 12 | 3 | 1,200,000,000 | 10.00 | 2 | 5000 | 1 | cold/s3 ×1 |" in text


def test_a_first_token_after_the_box_booted_again_is_not_this_boots(store):
    commit(store, "r1", "boot@inf2.w0", box_boots=[boot(segment=0, start=0, ts=at(3500))])
    commit(store, "r1", "boot@inf2.w1", box_boots=[boot(segment=1, start=2000)])
    commit(store, "r1", "serve_sweep", compiles=[compile_row(300, 200)], requests=[request(0, 2400)])
    rows = {r["segment"]: r for r in q(connect(store), "SELECT * FROM cold_start")}
    assert rows[0]["server_healthy_at"] == at(500) and rows[0]["first_token_at"] is None
    assert rows[0]["total_s"] is None
    assert rows[0]["missing"] == "first token (no successful request on this box after the server was healthy)"
    assert rows[1]["server_healthy_at"] is None  # the serving boot ran before this boot's anchor
