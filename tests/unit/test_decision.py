"""SLO sets and overrides, slo_json on sweep points, the Decision views on fixed data, REPORT.md's first section."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from importlib import resources
from types import SimpleNamespace

import duckdb
import pytest

from pipeline.servers import ServerConfig
from pipeline.slo import CPU_TINY, MLPERF_INTERACTIVE, MLPERF_SERVER, SloError, default_slo, parse_slo

DECISION_SQL = "75_report_decision.sql"


# ---- SLO sets and parsing ----------------------------------------------------------------------
def test_named_sets_carry_their_sourced_bounds_and_profile_defaults():
    assert (MLPERF_SERVER.ttft_ms, MLPERF_SERVER.tpot_ms, MLPERF_SERVER.percentile) == (2000.0, 100.0, 99.0)
    assert (MLPERF_INTERACTIVE.ttft_ms, MLPERF_INTERACTIVE.tpot_ms) == (500.0, 30.0)
    assert "llama3_1-8b.Server.ttft_latency = 2000" in MLPERF_SERVER.source and "v5.1" in MLPERF_SERVER.source
    assert default_slo("full") is MLPERF_SERVER and default_slo("tiny") is CPU_TINY
    assert set(MLPERF_SERVER.to_json()) == {"name", "ttft_ms", "tpot_ms", "percentile", "source"}
    assert parse_slo(MLPERF_SERVER.to_json()) == MLPERF_SERVER  # a point's slo_json reads back as its set


def test_overrides_parse_from_text_and_objects():
    assert parse_slo("mlperf-v5.1-llama3.1-8b-interactive") is MLPERF_INTERACTIVE
    custom = parse_slo("ttft_ms=300, tpot_ms=20,percentile=90")
    assert (custom.name, custom.ttft_ms, custom.tpot_ms, custom.percentile) == ("custom", 300.0, 20.0, 90.0)
    changed = parse_slo({"name": "cpu-tiny", "tpot_ms": 5})
    assert (changed.name, changed.ttft_ms, changed.tpot_ms) == ("cpu-tiny+override", 200.0, 5.0)


@pytest.mark.parametrize(
    "bad, says",
    [
        ("nope", "unknown SLO set 'nope'"),
        ("ttft_ms=100", "tpot_ms missing"),
        ("ttft_ms=0,tpot_ms=1", "positive"),
        ("ttft_ms=x,tpot_ms=1", "expected a number"),
        ("ttft_ms=1,tpot_ms=1,percentile=97", "no view column"),
        ("ttft_ms=1,tpot_ms=1,foo=2", "unknown key(s) foo"),
        ("ttft_ms", "unknown SLO set"),
        (7, "expected a set name"),
    ],
)
def test_bad_slo_is_one_clear_line(bad, says):
    with pytest.raises(SloError) as exc:
        parse_slo(bad)
    assert says in str(exc.value) and "\n" not in str(exc.value)


def test_request_slo_flows_into_every_serving_lane_and_lane_config_wins():
    from control_plane.models import RunRequestError, parse_request
    from control_plane.request_configs import lane_config

    req = parse_request(
        {
            "lanes": ["serve_sweep", "sft", "sustained"],
            "slo": "ttft_ms=300,tpot_ms=20",
            "lane_config": {"sustained": {"slo": "cpu-tiny"}},
        }
    )
    for lane in ("serve_sweep", "finetune_serve", "qwen3_attempt"):
        assert lane_config(req, lane)["slo"]["ttft_ms"] == 300.0
    assert lane_config(req, "sustained") == {"slo": "cpu-tiny"}
    assert lane_config(req, "sft") is None
    assert parse_request({"slo": MLPERF_SERVER.name}).slo == MLPERF_SERVER.name
    with pytest.raises(RunRequestError, match="slo: .*unknown SLO set 'bogus'"):
        parse_request({"slo": "bogus"})


def test_run_local_refuses_a_bad_slo_and_an_unpriced_price_as(tmp_path, capsys):
    from control_plane.cli import main

    assert main(["run", "--local", "--results", str(tmp_path), "--slo", "ttft_ms=5"]) == 2
    assert main(["run", "--local", "--results", str(tmp_path), "--price-as", "x9.huge"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("error: slo: tpot_ms missing")
    assert err[1].startswith("error: --price-as: no on-demand price for 'x9.huge'") and "c7i.large" in err[1]
    assert not any(tmp_path.iterdir())  # nothing written


# ---- slo_json on the points --------------------------------------------------------------------
def test_profile_defaults_per_lane():
    from agents.lanes import finetune_serve, qwen3_attempt, serve_sweep, sustained
    from pipeline.config import build_config

    for mod in (serve_sweep, finetune_serve, qwen3_attempt):
        assert build_config(mod.Config, "full").slo_json() == MLPERF_SERVER.to_json()  # Qwen3 8B too
        assert build_config(mod.Config, "tiny").slo_json() == CPU_TINY.to_json()
    assert build_config(sustained.Config, "full").slo == MLPERF_SERVER.name
    legacy = build_config(serve_sweep.Config, "full", {"slo_ttft_ms": 1000.0})
    assert legacy.slo_json()["ttft_ms"] == 1000.0 and legacy.slo_json()["name"].endswith("+override")
    with pytest.raises(ValueError, match="unknown SLO set"):
        build_config(serve_sweep.Config, "tiny", {"slo": "bogus"})


def test_every_point_the_sweep_writes_carries_slo_json(monkeypatch):
    from agents.lanes.serve_sweep import Config, settings_from
    from agents.loadgen import point as point_mod
    from agents.loadgen.records import ClockAnchor
    from agents.serving import sweep
    from agents.serving.launcher import ServedModel

    grid = SimpleNamespace(values=[1, 2, 4], reason="fixed", to_json=lambda: "{}")
    monkeypatch.setattr(sweep, "plan", lambda *a, **k: (grid, [sweep.Shape(8, 8), sweep.Shape(16, 8)], []))

    def fake_run_point(p, tok, phase_hook=None):
        row = point_mod.sweep_point_row(
            p, f"p{p.concurrency}-{p.input_len}", "tok", p.arrival(), ClockAnchor.now(), 0, 0, None
        )
        return SimpleNamespace(requests=[], sweep_point=row, metrics={})

    monkeypatch.setattr(point_mod, "run_point", fake_run_point)
    written: dict[str, list] = {}
    ctx = SimpleNamespace(
        backend="cpu",
        write=lambda t, rows: written.setdefault(t, []).extend(rows),
        progress=lambda *a: None,
        telemetry=None,
    )
    settings = settings_from(Config.for_profile("tiny"))
    # max_model_len 1024: every tiny workload fits (a profile's own workload runs only where its requests fit)
    sweep.sweep_config(
        ctx,
        "http://127.0.0.1:1",
        SimpleNamespace(server_kind="vllm"),
        ServedModel("m", None),
        ServerConfig("A", 1024, 2),
        settings,
        None,
        sweep.SweepOutcome(),
    )
    # 2 shapes x 3 concurrencies, and each of the tiny workloads at its one stream count, every repeat
    assert len(written["sweep_points"]) == (6 + len(settings.workloads)) * settings.repeats
    assert all(json.loads(r["slo_json"]) == CPU_TINY.to_json() for r in written["sweep_points"])


# ---- the Decision views on fixed data ----------------------------------------------------------
CI_COLS = (
    "output_throughput_ci_low",
    "output_throughput_ci_high",
    "goodput_ci_low",
    "goodput_ci_high",
    "p50_ttft_ms_ci_low",
    "p50_ttft_ms_ci_high",
    "p99_ttft_ms_ci_low",
    "p99_ttft_ms_ci_high",
    "p50_tpot_ms_ci_low",
    "p50_tpot_ms_ci_high",
    "p99_tpot_ms_ci_low",
    "p99_tpot_ms_ci_high",
)
SLO = json.dumps({"name": "t", "ttft_ms": 100.0, "tpot_ms": 10.0, "percentile": 99.0, "source": "test"})


def _point(run, lane, pid, conc, ttft, tpot, tput, *, valid=True, config="A", basis="requests", ci=True):
    row = {
        "run_id": run,
        "lane": lane,
        "point_id": pid,
        "model": "m",
        "server_config": config,
        "mode": "closed",
        "input_len": 64,
        "output_len": 64,
        "max_concurrency": conc,
        "metric_basis": basis,
        "completed": 10,
        "failed": 0,
        "valid": valid,
        "invalid_reason": None if valid else "client lag",
        "output_throughput": tput,
        "goodput": tput / 64,
        "p50_ttft_ms": ttft / 2,
        "p99_ttft_ms": ttft,
        "p90_ttft_ms": ttft,
        "p95_ttft_ms": ttft,
        "p50_tpot_ms": tpot / 2,
        "p99_tpot_ms": tpot,
        "p90_tpot_ms": tpot,
        "p95_tpot_ms": tpot,
        "ci_note": None if ci else "aggregate only",
    }
    for c in CI_COLS:
        row[c] = None
    if ci:
        row.update(
            output_throughput_ci_low=tput * 0.8,
            output_throughput_ci_high=tput * 1.25,
            p99_ttft_ms_ci_high=ttft * 1.1,
            p99_tpot_ms_ci_high=tpot * 1.1,
        )
    return row


def _table(con, name, rows):
    import pyarrow as pa

    con.register(f"__{name}", pa.Table.from_pylist(rows))
    con.execute(f"CREATE OR REPLACE TABLE {name} AS SELECT * FROM __{name}")


def _decision_con(points, sweep_slo, lane_rows, refs):
    con = duckdb.connect()
    _table(con, "serving_points_all", points)
    _table(
        con,
        "sweep_points",
        [
            {
                "run_id": p["run_id"],
                "lane": p["lane"],
                "point_id": p["point_id"],
                "slo_json": sweep_slo.get(p["point_id"], SLO),
                "search_json": None,
                "workload": None,
            }
            for p in points
        ],
    )
    # rule 15 (34_report_exclusions.sql's report_point_validity): every fixed point here is kept
    _table(
        con,
        "report_point_validity",
        [
            {"run_id": p["run_id"], "lane": p["lane"], "point_id": p["point_id"], "excluded_reason": None}
            for p in points
        ],
    )
    _table(con, "lane_runs", lane_rows)
    _table(
        con,
        "report_lane_attempts",
        [{"run_id": r["run_id"], "lane": r["lane"], "attempt": r["attempt"], "effective": True} for r in lane_rows],
    )
    ref_cols = {
        "run_id": "r",
        "lane": "reference",
        "point_id": "x",
        "label": "l",
        "instance_type": "i",
        "usd_per_hour": 1.0,
        "price_source": "s",
        "slo_json": SLO,
        "per_request": False,
        "source_uri": "u",
        "client": "c",
        "note": None,
    }
    _table(con, "reference_runs", refs or [ref_cols])
    if not refs:
        con.execute("DELETE FROM reference_runs")
    # the roofline's bounds (71_report_roofline.sql), empty: the Decision's % of limit is tested with the views whole
    con.execute(
        "CREATE TABLE point_bounds (run_id VARCHAR, lane VARCHAR, point_id VARCHAR, "
        "output_tokens_per_s_bound DOUBLE, hardware VARCHAR, roofline_note VARCHAR)"
    )
    sql = resources.files("analytics.views") / "sql"
    con.execute((sql / "30_prices.sql").read_text())
    con.execute((sql / DECISION_SQL).read_text())
    return con


def _lane(run, lane, **kw):
    return {
        "run_id": run,
        "lane": lane,
        "attempt": "a1",
        "box_role": "local",
        "instance_type": None,
        "priced_as": None,
        **kw,
    }


def test_decision_picks_the_highest_meeting_concurrency_and_prices_it_with_an_interval():
    points = [
        _point("r", "serve_sweep", "c1", 1, 50, 4, 100.0),
        _point("r", "serve_sweep", "c2", 2, 80, 8, 180.0),
        _point("r", "serve_sweep", "c4", 4, 90, 15, 300.0),  # TPOT misses
        _point("r", "serve_sweep", "c8", 8, 60, 5, 400.0, valid=False),  # invalid never meets
        _point("r", "serve_sweep", "b1", 1, 812, 4, 50.0, config="B"),
    ]  # nothing meets
    con = _decision_con(points, {}, [_lane("r", "serve_sweep", priced_as="c7i.large")], [])
    met = dict(con.execute("SELECT point_id, slo_met FROM slo_points").fetchall())
    assert met == {"c1": True, "c2": True, "c4": False, "c8": False, "b1": False}
    assert con.execute("SELECT slo_met_ci FROM slo_points WHERE point_id = 'c2'").fetchone()[0] is True
    cols = [
        "server_config",
        "instance",
        "max_concurrency",
        "point_id",
        "output_throughput",
        "usd_per_hour",
        "usd_per_million_output_tokens",
        "usd_per_million_output_tokens_ci_low",
        "usd_per_million_output_tokens_ci_high",
        "points",
        "points_meeting",
        "note",
    ]
    rows = {r[0]: dict(zip(cols, r)) for r in con.execute(f"SELECT {', '.join(cols)} FROM report_decision").fetchall()}
    a = rows["A"]
    assert (a["instance"], a["max_concurrency"], a["point_id"], a["points"], a["points_meeting"]) == (
        "c7i.large",
        2,
        "c2",
        4,
        2,
    )
    price = 0.08925
    assert a["usd_per_hour"] == pytest.approx(price)
    assert a["usd_per_million_output_tokens"] == pytest.approx(price / (180.0 * 3600) * 1e6)
    assert a["usd_per_million_output_tokens_ci_low"] == pytest.approx(price / (180.0 * 1.25 * 3600) * 1e6)
    assert a["usd_per_million_output_tokens_ci_high"] == pytest.approx(price / (180.0 * 0.8 * 3600) * 1e6)
    b = rows["B"]
    assert b["max_concurrency"] is None and b["usd_per_million_output_tokens"] is None
    assert b["note"] == "no point meets the SLO: lowest concurrency (c=1) p99 TTFT 812 ms > 100 ms"
    # the boundary: the next measured concurrency above the chosen one that misses, and why
    nxt = con.execute(
        "SELECT next_miss_concurrency, next_miss_reason, highest_concurrency_measured "
        "FROM report_decision WHERE server_config = 'A'"
    ).fetchone()
    assert nxt[0] == 4 and nxt[1].startswith("p99 TPOT 15.0 ms >") and nxt[2] == 8
    assert a["note"].startswith("c=4 misses: p99 TPOT 15.0 ms >")


def test_a_reference_row_appears_with_its_declared_price_and_says_it_has_no_interval():
    points = [
        _point("ref1", "reference", "h1", 16, 40, 6, 2000.0, config=None, basis="aggregate", ci=False),
        _point("r", "serve_sweep", "c1", 1, 50, 4, 100.0),
    ]
    ref = {
        "run_id": "ref1",
        "lane": "reference",
        "point_id": "h1",
        "label": "H100 vllm",
        "instance_type": "p5.48xlarge",
        "usd_per_hour": 3.0,
        "price_source": "declared at import",
        "slo_json": SLO,
        "per_request": False,
        "source_uri": "file.json",
        "client": "vllm bench serve",
        "note": None,
    }
    con = _decision_con(
        points, {"h1": None}, [_lane("r", "serve_sweep"), _lane("ref1", "reference", box_role="reference")], [ref]
    )
    got = con.execute("""SELECT instance, server_config, max_concurrency, usd_per_hour, price_source,
                                usd_per_million_output_tokens, usd_per_million_output_tokens_ci_low, note
                         FROM report_decision ORDER BY instance""").fetchall()
    assert got[1][:6] == (
        "reference: H100 vllm",
        "H100 vllm",
        16,
        3.0,
        "declared at import",
        pytest.approx(3.0 / (2000.0 * 3600) * 1e6),
    )
    assert got[1][6] is None and "reference: no per-request data, no interval" in got[1][7]
    assert got[0][0] == "local (not priced)" and got[0][3] is None
    assert "local run not priced: run --local --price-as TYPE" in got[0][7]


# ---- on the real views and the report ----------------------------------------------------------
def test_report_opens_with_the_decision_from_the_real_views(tmp_path):
    from analytics.report.comparison import build_comparison
    from analytics.report.document import Comparison
    from analytics.report.markdown import render
    from analytics.store import LocalStore
    from analytics.views import connect

    S = 1_000_000_000
    store = LocalStore(tmp_path)
    w = store.begin_attempt("r1", "serve_sweep")
    now = datetime(2026, 11, 1, tzinfo=timezone.utc)
    w.add_rows(
        "lane_runs",
        [
            {
                "status": "succeeded",
                "supersedes": True,
                "started_at": now,
                "ended_at": now,
                "backend": "cpu",
                "host": "h",
                "box_role": "local",
                "priced_as": "c7i.large",
            }
        ],
    )
    reqs = []
    for i in range(12):
        sent = i * S // 4
        chunks = [0.02, 0.025, 0.03, 0.035]
        reqs.append(
            {
                "point_id": "p1",
                "request_id": f"p1-{i}",
                "request_index": i,
                "warmup": False,
                "t_scheduled_ns": sent,
                "t_sent_ns": sent,
                "t_done_ns": sent + int(0.035 * S),
                "client_queue_s": 0.0,
                "ttft_s": 0.02,
                "e2el_s": 0.035,
                "chunk_times_s": chunks,
                "chunk_tokens": [1, 1, 1, 1],
                "prompt_tokens": 8,
                "output_tokens": 4,
                "input_len": 8,
                "output_len": 4,
                "success": True,
                "error_type": None,
                "error": None,
            }
        )
    w.add_rows("requests", reqs)
    w.add_rows(
        "sweep_points",
        [
            {
                "point_id": "p1",
                "model": "m",
                "server_config": "A",
                "mode": "closed",
                "input_len": 8,
                "output_len": 4,
                "max_concurrency": 1,
                "slo_json": json.dumps(CPU_TINY.to_json()),
            }
        ],
    )
    # rules 7 and 15: a point without telemetry is excluded from the Decision too; this one was sampled
    w.add_rows("telemetry", [{"ts": now, "source": "host", "metric": "host_cpu_util_pct", "value": 50.0}])
    w.commit("succeeded")
    c = build_comparison(connect(store), ["r1"])
    row = c["decision"]["rows"][0]
    assert (row["instance"], row["max_concurrency"], row["slo_name"]) == ("c7i.large", 1, "cpu-tiny")
    assert row["goodput"] is not None and row["usd_per_million_output_tokens"] is not None
    text = render(Comparison.model_validate(c))
    sections = [ln for ln in text.splitlines() if ln.startswith("## ")]
    assert sections[0] == "## Decision"
    assert "Local host priced as c7i.large (declared by the run, not detected)" in text
    assert "`cpu-tiny`: p99 TTFT <= 200 ms, p99 TPOT <= 10 ms" in text
