"""The whole local pipeline end to end, as `make run` runs it, at the smallest settings.

Every lane runs for real on the CPU with the tiny models: train, merge, serve, sweep, sustain, ask,
pull-and-verify, the Qwen3 attempt; then the report. A second invocation resumes (every lane skipped);
Ctrl-C in the middle of a serving lane stops its server, commits nothing, and the next run completes it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from analytics.store import LocalStore
from analytics.views import connect

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

ALL_LANES = [
    "provenance",
    "preflight",
    "host_cpu",
    "smoke",
    "precompile",
    "nki",
    "sft",
    "from_scratch",
    "merge",
    "train_limits",
    "serve_sweep",
    "capacity",
    "limits",
    "sustained",
    "quality",
    "accuracy",
    "encode",
    "rag",
    "finetune_serve",
    "qwen3_attempt",
]
SMALL_SWEEP = {
    "server_configs": ["A", "B"],
    "shapes": {"A": ["16:8"], "B": ["64:8"]},
    "min_prompts": 2,
    "prompts_per_stream": 1,
    "warmup_requests": 1,
    "max_concurrency": 2,
    "sweep_repeats": 1,
}
SMALLEST = {
    "host_cpu": {"triad_elements": 1 << 20, "matmul_n": 128, "repeats": 1, "tokenizer_texts": 100},
    "smoke": {"steps": 8, "max_seq_len": 128, "max_new_tokens": 4},
    "sft": {"steps": 8, "max_seq_len": 128},
    "serve_sweep": SMALL_SWEEP,
    "finetune_serve": SMALL_SWEEP,
    "capacity": {"point_duration_s": 1.0, "max_search_s": 8.0, "precision": 0.9},
    "sustained": {"shape": "16:8", "duration_s": 6.0, "window_s": 2.0, "warmup_requests": 1, "retention_k": 1},
    "quality": {"max_tokens": 6},
    "accuracy": {"sample_limit": 4, "server_configs": ["A"]},  # the int8 variant: tests/functional/test_int8_serving.py
    "limits": {
        "searches": [{"kind": "max_num_seqs", "good": 1, "bad": 64, "at": 1024, "max_boots": 2}],
        "memory_cap_mib": 8.0,
    },
    "qwen3_attempt": {
        "shapes": {"A": ["16:8"]},
        "min_prompts": 2,
        "prompts_per_stream": 1,
        "warmup_requests": 1,
        "max_concurrency": 1,
    },
}


# points at these settings last well under a second: sample telemetry often enough that every point
# has samples in its window (a point without telemetry is excluded from headline tables, rule 7)
ENV = {**os.environ, "NEURONPIPE_TELEMETRY_INTERVAL_S": "0.1"}


def neuronpipe(*args: str, timeout: float = 1800, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run(
        [sys.executable, "-m", "control_plane.cli", *args], capture_output=True, text=True, timeout=timeout, env=ENV
    )
    if check:
        assert out.returncode == 0, out.stderr[-4000:] + out.stdout[-2000:]
    return out


@dataclass
class LocalRun:
    """The full preset run once for the module (``run --local`` as ``make run`` runs it), and what it wrote."""

    root: Path
    request: Path
    results: Path
    report: Path
    first: subprocess.CompletedProcess
    _con: Any = None

    def con(self, fresh: bool = False):
        """The views over the run's store: one connection for the tests that read the first run (building every
        view costs 1.5-3 s); ``fresh`` for a test that has added to the store since."""
        if fresh:
            return connect(LocalStore(self.results))
        if self._con is None:
            self._con = connect(LocalStore(self.results))
        return self._con

    def comparison(self) -> dict:
        return json.loads((self.report / "comparison.json").read_text())


# every lane for real: about 5 minutes on 2 cores next to the rest of the suite; the limit is a hang guard with room
# for a slower CI box (CI once took 2.7x as long), not a speed target
@pytest.fixture(scope="module")
def local_run(tmp_path_factory, shared_cache) -> LocalRun:
    root = tmp_path_factory.mktemp("e2e")
    request = root / "run.json"
    predictions = json.loads((FIXTURES.parent.parent / "examples" / "run-local.json").read_text())["predictions"]
    request.write_text(
        json.dumps({"preset": "full", "profile": "tiny", "lane_config": SMALLEST, "predictions": predictions})
    )
    results, report = root / "results", root / "report"
    first = neuronpipe(
        "run",
        "--local",
        "--input",
        str(request),
        "--results",
        str(results),
        "--run-id",
        "e2e",
        "--report",
        str(report),
        "--no-live",
        "--price-as",
        "c7i.large",
    )
    return LocalRun(root, request, results, report, first)


# The tests below read the one run, in this order; the last two add to its store (a reference run, a resume).
@pytest.mark.timeout(2400)
def test_every_lane_succeeds_and_the_closing_lines_name_the_report(local_run):
    # the closing lines stay whole off a terminal however long the path is; the outcome itself is read from the store
    closing = [line.strip() for line in local_run.first.stderr.splitlines()]
    assert any(line.startswith(f"report: {local_run.report / 'REPORT.md'}") for line in closing), (
        local_run.first.stderr[-3000:]
    )
    assert "Serving (headline points)" in closing and local_run.first.stdout.splitlines()[-1] == "e2e"
    status = dict(local_run.con().execute("select lane, status from lane_runs where supersedes").fetchall())
    assert status == {**{lane: "succeeded" for lane in ALL_LANES}, "precompile": "skipped", "nki": "skipped"}


def test_training_loss_falls_with_parameters_counted_after_the_wrap(local_run):
    con = local_run.con()
    trend = con.execute("select model, loss_fell from train_loss_trend where lane = 'sft'").fetchall()
    assert sorted(trend) == [("tiny-llama", True), ("tiny-qwen3", True)]
    assert con.execute("select min(params_trainable), min(params_frozen) from train_runs").fetchone()[0] > 0
    assert con.execute("select count(*) from train_steps where lane = 'precompile'").fetchone() == (0,)


def test_the_training_limit_is_bracketed_by_probes_that_train_or_run_out_of_memory(local_run):
    """The train_limits lane at the tiny profile's own search (as make run runs it): each probe a short LoRA SFT run in
    a process of its own whose address space may grow 400 MiB once the model has loaded; a long sequence fails with
    the allocator's out-of-memory line, a short one trains, and the lane bisects between them."""
    con = local_run.con()
    probes = [
        dict(zip(("phase", "value", "succeeded", "error_kind", "error", "peak", "source", "tok_s", "kind"), r))
        for r in con.execute(
            "select phase, value, succeeded, error_kind, error, peak_mem_bytes, peak_mem_source, tokens_per_s, kind "
            "from limit_probes where lane = 'train_limits' and phase <> 'outcome' order by probe"
        ).fetchall()
    ]
    assert [p["phase"] for p in probes[:2]] == ["good", "bad"] and {p["kind"] for p in probes} == {"train_seq_len"}
    good, bad = probes[0], probes[1]
    assert good["succeeded"] and good["error"] is None and good["tok_s"] > 0
    assert (bad["succeeded"], bad["error_kind"]) == (False, "oom")
    assert "Cannot allocate memory" in bad["error"] or "MemoryError" in bad["error"]  # the probe's own line
    assert all(p["peak"] > 0 and p["source"].startswith("cpu:") for p in probes)
    assert all((p["tok_s"] is not None) == p["succeeded"] for p in probes)
    low, high, bracket, boots, stop = con.execute(
        "select low, high, bracket, boots, stop_reason from report_limits where lane = 'train_limits'"
    ).fetchone()
    assert 256 <= low < high <= 2048 and high - low <= 256 and boots == len(probes) <= 6
    assert stop == "bracket within the precision 256"
    text = (local_run.report / "REPORT.md").read_text()
    assert f"| train_seq_len at batch_size=1 | {bracket} | oom: " in text


