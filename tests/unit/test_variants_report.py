"""The report's Variants section on fixed rows: the booted configs' view (what each sets, its boots, the KV at its
grid's limit), the A/A copy found as the floor by fingerprint, each variant against its base with the paired
verdicts, and REPORT.md listing only decided rows."""

from __future__ import annotations

import json

import duckdb

from analytics.report.variants import _floor_copy, server_config_rows
from analytics.report.variants_md import s_variants
from analytics.views import derived_sql_files
from tests.support.comparison import document


def _con() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("""CREATE TABLE compiles (run_id VARCHAR, lane VARCHAR, what VARCHAR, model VARCHAR, config VARCHAR,
                   cache VARCHAR, wall_s DOUBLE, succeeded BOOLEAN, error VARCHAR, config_fingerprint VARCHAR,
                   config_json VARCHAR)""")
    con.execute("""CREATE TABLE sweep_points (run_id VARCHAR, lane VARCHAR, model VARCHAR, server_config VARCHAR,
                   grid_json VARCHAR)""")
    con.execute("""CREATE TABLE quantizations (run_id VARCHAR, lane VARCHAR, model VARCHAR, config VARCHAR,
                   method VARCHAR, wall_s DOUBLE, source_bytes BIGINT, bytes BIGINT, reused BOOLEAN,
                   succeeded BOOLEAN, error VARCHAR)""")
    a = {
        "name": "A",
        "base": None,
        "fingerprint": "f-a",
        "max_model_len": 256,
        "max_num_seqs": 4,
        "tensor_parallel_size": 1,
    }
    rows = [
        ("A", "f-a", a, "none", 3.0, True, None),
        ("A", "f-a", a, "none", 5.0, True, None),
        ("A-copy", "f-a", {**a, "name": "A-copy", "base": "A"}, "none", 4.0, True, None),
        ("S", "f-s", {**a, "name": "S", "base": "A", "max_num_seqs": 2}, "none", None, False, "Boot.Crashed: x"),
    ]
    for cfg, fp, data, cache, wall, ok, err in rows:
        con.execute(
            "INSERT INTO compiles VALUES ('r1', 'serve_sweep', 'serving_config', 'm', ?, ?, ?, ?, ?, ?, ?)",
            [cfg, cache, wall, ok, err, fp, json.dumps(data)],
        )
    grid = {"kv_bytes_per_token": 1024, "limit": 4, "max_model_len": 256, "free_kv_bytes": 2**30}
    for cfg in ("A", "A-copy"):
        con.execute("INSERT INTO sweep_points VALUES ('r1', 'serve_sweep', 'm', ?, ?)", [cfg, json.dumps(grid)])
    (sql,) = [text for name, text in derived_sql_files() if name == "36_report_variants.sql"]
    con.execute(sql)
    return con


def test_the_view_gives_each_config_its_settings_boots_and_kv():
    got = {r["config"]: r for r in server_config_rows(_con(), {"report_server_configs"})}
    assert set(got) == {"A", "A-copy", "S"}
    assert (got["A"]["base"], got["A"]["boots"], got["A"]["uncached_boot_s"]) == (None, 2, 4.0)
    assert got["A"]["sets"] == {"max_model_len": 256, "max_num_seqs": 4, "tensor_parallel_size": 1}
    assert got["A"]["kv_gib_at_limit"] == 1024 * 256 * 4 / 2**30 and got["A"]["grid_limit"] == 4
    assert (got["S"]["failed_boots"], got["S"]["boot_error"], got["S"]["kv_gib_at_limit"]) == (
        1,
        "Boot.Crashed: x",
        None,
    )


def test_the_floor_is_an_identical_copy_of_the_base():
    configs = {
        "A": {"fingerprint": "f"},
        "A-copy": {"base": "A", "fingerprint": "f"},
        "S": {"base": "A", "fingerprint": "g"},
        "B2": {"base": "B", "fingerprint": "f"},
    }
    assert _floor_copy(configs, "A", "S") == "A-copy"
    assert _floor_copy(configs, "A", "A-copy") is None  # the copy itself is the calibration, not its own floor
    assert _floor_copy({"A": {"fingerprint": None}, "A-copy": {"base": "A", "fingerprint": None}}, "A", "S") is None


def _row(metric: str, verdict: str, pct: float) -> dict:
    return {
        "metric": metric,
        "a": 100.0,
        "b": 100.0 * (1 + pct / 100),
        "pct": pct,
        "verdict": verdict,
        "unit": "repeat pair",
        "units_a": 4,
        "units_b": 4,
        "run_p_adjusted": 0.01,
        "floor_pct": 3.0,
        "run_ci_low": pct - 1,
        "run_ci_high": pct + 1,
    }


