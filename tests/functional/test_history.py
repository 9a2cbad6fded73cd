"""A run judged against its history, end to end on a local store: identical and slowed runs against the last runs
of their request, the verdict rows committed, the report's first sections, the trend command, the announcement,
and the bad inputs (a baseline of another request, schedules that do not plan or cost too much a month)."""

from __future__ import annotations

import json

import pytest

from analytics.store import open_store
from control_plane.cli import main
from control_plane.handlers import finalize_run
from control_plane.history import commit_judgement, judge_run
from control_plane.models import RunRequest
from tests.support.synthetic import SyntheticRun, write_synthetic_run

REQUEST = {"preset": "smoke", "profile": "tiny"}
SHAPE = {"lanes": ("provenance", "serve_sweep"), "concurrencies": (1,), "requests_per_point": 24}


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """Three runs of one request judged without a baseline (their fingerprints start the series), then an identical
    run (the draws of b1) and one with every TTFT four times as long (the synthetic runs are noisy: few requests,
    three A/A runs), each against the last 3."""
    root = tmp_path_factory.mktemp("history") / "results"
    store = open_store(str(root))
    plain = RunRequest.model_validate(REQUEST)
    for i in range(3):
        write_synthetic_run(store, SyntheticRun(run_id=f"b{i}", seed=i, **SHAPE))
        judge_run(store, f"b{i}", plain)
    write_synthetic_run(store, SyntheticRun(run_id="same", seed=1, **SHAPE))
    write_synthetic_run(store, SyntheticRun(run_id="slow", seed=4, ttft_factor=4.0, **SHAPE))
    judged = RunRequest.model_validate({**REQUEST, "baseline": {"last": 3}})
    # both against b0..b2 (neither joins the other's history before it is judged), then committed
    out = {r: judge_run(store, r, judged, commit=False) for r in ("same", "slow")}
    for j in out.values():
        commit_judgement(store, j)
    return root, store, out


def test_an_identical_run_is_unchanged_and_a_slowed_one_regressed_with_the_rows_that_moved(history):
    _, store, judged = history
    same, slow = judged["same"], judged["slow"]
    assert sorted(same.baseline_runs) == sorted(slow.baseline_runs) == ["b0", "b1", "b2"]
    assert same.outcome == "unchanged" and same.event is None and same.counts["slower"] == 0
    assert slow.outcome == "regressed" and slow.event == "RunRegressed" and slow.counts["slower"] >= 1
    moved = slow.moved()
    assert moved and all(r["family"].endswith("ttft_ms") or r["family"].endswith("e2el_ms") for r in moved)
    assert all(r["pct"] >= r["familywise_floor_pct"] > 0 for r in moved)
    rows = store.read_table("baseline_verdicts", ["slow"]).to_pylist()
    assert {r["outcome"] for r in rows} == {"regressed"} and len(rows) == len(slow.rows)
    fps = {
        r["run_id"]: r["value"]
        for r in store.read_table("provenance").to_pylist()
        if r["category"] == "request" and r["name"] == "fingerprint"
    }
    assert set(fps) == {"b0", "b1", "b2", "same", "slow"} and len(set(fps.values())) == 1
    # judged once: a second finalize keeps the first judgement
    assert judge_run(store, "slow", RunRequest.model_validate({**REQUEST, "baseline": "b0"})).rows
    assert len(store.read_table("baseline_verdicts", ["slow"]).to_pylist()) == len(rows)


def test_the_report_opens_with_since_the_baseline_and_draws_the_trend(history, tmp_path):
    from analytics.report.files import build_report_files

    root, _, judged = history
    build_report_files(str(root), ["slow"], str(tmp_path), html=False)
    md = (tmp_path / "REPORT.md").read_text()
    c = judged["slow"].counts
    line = (
        f"**`slow` since the baseline: {c['faster']} faster, {c['slower']} slower, {c['within noise']} within noise**"
    )
    assert line in md and md.index("## Since the baseline") < md.index("## Machines and versions")
    doc = json.loads((tmp_path / "comparison.json").read_text())
    assert doc["baseline"]["runs"][0]["outcome"] == "regressed" and doc["baseline"]["moved"]
    assert "trend" not in doc  # one run in this report: no series of two


