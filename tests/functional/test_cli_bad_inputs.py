"""Bad input, everywhere, gets one clear line and changes nothing (issue 15, point 7).

Each case runs the CLI in-process (``control_plane.cli.main``) and must: exit non-zero, raise nothing
(no traceback), print exactly one problem line on stderr that names the problem (argparse's usage lines
aside), and leave the results directory and the input files byte-identical. Nothing reaches a server: the
load generator points at a closed port, and ``run --local`` has its lane launcher replaced by one that fails
the case (an accepted input would otherwise run lanes).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from datetime import datetime, timezone
from pathlib import Path

import pytest

from analytics.store import LocalStore
from control_plane.cli import main

CLOSED = "http://127.0.0.1:9"
T0 = datetime(2026, 7, 1, 12, tzinfo=timezone.utc)
LOAD = ["loadgen", "--base-url", CLOSED, "--input-len", "8", "--output-len", "4"]
LOADW = ["loadgen", "--base-url", CLOSED]  # a workload sets the lengths
VB = ["import", "vllm-bench", "--results", "{results}", "--label", "x", "--instance-type", "t"]


# (id, argv with {results} {file} {dir} {missing} {nonutf8} {cfg_bad} {list_json} {not_json} placeholders,
#  fragment the one line must contain, marks)
CASES = [
    # ---- query
    ("q-missing-store", ["query", "--results", "{missing}", "select 1"], "does not exist"),
    ("q-file-store", ["query", "--results", "{file}", "select 1"], "not a directory"),
    ("q-empty-results", ["query", "--results", "", "select 1"], "empty"),
    ("q-http-results", ["query", "--results", "http://example/x", "select 1"], "only local directories"),
    ("q-s3-no-bucket", ["query", "--results", "s3://", "select 1"], "names no bucket"),
    ("q-unknown-run", ["query", "--results", "{results}", "--run-id", "nope", "select 1"], "unknown run id nope"),
    (
        "q-unknown-run-mixed",
        ["query", "--results", "{results}", "--run-id", "r1", "--run-id", "zz", "select 1"],
        "unknown run id zz",
    ),
    ("q-run-id-slash", ["query", "--results", "{results}", "--run-id", "a/b", "select 1"], "invalid run_id"),
    ("q-run-id-space", ["query", "--results", "{results}", "--run-id", "a b", "select 1"], "invalid run_id"),
    ("q-run-id-dot", ["query", "--results", "{results}", "--run-id", ".x", "select 1"], "invalid run_id"),
    ("q-run-id-equals", ["query", "--results", "{results}", "--run-id", "a=b", "select 1"], "invalid run_id"),
    ("q-run-id-not-utf8", ["query", "--results", "{results}", "--run-id", "r\udcff", "select 1"], "UTF-8"),
    ("q-run-id-81", ["query", "--results", "{results}", "--run-id", "a" * 81, "select 1"], "invalid run_id"),
    ("q-run-id-non-ascii", ["query", "--results", "{results}", "--run-id", "caf\u00e9", "select 1"], "invalid run_id"),
    ("q-empty-sql", ["query", "--results", "{results}", ""], "SQL is empty"),
    ("q-blank-sql", ["query", "--results", "{results}", "  \n "], "SQL is empty"),
    ("q-sql-not-utf8", ["query", "--results", "{results}", "select '\udcff'"], "not valid UTF-8"),
    ("q-syntax", ["query", "--results", "{results}", "selec 1"], "Parser"),
    ("q-unknown-table", ["query", "--results", "{results}", "select * from nope"], "nope"),
    ("q-unknown-column", ["query", "--results", "{results}", "select nope from host_bench"], "nope"),
    ("q-runtime-table", ["query", "--results", "{results}", "select cast('x' as int)"], "Conversion"),
    ("q-runtime-csv", ["query", "--results", "{results}", "--format", "csv", "select cast('x' as int)"], "Conversion"),
    (
        "q-runtime-json",
        ["query", "--results", "{results}", "--format", "json", "select cast('x' as int)"],
        "Conversion",
    ),
    ("q-runtime-error-fn", ["query", "--results", "{results}", "select error('boom here')"], "boom here"),
    ("q-bad-format", ["query", "--results", "{results}", "--format", "xml", "select 1"], "invalid choice"),
    ("q-no-sql", ["query", "--results", "{results}"], "required: sql"),
    (
        "q-copy-into-store",
        ["query", "--results", "{results}", "copy (select 1) to '{results}/v1/x.csv'"],
        "is a COPY statement",
    ),
    ("q-attach", ["query", "--results", "{results}", "attach '{results}/x.duckdb'"], "is an ATTACH statement"),
    ("q-read-other-file", ["query", "--results", "{results}", "select * from read_text('{file}')"], "Permission Error"),
    ("q-set", ["query", "--results", "{results}", "set enable_external_access = true"], "is a SET/RESET/USE"),
    ("q-only-semicolons", ["query", "--results", "{results}", " ; ;"], "holds no statement"),
    ("q-zero-timeout", ["query", "--results", "{results}", "--timeout", "0", "select 1"], "--timeout"),
    # ---- report
    ("r-missing-store", ["report", "--results", "{missing}", "--out", "{dir}/rep"], "does not exist"),
    ("r-file-store", ["report", "--results", "{file}", "--out", "{dir}/rep"], "not a directory"),
    ("r-http-results", ["report", "--results", "ftp://x", "--out", "{dir}/rep"], "only local directories"),
    ("r-s3-no-bucket", ["report", "--results", "s3:///x", "--out", "{dir}/rep"], "names no bucket"),
    (
        "r-unknown-run",
        ["report", "--results", "{results}", "--run-id", "nope", "--out", "{dir}/rep"],
        "unknown run id nope",
    ),
    (
        "r-run-id-slash",
        ["report", "--results", "{results}", "--run-id", "../x", "--out", "{dir}/rep"],
        "invalid run_id",
    ),
    ("r-run-id-81", ["report", "--results", "{results}", "--run-id", "r" * 81, "--out", "{dir}/rep"], "invalid run_id"),
    ("r-out-is-file", ["report", "--results", "{results}", "--out", "{file}"], "is a file"),
    ("r-out-under-file", ["report", "--results", "{results}", "--out", "{file}/sub"], "is a file"),
    ("r-out-empty", ["report", "--results", "{results}", "--out", ""], "--out is empty"),
    ("r-out-not-utf8", ["report", "--results", "{results}", "--out", "{dir}/r\udcff"], "UTF-8"),
    ("r-unknown-flag", ["report", "--results", "{results}", "--outt", "x"], "unrecognized arguments"),
    # ---- the Decision's pricing model and horizon (report, plan, run): refused before anything starts
    (
        "r-pricing-unknown",
        ["report", "--results", "{results}", "--out", "{dir}/rep", "--pricing", "bogus"],
        "unknown pricing model 'bogus'",
    ),
    (
        "r-horizon-zero",
        ["report", "--results", "{results}", "--out", "{dir}/rep", "--serving-hours", "0"],
        "--serving-hours",
    ),
    (
        "r-utilization-over",
        ["report", "--results", "{results}", "--out", "{dir}/rep", "--utilization", "1.5"],
        "--utilization",
    ),
    ("p-pricing-unknown", ["plan", "--input", "{file}", "--pricing", "reserved"], "unknown pricing model 'reserved'"),
    (
        "x-pricing-no-price",
        [
            "run",
            "--local",
            "--results",
            "{results}",
            "--lanes",
            "host_cpu",
            "--price-as",
            "c7i.large",
            "--pricing",
            "spot",
        ],
        "no spot price for c7i.large in us-west-2",
    ),
    (
        "x-redeploys-negative",
        ["run", "--local", "--results", "{results}", "--lanes", "host_cpu", "--redeploys", "-1"],
        "--redeploys",
    ),
    # ---- verify
    ("v-missing-store", ["verify", "--results", "{missing}"], "does not exist"),
    ("v-file-store", ["verify", "--results", "{file}"], "not a directory"),
    ("v-empty-results", ["verify", "--results", ""], "empty"),
    ("v-http-results", ["verify", "--results", "https://x/y"], "only local directories"),
    ("v-s3-no-bucket", ["verify", "--results", "s3://"], "names no bucket"),
    ("v-negative-age", ["verify", "--results", "{results}", "--repair", "--min-age-hours", "-1"], "--min-age-hours"),
    ("v-nan-age", ["verify", "--results", "{results}", "--repair", "--min-age-hours", "nan"], "--min-age-hours"),
    ("v-inf-age", ["verify", "--results", "{results}", "--repair", "--min-age-hours", "inf"], "--min-age-hours"),
    ("v-text-age", ["verify", "--results", "{results}", "--min-age-hours", "soon"], "invalid float value"),
    ("v-unknown-flag", ["verify", "--results", "{results}", "--fix"], "unrecognized arguments"),
    # ---- loadgen (validated before any request; the server is a closed port)
    (
        "l-negative-input-len",
        [
            "loadgen",
            "--base-url",
            CLOSED,
            "--input-len",
            "-1",
            "--output-len",
            "4",
            "--concurrency",
            "1",
            "--num-prompts",
            "1",
        ],
        "--input-len",
    ),
    (
        "l-zero-output-len",
        [
            "loadgen",
            "--base-url",
            CLOSED,
            "--input-len",
            "8",
            "--output-len",
            "0",
            "--concurrency",
            "1",
            "--num-prompts",
            "1",
        ],
        "--output-len",
    ),
    ("l-zero-concurrency", [*LOAD, "--concurrency", "0", "--num-prompts", "1"], "--concurrency"),
    ("l-negative-concurrency", [*LOAD, "--concurrency", "2,-1", "--num-prompts", "1"], "--concurrency"),
    ("l-empty-concurrency", [*LOAD, "--concurrency", "", "--num-prompts", "1"], "--concurrency"),
    ("l-text-concurrency", [*LOAD, "--concurrency", "many", "--num-prompts", "1"], "--concurrency"),
    ("l-zero-rate", [*LOAD, "--request-rate", "0", "--num-prompts", "1"], "--request-rate"),
    ("l-nan-rate", [*LOAD, "--request-rate", "nan", "--num-prompts", "1"], "--request-rate"),
    ("l-zero-prompts", [*LOAD, "--concurrency", "1", "--num-prompts", "0"], "--num-prompts"),
    ("l-no-prompts-no-duration", [*LOAD, "--concurrency", "1"], "--num-prompts or --duration"),
    ("l-negative-duration", [*LOAD, "--concurrency", "1", "--duration", "-5"], "--duration"),
    ("l-window-without-duration", [*LOAD, "--concurrency", "1", "--num-prompts", "2", "--window-s", "5"], "--window-s"),
    ("l-zero-burstiness", [*LOAD, "--request-rate", "1", "--num-prompts", "1", "--burstiness", "0"], "--burstiness"),
    (
        "l-zero-max-concurrency",
        [*LOAD, "--request-rate", "1", "--num-prompts", "1", "--max-concurrency", "0"],
        "--max-concurrency",
    ),
    (
        "l-zero-idle-timeout",
        [*LOAD, "--concurrency", "1", "--num-prompts", "1", "--idle-timeout", "0"],
        "--idle-timeout",
    ),
    ("l-goodput-negative", [*LOAD, "--concurrency", "1", "--num-prompts", "1", "--goodput", "ttft:-1"], "goodput"),
    ("l-goodput-unknown", [*LOAD, "--concurrency", "1", "--num-prompts", "1", "--goodput", "speed:1"], "goodput"),
    (
        "l-bad-run-id",
        [*LOAD, "--concurrency", "1", "--num-prompts", "1", "--results", "{dir}/lg", "--run-id", "a/b"],
        "--run-id",
    ),
    (
        "l-run-id-81",
        [*LOAD, "--concurrency", "1", "--num-prompts", "1", "--results", "{dir}/lg", "--run-id", "a" * 81],
        "--run-id",
    ),
    (
        "l-run-id-non-ascii",
        [*LOAD, "--concurrency", "1", "--num-prompts", "1", "--results", "{dir}/lg", "--run-id", "r\u0663"],
        "--run-id",
    ),
    (
        "l-search-rate-max-1e9",
        [*LOAD, "--search", "capacity", "--slo", "ttft_ms=100,tpot_ms=10", "--rate-max", "1e9"],
        "--rate-max: at most 100,000 req/s",
    ),
    (
        "l-search-rate-min-1e300",
        [*LOAD, "--search", "capacity", "--slo", "ttft_ms=100,tpot_ms=10", "--rate-min", "1e300"],
        "--rate-min: at most 100,000 req/s",
    ),
    (
        "l-search-point-duration",
        [*LOAD, "--search", "capacity", "--slo", "ttft_ms=100,tpot_ms=10", "--point-duration", "1e12"],
        "--point-duration: at most 86,400 s",
    ),
    (
        "l-workload-think-time",
        [
            *LOADW,
            "--num-prompts",
            "1",
            "--workload",
            '{{"turns": 2, "think_time_s": 1e9, "arrival": {{"concurrency": [1]}}}}',
        ],
        "workloads.workload.think_time_s: at most 3,600",
    ),
    (
        "l-workload-normal-mean",
        [
            *LOADW,
            "--num-prompts",
            "1",
            "--workload",
            '{{"input": {{"dist": "normal", "mean": 1e308, "stdev": 1}}, "arrival": {{"concurrency": [1]}}}}',
        ],
        "workloads.workload.input.mean: at most",
    ),
    (
        "l-workload-weights",
        [
            *LOADW,
            "--num-prompts",
            "1",
            "--workload",
            '{{"input": {{"dist": "empirical", "values": [4, 8], "weights": [1e308, 1e308]}}, '
            '"arrival": {{"concurrency": [1]}}}}',
        ],
        "workloads.workload.input.weights[0]: at most",
    ),
    (
        "l-workload-trace-dir",
        [*LOADW, "--workload", '{{"arrival": {{"kind": "trace", "path": "{dir}"}}}}'],
        "is a directory",
    ),
    (
        "l-workload-trace-fifo",
        [*LOADW, "--workload", '{{"arrival": {{"kind": "trace", "path": "{fifo}"}}}}'],
        "named pipe (FIFO), not a regular file",
    ),
    (
        "l-workload-trace-gap",
        [*LOADW, "--workload", '{{"arrival": {{"kind": "trace", "path": "{gap_trace}"}}}}'],
        ":2: timestamp 1e+15 is 1e+12 s after the first request",
    ),
    (
        "l-workload-dataset-device",
        [
            *LOADW,
            "--num-prompts",
            "1",
            "--workload",
            '{{"prompts": {{"source": "jsonl", "path": "/dev/zero"}}, "arrival": {{"concurrency": [1]}}}}',
        ],
        "character device, not a regular file",
    ),
    (
        "l-workload-ramp-sends-nothing",
        [*LOADW, "--workload", '{{"arrival": {{"kind": "ramp", "from_rate": 0.001, "to_rate": 0.001, "over_s": 5}}}}'],
        "nothing would be sent",
    ),
    ("l-results-is-file", [*LOAD, "--concurrency", "1", "--num-prompts", "1", "--results", "{file}"], "--results"),
    ("l-results-under-file", [*LOAD, "--concurrency", "1", "--num-prompts", "1", "--results", "{file}/r"], "--results"),
    (
        "l-save-json-is-dir",
        [*LOAD, "--concurrency", "1", "--num-prompts", "1", "--save-vllm-json", "{dir}"],
        "--save-vllm-json",
    ),
    (
        "l-save-json-under-file",
        [*LOAD, "--concurrency", "1", "--num-prompts", "1", "--save-vllm-json", "{file}/out.json"],
        "--save-vllm-json",
    ),
    (
        "l-sharegpt-missing",
        [*LOAD, "--concurrency", "1", "--num-prompts", "1", "--prompt-source", "sharegpt", "--sharegpt", "{missing}"],
        "--sharegpt",
    ),
    (
        "l-sharegpt-not-utf8",
        [*LOAD, "--concurrency", "1", "--num-prompts", "1", "--prompt-source", "sharegpt", "--sharegpt", "{nonutf8}"],
        "UTF-8",
    ),
    (
        "l-sharegpt-is-dir",
        [*LOAD, "--concurrency", "1", "--num-prompts", "1", "--prompt-source", "sharegpt", "--sharegpt", "{dir}"],
        "directory",
    ),
    (
        "l-sharegpt-without-source",
        [*LOAD, "--concurrency", "1", "--num-prompts", "1", "--sharegpt", "{file}"],
        "--sharegpt",
    ),
    (
        "l-source-without-file",
        [*LOAD, "--concurrency", "1", "--num-prompts", "1", "--prompt-source", "sharegpt"],
        "--sharegpt",
    ),
    (
        "l-bad-base-url",
        [
            "loadgen",
            "--base-url",
            "ftp://x",
            "--input-len",
            "8",
            "--output-len",
            "4",
            "--concurrency",
            "1",
            "--num-prompts",
            "1",
        ],
        "--base-url",
    ),
    # ---- plan
    ("p-missing-input", ["plan", "--input", "{missing}"], "cannot read"),
    ("p-dir-input", ["plan", "--input", "{dir}"], "cannot read"),
    ("p-not-json", ["plan", "--input", "{not_json}"], "not JSON"),
    ("p-not-utf8", ["plan", "--input", "{nonutf8}"], "UTF-8"),
    ("p-json-list", ["plan", "--input", "{list_json}"], "input"),
    ("p-config-unknown-field", ["plan", "--input", "{cfg_bad}"], "bogus_field"),
    ("p-duplicate-key", ["plan", "--input", "{dup_json}"], 'duplicate key "steps" at $.lane_config.sft.steps'),
    ("p-deep", ["plan", "--input", "{deep_json}"], "nested deeper than 64 levels"),
    ("p-huge-int", ["plan", "--input", "{huge_json}"], "number literal of 6,000 characters"),
    ("p-fifo", ["plan", "--input", "{fifo}"], "named pipe (FIFO), not a regular file"),
    ("p-device", ["plan", "--input", "/dev/zero"], "character device"),
    ("p-rag-missing-corpus", ["plan", "--local", "--input", "{rag_missing}"], "rag.corpus: "),
    ("p-rag-empty-corpus", ["plan", "--local", "--input", "{rag_empty}"], "empty"),
    ("p-rag-unknown-store", ["plan", "--input", "{rag_store}"], "unknown store 'qdrant'"),
    ("p-rag-slo-no-bound", ["plan", "--input", "{rag_slo}"], "rag_slo: no bound"),
    ("x-rag-empty-corpus", ["run", "--local", "--results", "{results}", "--input", "{rag_empty}"], "empty"),
    ("x-huge-int", ["run", "--local", "--results", "{results}", "--input", "{huge_json}"], "6,000 characters"),
    ("x-empty-input", ["run", "--local", "--results", "{results}", "--input", ""], "the path is empty"),
    # ---- run --local (the lane launcher is replaced: an accepted input fails the case)
    (
        "x-results-under-a-file",
        ["run", "--local", "--results", "{file}/sub", "--lanes", "provenance"],
        "is a file, so the results root cannot be created",
    ),
    ("x-empty-lanes", ["run", "--local", "--results", "{results}", "--lanes", ""], "--lanes"),
    ("x-comma-lanes", ["run", "--local", "--results", "{results}", "--lanes", ","], "--lanes"),
    ("x-unknown-lane", ["run", "--local", "--results", "{results}", "--lanes", "nope"], "nope"),
    ("x-run-id-slash", ["run", "--local", "--results", "{results}", "--lanes", "host_cpu", "--run-id", "a/b"], "'a/b'"),
    ("x-missing-input", ["run", "--local", "--results", "{results}", "--input", "{missing}"], "cannot read"),
    ("x-not-utf8-input", ["run", "--local", "--results", "{results}", "--input", "{nonutf8}"], "UTF-8"),
    ("x-config-unknown-field", ["run", "--local", "--results", "{results}", "--input", "{cfg_bad}"], "bogus_field"),
    ("x-results-is-file", ["run", "--local", "--results", "{file}", "--lanes", "host_cpu"], "not a directory"),
    # ---- import vllm-bench (every file read before the store is opened)
    ("i-vllm-not-json", [*VB, "{not_json}"], "not JSON"),
    ("i-vllm-list-json", [*VB, "{list_json}"], "expected a JSON object"),
    ("i-vllm-not-vllm", [*VB, "{cfg_bad}"], "missing keys model_id"),
    ("i-vllm-missing", [*VB, "{missing}"], "cannot read"),
    ("i-vllm-dir", [*VB, "{dir}"], "is a directory"),
    ("i-vllm-jsonl-broken-line", [*VB, "{broken_jsonl}"], "broken.jsonl:3: not JSON: Expecting"),
    ("i-vllm-not-json-once", [*VB, "{not_json}"], "not.json: not JSON: Expecting"),
    (
        "i-vllm-no-label",
        ["import", "vllm-bench", "--results", "{results}", "--instance-type", "t", "{file}"],
        "--label",
    ),
]


def _snapshot(root: Path) -> dict[str, tuple[str, int]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            out[os.path.relpath(os.path.join(dirpath, name), root) + "/"] = ("dir", 0)
        for name in filenames:
            p = os.path.join(dirpath, name)
            if not stat.S_ISREG(os.lstat(p).st_mode):  # the FIFO: never opened
                out[os.path.relpath(p, root)] = ("special", os.lstat(p).st_mode)
                continue
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = (hashlib.sha256(fh.read()).hexdigest(), os.stat(p).st_mode)
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """One small results store and the bad input files, shared by every case (read-only for them)."""
    root = tmp_path_factory.mktemp("bad-inputs")
    store = LocalStore(root / "results")
    w = store.begin_attempt("r1", "host_cpu")
    w.add_rows("host_bench", [{"bench": "triad", "threads": 1, "value": 10.0, "unit": "GB/s"}])
    w.add_rows(
        "lane_runs",
        [
            {
                "status": "succeeded",
                "supersedes": True,
                "started_at": T0,
                "ended_at": T0,
                "wall_s": 1.0,
                "backend": "cpu",
                "host": "h",
            }
        ],
    )
    w.commit("succeeded")
    (root / "a-file.txt").write_text("not a directory\n")
    (root / "latin1.json").write_bytes('{"lanes": ["host_cpu"], "note": "caf\xe9"}'.encode("latin-1"))
    (root / "list.json").write_text("[]")
    (root / "not.json").write_text("{lanes: host_cpu")
    (root / "empty-corpus.txt").write_text("")
    for name, cfg in {
        "rag-missing": {"corpus": str(root / "no-corpus.txt")},
        "rag-empty": {"corpus": str(root / "empty-corpus.txt")},
        "rag-store": {"store": "qdrant"},
        "rag-slo": {"rag_slo": {"percentile": 99}},
    }.items():
        (root / f"{name}.json").write_text(json.dumps({"lanes": ["rag"], "lane_config": {"rag": cfg}}))
    (root / "cfg-bad.json").write_text(
        json.dumps({"lanes": ["host_cpu"], "lane_config": {"host_cpu": {"bogus_field": 1}}})
    )
    (root / "dup.json").write_text('{"lanes": ["sft"], "lane_config": {"sft": {"steps": 1,\n "steps": 2}}}')
    (root / "deep.json").write_text("[" * 5000 + "]" * 5000)
    (root / "huge.json").write_text('{"lanes": ["sft"], "lane_config": {"sft": {"steps": ' + "9" * 6000 + "}}}")
    good = {
        "model_id": "m",
        "num_prompts": 4,
        "request_rate": "inf",
        "duration": 2.0,
        "completed": 4,
        "total_input_tokens": 64,
        "total_output_tokens": 32,
        "request_throughput": 2.0,
        "output_throughput": 16.0,
        "mean_ttft_ms": 10.0,
    }
    (root / "broken.jsonl").write_text(json.dumps(good) + "\n" + json.dumps(good) + "\n" + '{"model_id": "m", x\n')
    (root / "gap.jsonl").write_text(
        "".join(json.dumps({"timestamp": t, "input_length": 8, "output_length": 4}) + "\n" for t in (0, 1e15))
    )
    os.mkfifo(root / "fifo")  # opening it would block: never opened
    (root / "dir").mkdir()
    paths = {
        "results": str(root / "results"),
        "file": str(root / "a-file.txt"),
        "dir": str(root / "dir"),
        "missing": str(root / "no-such"),
        "nonutf8": str(root / "latin1.json"),
        "list_json": str(root / "list.json"),
        "not_json": str(root / "not.json"),
        "cfg_bad": str(root / "cfg-bad.json"),
        **{f"rag_{k}": str(root / f"rag-{k}.json") for k in ("missing", "empty", "store", "slo")},
        "dup_json": str(root / "dup.json"),
        "deep_json": str(root / "deep.json"),
        "huge_json": str(root / "huge.json"),
        "fifo": str(root / "fifo"),
        "broken_jsonl": str(root / "broken.jsonl"),
        "gap_trace": str(root / "gap.jsonl"),
    }
    return root, paths


def _problem_lines(stderr: str) -> list[str]:
    """stderr less argparse's usage block (``usage:`` and its indented continuation lines)."""
    return [
        line
        for line in stderr.splitlines()
        if line.strip() and not line.startswith("usage:") and not line.startswith(" ")
    ]


@pytest.mark.parametrize("case", [pytest.param(c[:3], id=c[0], marks=c[3:]) for c in CASES])
def test_bad_input_gets_one_line_and_changes_nothing(case, world, capsys, monkeypatch):
    import control_plane.local

    def accepted(*args, **kwargs):
        raise AssertionError("input accepted: lanes would have run")

    monkeypatch.setattr(control_plane.local, "run_local", accepted)
    monkeypatch.setattr(control_plane.local, "run_plan", accepted)
    _name, argv, fragment = case
    root, paths = world
    argv = [a.format(**paths) for a in argv]
    before = _snapshot(root)
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse refusals
        code = exc.code
    captured = capsys.readouterr()
    lines = _problem_lines(captured.err)
    assert code not in (0, None), f"accepted (exit {code}); stdout: {captured.out[-300:]}"
    assert "Traceback" not in captured.err
    assert len(lines) == 1, lines
    assert fragment in lines[0], lines[0]
    assert _snapshot(root) == before


def test_the_table_is_big_enough():
    assert len(CASES) >= 60
    assert {c[1][0] for c in CASES} >= {"plan", "run", "query", "report", "loadgen", "verify"}