def test_serving_sweeps_both_configs_for_the_base_and_the_fine_tune(local_run):
    con = local_run.con()
    cfgs = con.execute(
        "select distinct lane, server_config from serving_points where lane in ('serve_sweep', 'finetune_serve')"
    ).fetchall()
    assert sorted(cfgs) == [
        ("finetune_serve", "A"),
        ("finetune_serve", "B"),
        ("serve_sweep", "A"),
        ("serve_sweep", "B"),
    ]
    assert con.execute(
        "select count(*) from sweep_points where lane = 'serve_sweep' and grid_json is null"
    ).fetchone() == (0,)
    assert con.execute("select count(*) from sustained_summary where retention_vs_first is not null").fetchone()[0] == 1
    variants = {v for (v,) in con.execute("select distinct variant from quality").fetchall()}
    assert variants == {"base", "finetune"}
    assert con.execute("select bool_and(holds) from report_roundtrip where model is not null").fetchone() == (True,)
    assert con.execute("select count(*) from compiles where what = 'serving_config'").fetchone()[0] >= 6


def test_accuracy_scores_the_shipped_tasks_with_paired_verdicts(local_run):
    # the shipped generation tasks on the base and its fine-tune (np_choice refused: the CPU server gives no
    # prompt logprobs), per-sample rows, one paired verdict per task (whatever it honestly is on tiny models)
    con = local_run.con()
    tasks = con.execute("select variant, task, status, n_samples from accuracy_tasks order by all").fetchall()
    assert {(v, t) for v, t, *_ in tasks} == {
        (v, t) for v in ("base", "finetune") for t in ("np_arith", "np_classify", "np_facts", "np_choice")
    }, tasks
    assert all(st == ("refused" if t == "np_choice" else "ok") for _, t, st, _ in tasks), tasks
    assert all(n == 4 for _, t, _, n in tasks if t != "np_choice"), tasks
    pairs = con.execute("select task, n from report_accuracy_pairs where kind = 'finetune' order by task").fetchall()
    assert pairs == [("np_arith", 4), ("np_classify", 4), ("np_facts", 4)], pairs