def test_trend_prints_a_series_with_its_band_and_says_a_short_one_is_too_short(history, capsys):
    root, _, _ = history
    assert main(["trend", "--results", str(root), "--run", "slow", "--metric", "p50_ttft_ms"]) == 0
    out = capsys.readouterr().out
    assert "method: E-divisive means" in out and "p50_ttft_ms" in out and "band" in out
    assert all(r in out for r in ("b0", "b1", "b2", "same", "slow"))
    assert main(["trend", "--results", str(root), "--run", "slow", "--metric", "no_such_metric"]) == 2
    assert capsys.readouterr().err.startswith("trend: no series of two runs or more for request ")


def test_trend_refuses_a_run_the_control_plane_never_finalized(tmp_path, capsys):
    store = open_store(str(tmp_path / "r"))
    write_synthetic_run(store, SyntheticRun(run_id="lone", lanes=("provenance",)))
    assert main(["trend", "--results", str(tmp_path / "r"), "--run", "lone"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trend: --run lone: no request fingerprint") and err.count("\n") == 1


class FakeSns:
    def __init__(self):
        self.published: list[dict] = []

    def publish(self, **kw):
        self.published.append(kw)
        return {"MessageId": "m-1"}


def test_a_regression_is_announced_and_an_unchanged_run_is_not(history):
    _, store, judged = history
    sns = FakeSns()
    assert not finalize_run.announce(judged["same"], store, "arn:aws:sns:us-west-2:1:alerts", "r", sns)
    assert finalize_run.announce(judged["slow"], store, "arn:aws:sns:us-west-2:1:alerts", "s3://b/REPORT.html", sns)
    (msg,) = sns.published
    assert msg["TopicArn"] == "arn:aws:sns:us-west-2:1:alerts" and "slow regressed against last:3" in msg["Subject"]
    assert (
        f"runs {', '.join(judged['slow'].baseline_runs)}." in msg["Message"]
        and "Report: s3://b/REPORT.html" in msg["Message"]
    )
    assert "What changed (provenance): provenance shows no change" in msg["Message"]


def test_a_local_run_naming_a_baseline_of_another_request_starts_nothing(history, tmp_path, capsys):
    root, _, _ = history
    request = tmp_path / "run.json"
    request.write_text(json.dumps({"lanes": ["provenance"], "profile": "tiny", "baseline": "b0"}))
    before = sorted(p.name for p in root.rglob("*"))
    assert main(["run", "--local", "--input", str(request), "--results", str(root), "--no-live"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: baseline: run b0 is of another request (fingerprint ") and err.count("\n") == 1
    assert sorted(p.name for p in root.rglob("*")) == before


def test_schedules_that_do_not_plan_or_cost_too_much_a_month_are_refused_each_in_one_line(tmp_path, capsys):
    cdk = tmp_path / "cdk.json"
    schedules = [
        {"name": "nightly-smoke", "expression": "cron(0 6 * * ? *)", "request": {"preset": "smoke"}},
        {"name": "bad-request", "expression": "rate(1 day)", "request": {"preset": "nope"}},
        {"name": "hourly-full", "expression": "rate(1 hour)", "request": {"preset": "full"}},
        {"name": "Bad Name", "expression": "rate(1 day)", "request": {"preset": "smoke"}},
    ]
    cdk.write_text(json.dumps({"context": {"neuronpipe": {"monthly_budget_usd": 300, "schedules": schedules}}}))
    assert main(["plan", "--schedules", str(cdk)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert (
        err[0] == f"invalid schedules {cdk}: schedule bad-request: request: preset: Input should be 'full', "
        "'smoke' or 'finetune_serve'"
    )
    assert err[1].startswith(f"invalid schedules {cdk}: schedule hourly-full: a month costs up to $")
    assert "720 runs" in err[1] and "above its limit $300.00" in err[1]
    assert err[2].startswith(f"invalid schedules {cdk}: schedule Bad Name: name: ") and len(err) == 3
    cdk.write_text(json.dumps({"context": {"neuronpipe": {"schedules": schedules[:1]}}}))
    assert main(["plan", "--schedules", str(cdk)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("schedule nightly-smoke (cron(0 6 * * ? *), disabled): 30 runs a month × $")
