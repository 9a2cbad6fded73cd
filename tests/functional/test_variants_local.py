"""Server variants measured for real on the CPU backend (issue 26): a run request declares the run's variants,
serve_sweep picks them by name, each boots with its own compiles row (what it sets, its fingerprint), its
points carry that fingerprint, a variant that cannot boot is a recorded failure while the others go on, and
REPORT.md's Variants section compares each with its base, the A/A copy as the floor."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import neuronpipe, query

SWEEP = {
    "shapes": {"A": ["16:8"]},
    "min_prompts": 4,
    "prompts_per_stream": 1,
    "warmup_requests": 1,
    "max_concurrency": 2,
    "sweep_repeats": 2,
    "repeat_order": "balanced",
    "workloads": None,
}  # the shapes' points only (a variant runs its base's workloads: test_workloads_local)


@pytest.mark.slow
def test_declared_variants_boot_measure_and_compare(tmp_path):
    request = {
        "lanes": ["serve_sweep"],
        "profile": "tiny",
        "server_configs": {
            "A": {},
            "A-copy": {"base": "A"},
            "slow": {"base": "A", "extra_args": ["--slowdown", "0.3"]},
            "broken": {"base": "A", "extra_args": ["--no-such-flag"]},
        },
        "lane_config": {"serve_sweep": {**SWEEP, "server_configs": ["A", "A-copy", "slow", "broken"]}},
    }
    path = tmp_path / "run.json"
    path.write_text(json.dumps(request))
    results, report = str(tmp_path / "results"), tmp_path / "report"
    neuronpipe(
        "run",
        "--local",
        "--input",
        str(path),
        "--results",
        results,
        "--report",
        str(report),
        "--run-id",
        "var-1",
        "--no-live",
    )  # a variant that does not boot is a result: the lane goes on
    boots = query(results, "select config, succeeded, config_fingerprint, config_json, error from compiles order by ts")
    by: dict[str, list[dict]] = {}
    for b in boots:
        by.setdefault(b["config"], []).append(b)
    assert set(by) == {"A", "A-copy", "slow", "broken"}
    assert [b["succeeded"] for b in by["broken"]] == [False]  # booted once, not again for the second repeat
    assert "no-such-flag" in by["broken"][0]["error"] and all(b["succeeded"] for c in ("A", "slow") for b in by[c])
    assert (
        by["A"][0]["config_fingerprint"] == by["A-copy"][0]["config_fingerprint"] != by["slow"][0]["config_fingerprint"]
    )
    assert json.loads(by["slow"][0]["config_json"])["extra_args"] == ["--slowdown", "0.3"]
    points = query(
        results,
        "select server_config, count(*) as n, min(server_config_fingerprint) as fp, "
        "count(distinct repeat_index) as repeats from sweep_points group by all order by all",
    )
    got = {p["server_config"]: p for p in points}
    assert set(got) == {"A", "A-copy", "slow"} and {p["repeats"] for p in points} == {2}
    assert got["slow"]["fp"] == by["slow"][0]["config_fingerprint"]
    text = (report / "REPORT.md").read_text()
    section = text[text.index("## Variants") :]
    section = section[: section.index("\n## ", 5)]
    assert "### `var-1`: `A-copy` vs `A` (an A/A copy: the calibration)" in section
    assert "### `var-1`: `slow` vs `A`" in section and "A/A spread of A-copy against A" in section
    assert "### `var-1`: `broken` vs `A`" in section and "_Not compared: server config 'broken'" in section
    assert "no-such-flag" in section  # the verbatim boot error in the configs table


@pytest.mark.slow
def test_two_tenants_each_on_its_own_core_are_measured_alone_and_together(tmp_path):
    """A variant with tenants boots one server per core (each pinned), measures every point on the first tenant
    alone, then on both at once; the report compares each tenant with the first alone (isolation)."""
    import os

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("two tenants need two cores")
    request = {
        "lanes": ["serve_sweep"],
        "profile": "tiny",
        "server_configs": {"A": {}, "A-2t": {"base": "A", "tenants": 2}},
        "lane_config": {"serve_sweep": {**SWEEP, "server_configs": ["A", "A-2t"]}},
    }
    path = tmp_path / "run.json"
    path.write_text(json.dumps(request))
    results, report = str(tmp_path / "results"), tmp_path / "report"
    neuronpipe(
        "run",
        "--local",
        "--input",
        str(path),
        "--results",
        results,
        "--report",
        str(report),
        "--run-id",
        "ten-1",
        "--no-live",
    )
    points = query(results, "select server_config, count(*) as n from sweep_points group by all order by all")
    # concurrency 1 and 2, two repeats, each on A, on the first tenant alone and on both tenants together
    assert {p["server_config"]: p["n"] for p in points} == {"A": 4, "A-2t.alone": 4, "A-2t.t0": 4, "A-2t.t1": 4}
    boots = query(results, "select config, count(*) as n from compiles group by all order by all")
    assert {b["config"]: b["n"] for b in boots} == {"A": 2, "A-2t": 4}  # two tenants, two repeats
    logs = sorted((tmp_path / "results" / "logs").rglob("server-tiny-llama-A-2t-*.log"))
    pinned = {
        line.rsplit("pinned to cores ", 1)[1].strip()
        for f in logs
        for line in f.read_text().splitlines()
        if "pinned to cores" in line
    }
    assert pinned == {"0", "1"}
    text = (report / "REPORT.md").read_text()
    assert "### `ten-1`: `A-2t.alone` vs `A`" in text
    assert "### `ten-1`: `A-2t.t1` vs `A-2t.alone` (isolation:" in text
    # each tenant compared, or (a starved box flags every point of a tenant invalid) listed with the reason
    comparisons = json.loads((report / "comparison.json").read_text())["variants"]["comparisons"]
    tenants = {e["variant"]: e for e in comparisons if e.get("isolation")}
    assert set(tenants) == {"A-2t.t0", "A-2t.t1"}
    for e in tenants.values():
        assert "deltas" in e or "kept out of the headline tables" in e["note"], e