def test_the_rag_lane_scores_its_probes_measures_each_stage_and_reports_its_section(local_run):
    rag = local_run.comparison()["rag"]
    assert {q["arm"] for q in rag["quality"]} == {"cosine", "reranked"} and rag["reranker"][0]["verdict"]
    assert {s["stage"] for s in rag["stages"]} == {"embed", "search", "rerank", "generate", "end_to_end"}
    assert rag["coresidency"][0]["outcome"] == "measured" and rag["ingest"][0]["chunks_per_s"] > 0
    assert rag["decision"][0]["instance"] == "c7i.large"  # priced as the run declared
    assert "## RAG" in (local_run.report / "REPORT.md").read_text()


def test_every_point_carries_its_slo_and_the_decision_prices_it(local_run):
    con = local_run.con()
    assert con.execute("select count(*) from serving_points where slo_json is null or goodput is null").fetchone() == (
        0,
    )
    assert con.execute("select count(*) from serving_points where p50_ttft_ms_ci_low is not null").fetchone()[0] > 0
    decision = con.execute(
        "select instance, slo_name, meets, usd_per_million_output_tokens, note from report_decision"
    ).fetchall()
    assert decision and {d[0] for d in decision} == {"c7i.large"} and {d[1] for d in decision} == {"cpu-tiny"}
    assert all((d[3] is not None) == bool(d[2]) and (d[2] or "no point meets" in d[4]) for d in decision)