def test_report_md_lists_the_configs_and_only_the_decided_rows():
    c = {
        "variants": {
            "configs": [
                {
                    "run_id": "r1",
                    "lane": "serve_sweep",
                    "model": "m",
                    "config": "S",
                    "base": "A",
                    "sets": {"max_num_seqs": 2, "env": {"X": "1"}},
                    "fingerprint": "f-s",
                    "boots": 2,
                    "failed_boots": 0,
                    "cold_boot_s": None,
                    "warm_boot_s": None,
                    "uncached_boot_s": 3.25,
                    "grid_limit": 2,
                    "kv_gib_at_limit": 0.5,
                }
            ],
            "comparisons": [
                {
                    "run_id": "r1",
                    "baseline": "A",
                    "variant": "S",
                    "aa_copy": False,
                    "deltas": {
                        "fail_pct": 5.0,
                        "margin_pct": 2.0,
                        "noise_floor": [],
                        "floor_heading": "noise floor (A/A of A-copy):",
                        "rows": [
                            _row("serving · k · output_throughput", "slower", -20.0),
                            _row("serving · k · p50_ttft_ms", "within noise", 1.0),
                        ],
                    },
                },
                {"run_id": "r1", "baseline": "A", "variant": "T", "note": "server config 'T' has no headline point"},
            ],
        }
    }
    text = "\n".join(s_variants(document(c)))
    assert '| r1 | serve_sweep | m | S | A | max_num_seqs=2; env={"X": "1"} | f-s | 2 | 0 | — / — / 3.2 |' in text
    assert "### `r1`: `S` vs `A`" in text and "0 faster, 1 slower, 1 within noise, 0 untested" in text
    assert "serving · k · output_throughput" in text and "p50_ttft_ms" not in text  # counted, not listed
    assert "_Not compared: server config 'T' has no headline point._" in text and "noise floor (A/A of A-copy):" in text


def test_no_section_without_a_declared_variant():
    assert s_variants(document(variants={"configs": [{"config": "A", "base": None}], "comparisons": []})) == []
    assert s_variants(document()) == []


def test_a_tenant_whose_points_all_left_the_headline_tables_is_listed_as_not_compared_with_the_reason():
    """A starved box (CI's two cores under two pinned tenants) can flag every point of a tenant invalid: the
    isolation comparison still gets its heading, saying why there is nothing to compare, instead of vanishing."""
    from analytics.report.variants import _isolation

    def point(cfg, repeat, **kw):
        return {
            "run_id": "r1",
            "lane": "serve_sweep",
            "model": "m",
            "server_config": cfg,
            "input_len": 8,
            "output_len": 8,
            "max_concurrency": 1,
            "repeat_index": repeat,
            "point_id": f"{cfg}-{repeat}",
            "telemetry_samples": 3,
            "valid": True,
            **kw,
        }

    bad = {"valid": False, "invalid_reason": "client queue p99 9.000 ms exceeds the bound 2.000 ms"}
    c = {
        "runs": [{"run_id": "r1"}],
        "serving": {
            "points": [
                point("T.alone", 0),
                point("T.alone", 1),
                point("T.t0", 0, telemetry_samples=0),
                point("T.t0", 1, telemetry_samples=0),
                point("T.t1", 0, **bad),
                point("T.t1", 1, **bad),
            ]
        },
    }
    got = {e["variant"]: e for e in _isolation(c, None, "r1", 5.0)}
    assert set(got) == {"T.t0", "T.t1"}
    assert all(e["baseline"] == "T.alone" and e["tenant_of"] == "T" and "deltas" not in e for e in got.values())
    assert "'T.t1' has no headline point" in got["T.t1"]["note"]
    assert (
        "all 2 points of `T.t1` are kept out of the headline tables (first: invalid: client queue p99 9.000 ms"
        in got["T.t1"]["note"]
    )
    assert (
        "all 2 points of `T.t0` are kept out of the headline tables (first: no telemetry sample inside its "
        "window" in got["T.t0"]["note"]
    )
    text = "\n".join(
        s_variants(
            document(
                variants={"configs": [{"run_id": "r1", "config": "T", "base": "A"}], "comparisons": list(got.values())}
            )
        )
    )
    assert "### `r1`: `T.t1` vs `T.alone` (isolation: a tenant of `T`" in text
    assert "_Not compared: server config 'T.t1' has no headline point" in text
