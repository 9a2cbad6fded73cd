"""`neuronpipe import torchneuronx`: small files in the predecessor's shape land in our tables and views.

Expected values are computed from the fixture files themselves, never typed in twice.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from analytics.importers.torchneuronx import every_attempt, import_torchneuronx
from analytics.report.files import build_report_files
from analytics.store import LocalStore
from analytics.views import connect
from control_plane.cli import main

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "torchneuronx"
MIRROR = Path("/work/.mirror/alpharomercoma+torchneuronx/repo")


def _json(rel: str) -> dict:
    return json.loads((FIXTURE / rel).read_text())


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    store = LocalStore(root)
    summary = import_torchneuronx(str(FIXTURE), store, run_id="tnx")
    return store, summary, connect(store)


def test_every_lane_is_an_ordinary_attempt_tagged_imported_with_null_reasons(imported):
    store, summary, con = imported
    rows = con.execute("SELECT lane, status, instance_id, instance_type, config_json FROM lane_runs").fetchall()
    assert {r[0] for r in rows} == {a[0] for a in summary.attempts}
    assert {"sft", "merge", "serve_sweep", "qwen3_attempt", "sustained", "quality", "precompile"} <= {
        r[0] for r in rows
    }
    for _lane, _status, instance_id, _instance_type, config_json in rows:
        cfg = json.loads(config_json)
        assert cfg["imported"]["source"] == "torchneuronx"
        assert instance_id is None and cfg["null_reasons"]["instance_id"]
    types = {r[0]: r[3] for r in rows}
    assert types["sft"] == "trn1.2xlarge" and types["serve_sweep"] == "inf2.xlarge"


def test_aggregate_only_point_sits_beside_request_points_without_gate_goodput_or_p95(imported):
    _, _, con = imported
    src = _json("inf2/results/serve/tiny_base_short/isl8_osl4_c1.json")
    row = con.execute(
        "SELECT metric_basis, output_throughput, p50_ttft_ms, p95_ttft_ms, goodput, valid, "
        "definitions_json, sent FROM serving_points_all WHERE point_id = 'tiny_base_short/isl8_osl4_c1'"
    ).fetchone()
    assert row[0] == "aggregate"
    assert row[1] == src["output_throughput"] and row[2] == src["p50_ttft_ms"]
    assert row[3] is None and row[4] is None and row[5] is None
    assert "non-empty SSE" in json.loads(row[6])["output_tokens"]
    assert row[7] == src["completed"] + src["failed"]
    # the point has no request rows, so the request-derived view does not invent one
    assert (
        con.execute("SELECT count(*) FROM serving_points WHERE point_id = 'tiny_base_short/isl8_osl4_c1'").fetchone()[0]
        == 0
    )


def test_qwen3_failures_become_request_rows_with_the_verbatim_error(imported):
    _, _, con = imported
    src = _json("inf2/results/serve/qwen3_base_short/isl8_osl4_c2.json")
    log = (FIXTURE / "inf2/results/serve/qwen3_base_short/isl8_osl4_c2.log").read_text()
    errors = [line.split("FAILED: ", 1)[1] for line in log.splitlines() if "FAILED: " in line]
    rows = con.execute(
        "SELECT success, output_tokens, error FROM requests WHERE lane = 'qwen3_attempt' ORDER BY request_index"
    ).fetchall()
    assert len(rows) == src["num_prompts"]
    assert [r[2] for r in rows if not r[0]] == errors
    assert [r[1] for r in rows if r[0]] == [src["total_output_tokens"]]
    point = con.execute(
        "SELECT metric_basis, valid, first_error FROM serving_points_all "
        "WHERE lane = 'qwen3_attempt' AND point_id LIKE '%c2'"
    ).fetchone()
    assert point[0] == "requests" and point[1] is False and point[2] == errors[0]


def test_sustained_retention_from_iterations_names_its_rule(imported):
    _, _, con = imported
    tps = [_json(f"inf2/results/sustained/iter_00{i}.json")["output_throughput"] for i in range(1, 5)]
    got = dict(con.execute("SELECT rule, retention FROM sustained_iterations").fetchall())
    assert got["tail3_mean_over_first"] == pytest.approx(sum(tps[-3:]) / 3 / tps[0])
    assert "median_last_k_over_first_k" in got


def test_training_mfu_boots_and_step_clock(imported):
    _, _, con = imported
    src = _json("trn1/results/train/tiny_lora.json")
    steps = [s["ms"] / 1000 for s in src["loss_trace"]]
    cov, partial, clock = con.execute(
        "SELECT step_clock_coverage, step_clock_partial, step_clock FROM train_step_clock WHERE lane = 'sft' "
        "AND model = ?",
        [src["model"]],
    ).fetchone()
    assert cov == pytest.approx(sum(steps) / src["train_wall_s"]) and partial is (cov < 0.9) and clock
    n_steps, formula = con.execute(
        "SELECT steps, flops_formula FROM train_runs WHERE lane = 'sft' AND model = ?", [src["model"]]
    ).fetchone()
    assert n_steps == len(steps) and formula == "lora_recompute_8t_6f"  # gradient checkpointing on
    caches = dict(con.execute("SELECT lane, cache FROM compiles WHERE what = 'serving_config'").fetchall())
    # the fine-tune's shared cache did not grow: warm, although the source says warm=false
    assert caches["finetune_serve"] == "warm" and caches["serve_sweep"] == "cold"
    assert {r[0] for r in con.execute("SELECT verified FROM weights_roundtrip").fetchall()} == {True}
    nulls = con.execute("SELECT count(*) FROM telemetry WHERE value IS NULL AND note IS NOT NULL").fetchone()[0]
    assert nulls > 0  # blank CSV cells are NULL with a note, never zero


def test_importing_twice_is_refused_then_force_adds_attempts(tmp_path, capsys):
    args = ["import", "torchneuronx", str(FIXTURE), "--results", str(tmp_path / "r"), "--run-id", "x"]
    assert main(args) == 0
    markers = sorted(p.name for p in (tmp_path / "r").rglob("*.json"))
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "already" in err[0]
    assert sorted(p.name for p in (tmp_path / "r").rglob("*.json")) == markers
    assert main(args + ["--force"]) == 0
    # every lane again as a new attempt; the predictions (REPORT-EXTENSIONS.md §13.9) stay registered once
    assert len(list((tmp_path / "r").rglob("*.json"))) == 2 * len(markers) - 1


@pytest.mark.parametrize("damage", ["not json", "missing"])
def test_bad_input_gets_one_line_and_writes_nothing(tmp_path, capsys, damage):
    src = tmp_path / "src"
    shutil.copytree(FIXTURE, src)
    if damage == "not json":
        (src / "inf2/results/serve/tiny_base_short/isl8_osl4_c1.json").write_text("{oops")
        source = str(src)
    else:
        source = str(tmp_path / "nowhere")
    results = tmp_path / "r"
    assert main(["import", "torchneuronx", source, "--results", str(results)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")
    assert not results.exists() or not any(p.is_file() for p in results.rglob("*"))


def test_history_commits_superseded_versions_as_earlier_attempts(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURE, repo)
    boot = repo / "inf2/results/serve/tiny_base_short/boot.json"
    first = json.loads(boot.read_text())
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "PATH": "/usr/bin:/bin",
    }

    def git(*a: str, date: str) -> None:
        subprocess.run(
            ["git", "-C", str(repo), *a],
            check=True,
            capture_output=True,
            env={**env, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date},
        )

    git("init", "-q", date="2026-01-01T00:00:00Z")
    git("add", "-A", date="2026-01-01T00:00:00Z")
    git("commit", "-qm", "first", date="2026-01-01T00:00:00Z")
    boot.write_text(
        json.dumps(
            {
                **first,
                "boot_wall_s": first["boot_wall_s"] // 2,
                "cache_dir_size_mb_before": first["cache_dir_size_mb_after"],
            }
        )
    )
    git("commit", "-qam", "rerun", date="2026-01-02T00:00:00Z")
    store = LocalStore(tmp_path / "r")
    summary = import_torchneuronx(str(repo / ".git"), store, history=True)
    sweeps = [a for a in summary.attempts if a[0] == "serve_sweep"]
    assert len(sweeps) == 2  # the superseded version, then the latest
    con = connect(store)
    assert con.execute("SELECT cache, wall_s FROM compiles WHERE lane = 'serve_sweep'").fetchall() == [
        ("warm", first["boot_wall_s"] // 2)
    ]
    every = [
        (r["cache"], r["wall_s"])
        for r in every_attempt(store, summary.run_id, "compiles").to_pylist()
        if r["lane"] == "serve_sweep"
    ]
    assert ("cold", first["boot_wall_s"]) in every
    superseded = [
        json.loads(r[0])["imported"]["superseded"]
        for r in con.execute("SELECT config_json FROM lane_runs WHERE lane = 'serve_sweep' ORDER BY attempt").fetchall()
    ]
    assert superseded == [True, False]


@pytest.mark.skipif(not MIRROR.is_dir(), reason=f"the predecessor's mirror is not at {MIRROR}")
def test_the_predecessors_headlines_reproduce_from_its_repository(tmp_path):
    from analytics.importers.figures import figures
    from analytics.importers.source import open_tree

    store = LocalStore(tmp_path)
    summary = import_torchneuronx(str(MIRROR), store, ref="b245405")
    tree, repo = open_tree(str(MIRROR), "b245405")
    try:
        rows = figures(connect(store), store, summary.run_id, tree, None)  # no --history: no first-boot figure
    finally:
        repo.close()
    assert len(rows) >= 25
    assert [f.name for f in rows if not f.holds] == []
    names = {f.name for f in rows}  # its Phase 2: a variant, a new model, a limit, two tenants
    assert {
        "fp8 KV cache c8 output tok/s",
        "Mistral-7B c32 output tok/s",
        "Mistral-7B cold compile (s)",
        "serving context cliff at 8 sequences (max_model_len)",
        "its compiler error at the cliff",
        "two tenants, one NeuronCore each: tenant 1 c4 output tok/s",
    } <= names
    assert {
        "training sequence cliff at batch 1 (train_seq_len)",
        "its compiler error at the training cliff",
        "HBM needed vs the limit at the training cliff",
        "LoRA tokens/s at sequence 4096",
        "MFU at sequence 4096, 210 TFLOP/s (%)",
    } <= names  # its trn1 Phase 2
    assert {
        "median adapter save (s)",
        "adapter saves in all (s)",
        "mnist cnn best test accuracy, one NeuronCore (%)",
        "cifar vit steady samples/s",
    } <= names  # its checkpoint saves (§13.7) and academic runs, through report_train_saves and report_scratch
    assert {
        "Whisper-small real-time factor, 11 s clip",
        "Whisper-small compile (s)",
        "Whisper-small load (s)",
        "CLIP ViT-B/32 numerics verdict (NaN outputs)",
        "SigLIP exporter refusal, verbatim",
    } <= names  # its §13.1 encoders, through report_encoders


def test_the_predecessors_training_limit_is_a_train_seq_len_search_with_its_run(imported):
    _, _, con = imported
    extras = FIXTURE / "trn1/results/extras"
    ok, failure = _json("trn1/results/extras/ctx_128.json"), _json("trn1/results/extras/ctx_256.failure.json")
    eoom = next(ln for ln in (extras / "ctx_256.log").read_text().splitlines() if ln.startswith("[ERROR] [NCC_"))
    peak = max(
        float(r.split(",")[2])
        for r in (extras / "ctx_128.telemetry.csv").read_text().splitlines()[1:]
        if r.split(",")[2]
    )
    (row,) = con.execute(
        "SELECT kind, at_field, at_value, bracket, error_kind_at_high, error_at_high, "
        "peak_mem_at_low_bytes, tokens_per_s_at_low, boots FROM report_limits "
        "WHERE lane = 'train_limits'"
    ).fetchall()
    assert row[:6] == (
        "train_seq_len",
        "batch_size",
        ok["config"]["micro_batch"],
        f"({ok['config']['seq_len']}, {failure['seq_len']}]",
        "compile_error",
        eoom[len("[ERROR] ") :],
    )  # the log's verbatim line from its code on (the JSON's is cut short)
    assert row[6] == int(peak * 2**20) and row[8] == 2
    (run,) = con.execute(
        "SELECT max_seq_len, tokens_per_s, steps FROM train_runs WHERE lane = 'train_limits'"
    ).fetchall()
    assert run[0] == ok["config"]["seq_len"] and run[1] == row[7] and run[2] == len(ok["loss_trace"])


def test_imported_runs_report_shows_aggregates_iteration_retention_step_clock_and_no_cost(imported, tmp_path):
    from analytics.report import write_report

    store, summary, con = imported
    write_report(connect(store), ["tnx"], tmp_path)
    md = (tmp_path / "REPORT.md").read_text()
    src = _json("trn1/results/train/tiny_lora.json")
    coverage = sum(s["ms"] / 1000 for s in src["loss_trace"]) / src["train_wall_s"]
    assert ("**Step clock flag**" in md) is (coverage < 0.9)
    assert f"{100 * coverage:.1f} %" in md or coverage >= 0.9
    assert "Aggregate-only points" in md and "`tail3_mean_over_first`" in md
    assert "### Checkpoint saves" in md  # its ckpt_timing run's saves, under Training
    assert "## From-scratch training" in md and "| cifar | apple_m5 | vit | 78–82 % |" in md  # academic/
    assert "has not committed" not in md.split("## Sustained retention")[1].split("## Quality")[0]
    scopes = con.execute(
        "SELECT DISTINCT cache_scope, cache_basis FROM compiles WHERE lane = 'finetune_serve'"
    ).fetchall()
    assert scopes == [("shared_compiler_cache", "inferred")]
    loop = con.execute("SELECT train_loop_s FROM train_runs WHERE lane = 'sft' AND model = ?", [src["model"]])
    assert loop.fetchone()[0] == src["train_wall_s"]
    [run] = con.execute("SELECT usd, imported_attempts, attempts FROM report_run_cost").fetchall()
    assert run[0] is None and run[1] == run[2] == len(summary.attempts)


def test_the_predecessors_knee_lands_as_open_loop_points_and_the_capacity_view_brackets_it(imported):
    _, _, con = imported
    src = {
        float(p.stem.split("_")[1]): json.loads(p.read_text())
        for p in (FIXTURE / "inf2/results/extras/knee").glob("rate_*.json")
    }
    rows = con.execute(
        "SELECT offered_rate, attained, passed, excluded_reason FROM capacity_points ORDER BY offered_rate"
    ).fetchall()
    assert [r[0] for r in rows] == sorted(src)
    assert [r[1] for r in rows] == [src[r]["slo_attainment_pct"] / 100 for r in sorted(src)]
    assert all(r[3] is None for r in rows)  # telemetry inside each point's window: kept
    lo, hi, basis = con.execute(
        "SELECT max_rate_meeting_slo, lowest_rate_missing_slo, metric_basis "
        "FROM report_capacity WHERE lane = 'capacity'"
    ).fetchone()
    passing = [r for r in sorted(src) if src[r]["slo_attainment_pct"] >= 99 and src[r]["p99_tpot_ms"] <= 80]
    assert lo == max(passing) and hi == min(r for r in src if r not in passing)
    assert basis == "aggregate"


@pytest.mark.skipif(not MIRROR.exists(), reason="no mirror of the predecessor's repository")
def test_the_predecessors_own_knee_brackets_between_1_and_2_req_s(tmp_path):
    store = LocalStore(tmp_path)
    import_torchneuronx(str(MIRROR), store, run_id="tnx-real")
    lo, hi = (
        connect(store)
        .execute("SELECT max_rate_meeting_slo, lowest_rate_missing_slo FROM report_capacity WHERE lane = 'capacity'")
        .fetchone()
    )
    assert (lo, hi) == (1.0, 2.0)


@pytest.mark.skipif(not MIRROR.exists(), reason="no mirror of the predecessor's repository")
def test_the_predecessors_inf2_points_lie_within_their_roofline_and_its_report_says_how_close(tmp_path):
    store = LocalStore(tmp_path / "results")
    import_torchneuronx(str(MIRROR), store, run_id="tnx-roof")
    con = connect(store)
    rows = con.execute(
        "SELECT model, server_config, hardware, throughput_fraction, tpot_fraction, ttft_fraction FROM point_roofline "
        "WHERE output_throughput IS NOT NULL AND tpot_bound_ms IS NOT NULL AND mode <> 'sustained'"
    ).fetchall()
    assert len(rows) >= 10 and {r[0] for r in rows} >= {"meta-llama/Llama-3.1-8B-Instruct"}
    assert {r[2] for r in rows} <= {"1× Inferentia2 (2 of its NeuronCores)", "0.5× Inferentia2 (1 of its NeuronCores)"}
    # a point above its bound would be a defect in the facts or the formula
    assert [r for r in rows if max(r[3], r[4], r[5]) >= 1.0] == []
    out = tmp_path / "report"
    build_report_files(str(store.root), ["tnx-roof"], out)
    md = (out / "REPORT.md").read_text()
    assert "## Roofline" in md and "% of 1,313 (1× Inferentia2 (2 of its NeuronCores))" in md


def test_the_predecessors_nki_kernel_simulated_bit_exact_and_its_device_compile_failure_come_back(imported):
    _, summary, con = imported
    sim = _json("trn1/results/extras/nki_sim.json")
    log = (FIXTURE / "trn1/results/extras/nki_device.log").read_text()
    compiler = next(line.strip() for line in log.splitlines() if "[NCC_" in line)
    assert any(lane == "nki" and status == "succeeded" for lane, _, status, _ in summary.attempts)
    (row,) = con.execute(
        "SELECT shape, simulate, simulate_max_abs_err, simulate_elements, simulate_wall_s, compile, error_stage, "
        "error_class, error_code, error, verdict, speedup FROM report_kernels WHERE lane = 'nki'"
    ).fetchall()
    assert row[:5] == (
        "x".join(map(str, sim["shape"])),
        "pass",
        sim["max_abs_err_vs_numpy"],
        128 * 512,
        sim["simulate_wall_s"],
    )
    assert sim["max_abs_err_vs_numpy"] == 0.0  # bit-exact against numpy
    assert row[5:11] == ("error", "compile", "compiler_internal_error", "NCC_IBIR605", compiler, "error")
    assert row[11] is None  # never timed: the device run stopped at the compile
    assert con.execute("SELECT verdict FROM report_kernel_verdicts WHERE lane = 'nki'").fetchall() == [("error",)]


def test_the_predecessors_rag_appliance_comes_back_ingest_rate_probes_reranker_drop_and_coresidency_wall(imported):
    _, summary, con = imported
    rag = "inf2/results/rag/"
    ingest = _json(rag + "ingest.json")
    cosine, rerank = _json(rag + "probes_nollm_cosine.json"), _json(rag + "probes_nollm_rerank.json")
    assert any(lane == "rag" and status == "succeeded" for lane, _, status, _ in summary.attempts)
    (rate,) = con.execute("SELECT chunks_per_s FROM report_rag_ingest WHERE lane = 'rag'").fetchone()
    assert rate == pytest.approx(ingest["chunks"] / ingest["wall_s"]) and round(rate, 1) == 1.5
    hits = dict(con.execute("SELECT arm, hits FROM report_rag_quality WHERE lane = 'rag'").fetchall())
    passed = {"cosine": cosine, "reranked": rerank}
    assert hits == {arm: sum(p["pass"] for p in d["probes"]) for arm, d in passed.items()}
    assert (hits["cosine"], hits["reranked"]) == (7, 4)  # §13.10: 7/7 -> 4/7
    (n, lost, gained, p) = con.execute(
        "SELECT n, b, c, mcnemar_p FROM rag_reranker_tests WHERE lane = 'rag'"
    ).fetchone()
    assert (n, lost, gained) == (7, 3, 0) and p == pytest.approx(0.25)  # 3 discordant of 7: not enough to call
    (outcome, error, devices) = con.execute(
        "SELECT outcome, error, generator_devices FROM report_rag_coresidency WHERE lane = 'rag'"
    ).fetchone()
    verbatim = _json(rag + "probes_llm.json")["probes"][0]["error"]
    assert outcome == "failed" and error.startswith("RuntimeError: The PyTorch Neuron Runtime could not be initialized")
    assert " ".join(verbatim.split()).endswith(error.split(": ", 1)[1]) and devices.endswith("0-1")
    traces = [_json(rag + f) for f in ("compile_embed.json", "compile_rerank.json")]
    walls = con.execute("SELECT model, wall_s FROM compiles WHERE lane = 'rag' AND what = 'encoder_trace'").fetchall()
    assert dict(walls) == {d["model_id"]: d["wall_s"] for d in traces}
    (failed,) = con.execute("SELECT failed_queries FROM report_rag_load WHERE lane = 'rag'").fetchone()
    assert failed == len(_json(rag + "probes_llm.json")["probes"])


def test_its_checkpoint_saves_land_in_the_save_cost_view_of_its_sft_run(imported):
    _, _, con = imported
    src = _json("trn1/results/extras/ckpt_timing.json")
    saves = src["checkpoint_saves"]
    [row] = con.execute(
        "SELECT saves, median_save_s, total_save_s, kinds, train_loop_s, save_share, mb_per_save FROM "
        "report_train_saves WHERE lane = 'sft' AND model = ?",
        [src["model"]],
    ).fetchall()
    times = sorted(s["save_wall_s"] for s in saves)
    assert row[:3] == (len(saves), times[len(times) // 2], pytest.approx(sum(times)))
    assert row[3] == "adapter" and row[4] == src["train_wall_s"]  # its log: adapter_shards only, no optimizer
    assert row[5] == pytest.approx(sum(times) / src["train_wall_s"]) and row[6] is None  # no sizes recorded: NULL
    paths = [r[0] for r in con.execute("SELECT path FROM train_saves ORDER BY step").fetchall()]
    assert paths == [f"{src['adapter_out']}/checkpoint-{s['step']}" for s in saves]


def test_its_academic_runs_and_the_m5_ranges_land_in_the_from_scratch_view(imported):
    _, _, con = imported
    rows = {
        (r[0], r[1], r[2]): r[3:]
        for r in con.execute(
            "SELECT dataset, model, source, accuracy, accuracy_ci_low, accuracy_ci_high, steady_step_s, samples_per_s, "
            "params, reference_acc_low, reference_acc_high, device FROM report_scratch"
        ).fetchall()
    }
    for path in sorted((FIXTURE / "trn1/results/academic").glob("*.json")):
        src = json.loads(path.read_text())
        acc, low, high, steady, rate, params, *_, device = rows[(src["dataset"], src["arch"], "imported")]
        assert acc == pytest.approx(src["final_test_acc"] / 100) and low < acc < high and device == "trn1"
        assert steady == src["median_step_ms"] / 1000 and params == src["params"]
        assert rate == pytest.approx(src["samples_per_s_steady"], rel=0.01)  # batch / steady: its own rounding aside
        epochs = con.execute(
            "SELECT count(*), max(accuracy) FROM scratch_epoch_metrics WHERE dataset = ? AND model = ? "
            "AND source = 'imported'",
            [src["dataset"], src["arch"]],
        ).fetchone()
        assert epochs == (len(src["epochs"]), pytest.approx(src["best_test_acc"] / 100))
    refs = {(d, m): r[6:8] for (d, m, s), r in rows.items() if s == "reference"}
    assert refs[("cifar", "cnn")] == (0.88, 0.90) and refs[("mnist", "cnn")] == (0.99, 0.99)
    assert ("mnist", "mlp") not in refs  # its README states no M5 figure there ("see mlx repo"): no row
    assert all(r[-1] == "apple_m5" and r[0] is None for (_, _, s), r in rows.items() if s == "reference")


def test_its_encoders_come_back_whisper_timed_clip_a_numerics_exclusion_siglip_refused(imported):
    _, summary, con = imported
    whisper = _json("trn1/results/extras/whisper.json")
    clip = _json("trn1/results/extras/clip.failure.json")
    siglip = _json("trn1/results/extras/siglip.json")
    assert any(lane == "encode" and status == "succeeded" for lane, _, status, _ in summary.attempts)
    rows = {
        r["model"]: r
        for r in (
            dict(zip([d[0] for d in cur.description], row))
            for cur in [con.execute("SELECT * FROM report_encoders WHERE lane = 'encode'")]
            for row in cur.fetchall()
        )
    }
    w = rows[whisper["model"]]
    assert (w["compile_s"], w["load_s"], w["cache"], w["numerics_verdict"]) == (
        whisper["compile_s"],
        whisper["load_s"],
        "cold",
        "pass",
    )
    assert (w["shape"], w["shape_unit"], w["batch_size"], w["n"]) == (round(whisper["audio_s"]), "s", 1, 1)
    assert w["p50_ms"] == pytest.approx(whisper["transcribe_wall_s"] * 1000)
    assert round(w["rtf"], 3) == whisper["rtf"] == 0.047  # the view's RTF is the predecessor's
    c = rows["openai/clip-vit-base-patch32"]
    assert (c["exporter"], c["status"], c["numerics_verdict"], c["n"]) == ("torch_neuronx.trace", "ok", "nan", None)
    assert "Dictionary inputs to traced functions must have consistent type" in c["placement_reason"]
    assert (c["shape"], c["batch_size"]) == (224, 1)
    s = rows[siglip["model"]]
    assert (s["status"], s["placement_reason"], s["numerics_verdict"], s["n"]) == (
        "export_refused",
        siglip["reason"],
        None,
        None,
    )
    excluded = {
        (kind, subject.split(" on ")[0]): reason
        for kind, subject, reason in con.execute(
            "SELECT kind, subject, reason FROM report_exclusions WHERE lane = 'encode'"
        ).fetchall()
    }
    assert excluded["export_refused", siglip["model"]] == siglip["reason"]
    assert excluded["numerics_excluded", "openai/clip-vit-base-patch32"].endswith(clip["reason"])
    # CLIP's exporter refusal is an exclusion too, its trace fallback named
    refused = excluded["export_refused", "openai/clip-vit-base-patch32"]
    assert refused == c["placement_reason"] + " (placed by torch_neuronx.trace instead)"