def test_every_measured_point_stands_beside_its_roofline_and_the_report_says_how_close(local_run):
    con = local_run.con()
    # every point of the serving lanes recorded the served model's facts; the host_cpu lane measured the ceiling
    missing = con.execute(
        "select lane, point_id, roofline_note from point_roofline "
        "where run_id = 'e2e' and tpot_bound_ms is null and mode <> 'sustained'"
    ).fetchall()
    assert missing == []
    rows = con.execute(
        "select throughput_fraction, tpot_fraction, ttft_fraction, hardware, median_tpot_ms from point_roofline "
        "where run_id = 'e2e' and output_throughput is not null"
    ).fetchall()
    assert rows and {r[3] for r in rows} == {"CPU (measured)"}
    # a point whose requests produced one token each has no TPOT interval (0 ms): no fraction, never infinity
    assert all(r[0] > 0 and r[2] > 0 and (r[1] > 0 if r[4] else r[1] is None) for r in rows)
    text = (local_run.report / "REPORT.md").read_text()
    assert "## Roofline" in text and "% of limit" in text.split("## Decision", 1)[1].split("\n## ", 1)[0]
    serving = text.split("## Serving sweeps", 1)[1].split("\n## ", 1)[0]
    assert "% of limit" in serving and "% of " in serving.split("% of limit", 1)[1]  # a cell with its value
    # a CPU point above its measured ceiling is possible (a cache beats the triad): the report says so where it is
    faster = [r for r in rows if max(f for f in r[:3] if f is not None) > 1.0]
    assert bool(faster) == ("measured faster than the bound" in text)


def test_the_preflight_gate_passed_and_the_boot_recorded_the_cache_it_pushed(local_run):
    con = local_run.con()
    assert con.execute("select sum(failed), sum(passed) > 0 from preflight_summary").fetchone() == (0, True)
    boot = con.execute("select box_role, push_entries, start_requested_at, cache_seeded_at from box_boots").fetchall()
    assert len(boot) == 1 and boot[0][0] == "local" and boot[0][1] > 0 and boot[0][2] is None and boot[0][3]


def test_the_report_puts_the_decision_first_and_holds_every_section(local_run):
    report = local_run.report
    text = (report / "REPORT.md").read_text()
    assert [ln for ln in text.splitlines() if ln.startswith("## ")][:2] == ["## Decision", "## Failures and exclusions"]
    decision = text.split("## Decision", 1)[1].split("\n## ", 1)[0]  # its pricing model, lifecycle, quality per dollar
    assert "**Pricing model: `on-demand`**" in decision and "### Lifecycle cost per useful token" in decision
    assert "### Quality per dollar" in decision and "| pareto |" in decision
    # P(cheaper) with run-to-run noise, at the chosen pricing model's prices (one type here: no pair to compare)
    assert "P(cheaper), run-to-run noise included, at `on-demand` prices" in decision
    for section in (
        "Machines and versions",
        "Preflight",
        "Compile",
        "Training",
        "Serving sweeps",
        "Workloads",
        "Sustained",
        "Quality",
        "Accuracy",
        "End-to-end loop",
        "Failures and exclusions",
        "Host CPU",
        "Cost context",
        "Measurement rules",
    ):
        assert f"## {section}" in text, section
    accuracy = text.split("## Accuracy", 1)[1].split("\n## ", 1)[0]
    assert "### Paired verdicts: base vs fine-tune, variant vs baseline" in accuracy
    assert "np_choice" in accuracy and "refused" in accuracy  # the refused task, with its reason
    verdicts = {p["task"]: p["verdict"] for p in local_run.comparison()["accuracy"]["pairs"] if p["kind"] == "finetune"}
    assert set(verdicts) == {"np_arith", "np_classify", "np_facts"} and set(verdicts.values()) <= {
        "better",
        "worse",
        "within noise",
    }, verdicts
    comparison = (report / "comparison.json").read_text()
    assert '"median_ttft_ms"' in comparison and '"output_throughput"' in comparison
    pngs = sorted(report.glob("*.png"))
    assert len(pngs) >= 4 and all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    # the capacity lane's open-loop search: its rows, the Decision's rate column and the knee plot
    searches = json.loads(comparison)["decision"]["capacity"]
    assert searches and all(s["lane"] == "capacity" for s in searches), searches
    assert "max sustainable rate req/s" in text and (report / "capacity_knee.png").is_file()
    # make run's predictions (examples/run-local.json): registered before the first lane, each one scored
    predicted = json.loads(comparison)["predictions"]
    assert "## Predicted vs observed" in text and "**Hit rate of `e2e`: " in text
    assert len(predicted["rows"]) == 7 and predicted["rates"][0]["registered_before_first_lane"] is True
    assert 'data-section="predictions"' in (report / "REPORT.html").read_text(encoding="utf-8")
    # the encode lane's tiny workloads: every placement passed the numerics gate on the CPU and was timed
    encoders = json.loads(comparison)["encoders"]["rows"]
    assert {r["modality"] for r in encoders} == {"speech_to_text", "zero_shot", "text_embedding", "rerank"}
    assert all(r["numerics_verdict"] == "pass" and r["n"] > 0 for r in encoders), encoders
    assert "## Encoders" in text and 'data-section="encoders"' in (report / "REPORT.html").read_text(encoding="utf-8")
    # the Decision answers for them too: each workload's highest load within its SLO and its price per thousand
    decision = text[text.index("## Decision") : text.index("## Failures and exclusions")]
    beyond = decision[decision.index("### Beyond text generation: encoders and RAG at their SLO") :]
    assert "| encode · speech (speech_to_text, tiny-whisper) |" in beyond and "| rag · lancedb, " in beyond


def test_the_report_page_embeds_comparison_json_and_stands_alone(local_run):
    check_report_page(local_run.report, local_run.comparison())


def test_the_report_rebuilds_byte_identically(local_run):
    again = local_run.root / "again"
    neuronpipe("report", "--results", str(local_run.results), "--run-id", "e2e", "--out", str(again))
    assert (again / "REPORT.md").read_bytes() == (local_run.report / "REPORT.md").read_bytes()
    assert (again / "comparison.json").read_bytes() == (local_run.report / "comparison.json").read_bytes()


def test_an_imported_vllm_bench_file_is_a_reference_row_of_the_decision(local_run):
    """A `vllm bench serve --save-result --save-detailed` file (tests/fixtures/vllm_bench), beside the run."""
    results, out = local_run.results, local_run.root / "with-ref"
    neuronpipe(
        "import",
        "vllm-bench",
        str(FIXTURES / "vllm_bench" / "detailed.json"),
        "--label",
        "vllm-ref",
        "--instance-type",
        "c7i.large",
        "--slo",
        "cpu-tiny",
        "--results",
        str(results),
    )
    neuronpipe("report", "--results", str(results), "--run-id", "e2e", "--run-id", "ref-vllm-ref", "--out", str(out))
    decision = json.loads((out / "comparison.json").read_text())["decision"]
    ref = [r for r in decision["rows"] if r["instance"] == "reference: vllm-ref"]
    assert len(ref) == 1 and ref[0]["run_id"] == "ref-vllm-ref" and ref[0]["slo_name"] == "cpu-tiny"
    assert "### reference: vllm-ref" in (out / "REPORT.md").read_text()


def test_the_same_command_again_resumes_and_commits_nothing_new(local_run):
    neuronpipe(
        "run",
        "--local",
        "--input",
        str(local_run.request),
        "--results",
        str(local_run.results),
        "--run-id",
        "e2e",
        "--no-live",
    )
    con = local_run.con(fresh=True)
    resumed = con.execute("select count(*) from lane_runs where not supersedes and status = 'skipped'").fetchone()
    assert resumed == (len(ALL_LANES),)
    # the resumed run's boot found the cache it pushed the first time on the box: nothing fetched, nothing new
    assert con.execute(
        "select seed_entries_fetched, seed_entries_present > 0, push_entries from box_boots"
    ).fetchone() == (0, True, 0)


def check_report_page(report: Path, comparison: dict) -> None:
    """REPORT.html, written by default beside REPORT.md: comparison.json embedded exactly, nothing outside the file
    referenced, under its size bound; and where Debian's Chromium is installed (`make chromium`), opened in it with
    no console error, no request but the file, and the Decision table's rows those of comparison.json."""
    import re

    from analytics.report.html import embedded_json
    from tests.support.browser import chromium_problem, launch, open_report

    path = report / "REPORT.html"
    page = path.read_text(encoding="utf-8")
    assert embedded_json(page, "np-comparison") == comparison
    markup = re.sub(
        r'(<script type="(?:application/json|text/plain)"[^>]*>).*?</script>', r"\1</script>", page, flags=re.S
    )
    assert not re.search(r"<(script|link|img|iframe)\b[^>]*\b(src|href)\s*=", markup, re.I)
    assert not re.search(r"\b(src|href)\s*=\s*[\"']?(https?:)?//", markup, re.I)
    assert path.stat().st_size < 8 * 2**20  # plotly.js 4.6 MiB + this run's data (docs/reference/report-html.md)
    executable, _ = chromium_problem()
    if executable is None:
        return
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch(p, executable)
        try:
            tab, log, _ = open_report(browser, path)
            tab.evaluate("window.npReport.drawAll()")
            rows = tab.eval_on_selector_all('[data-table="decision"] tbody tr', "trs => trs.map(t => +t.dataset.row)")
            assert log.console_errors() == [] and tab.evaluate("window.npReport.errors") == []
            assert {u.split(":", 1)[0] for u in log.requests} <= {"file", "data", "blob"}
            assert sorted(rows) == list(range(len(comparison["decision"]["rows"])))
        finally:
            browser.close()


def _servers_of(root: psutil.Process) -> list[psutil.Process]:
    try:
        return [p for p in root.children(recursive=True) if "agents.serving.cpu_server" in " ".join(p.cmdline())]
    except psutil.Error:
        return []


def test_ctrl_c_mid_lane_stops_the_server_commits_nothing_and_the_next_run_completes(tmp_path, shared_cache):
    results = tmp_path / "results"
    request = tmp_path / "long.json"
    request.write_text(
        json.dumps(
            {
                "lanes": ["sustained"],
                "profile": "tiny",
                "lane_config": {
                    "sustained": {"shape": "16:8", "duration_s": 120.0, "window_s": 2.0, "warmup_requests": 1}
                },
            }
        )
    )
    cmd = [
        sys.executable,
        "-m",
        "control_plane.cli",
        "run",
        "--local",
        "--input",
        str(request),
        "--results",
        str(results),
        "--run-id",
        "ctrl-c",
        "--no-live",
    ]
    proc = subprocess.Popen(
        cmd, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV
    )
    parent = psutil.Process(proc.pid)
    servers: list[psutil.Process] = []
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not servers:  # wait until the lane's server is up
        servers = _servers_of(parent)
        time.sleep(0.5)
    assert servers, "the sustained lane never started its server"
    time.sleep(3)  # mid-measurement
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    assert "resume" in err
    gone, alive = psutil.wait_procs(servers, timeout=15)
    assert not alive, f"server processes left behind: {[p.pid for p in alive]}"
    store = LocalStore(results)
    assert store.markers("ctrl-c") == []
    assert connect(store).execute("select count(*) from sustained_windows").fetchone() == (0,)

    # the same run again (now short) resumes at the uncommitted lane and completes it
    request.write_text(
        json.dumps(
            {
                "lanes": ["sustained"],
                "profile": "tiny",
                "lane_config": {
                    "sustained": {
                        "shape": "16:8",
                        "duration_s": 4.0,
                        "window_s": 2.0,
                        "warmup_requests": 1,
                        "retention_k": 1,
                    }
                },
            }
        )
    )
    neuronpipe("run", "--local", "--input", str(request), "--results", str(results), "--run-id", "ctrl-c", "--no-live")
    assert connect(store).execute("select count(*) > 0 from sustained_windows").fetchone() == (True,)
