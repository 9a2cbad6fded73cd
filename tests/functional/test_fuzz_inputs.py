"""Generated bad input, for every command that takes a file, a path, a config or SQL: the contract holds.

The hand-made table (``test_cli_bad_inputs.py``) names the cases a person thought of; here hypothesis makes
them up: requests and lane configs (wrong types, huge and negative numbers, deep nesting, repeated keys as raw
text, NaN), JSON files (truncated, not UTF-8, BOM, deep, 10,000-digit numbers), paths (missing, directories,
FIFOs, devices, sockets, files inside the store, the store itself) and SQL (every writing statement, reads
of files outside the store, several statements). Each case runs the CLI in-process and must:

* end with the command's exit code for it: 2 refused (1 where the input is valid but the work fails, 0 for
  an input that is fine), never a traceback;
* name the problem on exactly one stderr line (argparse's usage lines aside; a request with several field
  problems gets one ``invalid request …`` / ``error: …`` line per problem, each with the same prefix);
* leave every results directory and input file byte-identical, block on nothing (a FIFO is never opened:
  a watchdog alarm fails the case instead of hanging), and leak no file outside the store through ``query``.

Seeded (``derandomize``) and time-boxed (``max_examples`` per property): the same cases on every run.
Nothing runs a lane: the local launcher and the box runner are replaced by :class:`Accepted`.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import io
import json
import os
import signal
import socket
import stat
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analytics.store import LocalStore
from tests.support.fuzz_inputs import FIELDS, LANES, RUN_IDS, VALUES, VLLM, json_files, sql_cases, workload_numbers

T0 = datetime(2026, 7, 1, 12, tzinfo=timezone.utc)
SECRET = "fuzz-secret-7d41c9"  # in a file beside the store: query must never print it
WATCHDOG_S = 30  # a case still running after this is blocked (a FIFO opened, a device read without end)
FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=False,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)
VB = ["import", "vllm-bench", "--label", "fuzz", "--instance-type", "t"]


class Accepted(BaseException):
    """The input passed every check and lanes would run now (the launchers are replaced by this)."""


class Blocked(BaseException):
    """The watchdog fired: the command blocked on its input."""


class World(dict):
    """The module's store and paths (``root``, ``results``, ``paths``, ``n`` cases run); short in a failure."""

    def __repr__(self) -> str:
        return f"World({self['root']})"


# ---- the world: one store, the paths of every kind, a secret beside them ------------------------------------
@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    store = LocalStore(root / "results")
    for run_id in ("r1", "r2"):
        w = store.begin_attempt(run_id, "host_cpu")
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
    (root / "secret.txt").write_text(SECRET + "\n")
    (root / "a-file.txt").write_text("not a directory\n")
    (root / "empty-dir").mkdir()
    os.mkfifo(root / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "sock"))
    (root / "inputs").mkdir()
    (root / "scratch").mkdir()
    trace = root / "trace.jsonl"
    trace.write_text(
        "".join(json.dumps({"timestamp": t, "input_length": 16, "output_length": 8}) + "\n" for t in (0, 250, 500))
    )
    results = root / "results"
    parquet = next(results.rglob("*.parquet"))
    marker = next(results.rglob("_commits/**/*.json"))
    paths = {
        "missing": root / "no-such",
        "dir": root / "empty-dir",
        "fifo": root / "fifo",
        "sock": root / "sock",
        "devnull": Path("/dev/null"),
        "devzero": Path("/dev/zero"),
        "file": root / "a-file.txt",
        "under_file": root / "a-file.txt" / "sub",
        "secret": root / "secret.txt",
        "store": results,
        "in_store_dir": results / "v1",
        "in_store_new": results / "v1" / "fuzz-out",
        "parquet": parquet,
        "marker": marker,
        "empty": "",
        "not_utf8_name": root / "r\udcff.json",
    }
    try:
        with pytest.MonkeyPatch.context() as mp:
            import agents.runner
            import control_plane.local

            def accepted(*_a, **_k):
                raise Accepted()

            for name in ("run_local", "run_plan"):
                if hasattr(control_plane.local, name):
                    mp.setattr(control_plane.local, name, accepted)
            mp.setattr(agents.runner, "run_lane", accepted)
            world = World(root=root, results=results, paths=paths, n=[0], trace=trace)
            yield world
            print(f"\nfuzz: {world['n'][0]} cases run through the CLI's contract")  # the closing figure (-s)
    finally:
        sock.close()


def _snapshot(root: Path, skip: str | None = None) -> dict[str, object]:
    """Every directory and file under ``root`` (but ``skip``): content hash and mode; a FIFO is never opened."""
    out: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if skip is not None and dirpath == str(root):
            dirnames[:] = [d for d in dirnames if d != skip]
        for name in dirnames:
            out[os.path.relpath(os.path.join(dirpath, name), root) + "/"] = "dir"
        for name in filenames:
            p = os.path.join(dirpath, name)
            st_ = os.lstat(p)
            if stat.S_ISREG(st_.st_mode):
                with open(p, "rb") as fh:
                    out[os.path.relpath(p, root)] = (hashlib.sha256(fh.read()).hexdigest(), st_.st_mode)
            else:
                out[os.path.relpath(p, root)] = ("special", stat.S_IFMT(st_.st_mode))
    return out


def _watchdog(_signum, _frame):
    raise Blocked(f"blocked for {WATCHDOG_S} s")


def cli(argv: list[str], module: str = "control_plane.cli") -> tuple[int, str, str]:
    """``main(argv)`` in-process: (exit code, stdout, stderr); ``Accepted`` reads as exit 0."""
    main = importlib.import_module(module).main
    out, err = io.StringIO(), io.StringIO()
    old = signal.signal(signal.SIGALRM, _watchdog)
    signal.alarm(WATCHDOG_S)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse
                code = exc.code if isinstance(exc.code, int) else 2
            except Accepted:
                code = 0
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return int(code or 0), out.getvalue(), err.getvalue()


def problem_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith("usage:") and not ln.startswith(" ")]


def check(
    world,
    argv: list[str],
    codes: set[int],
    many_ok: bool = False,
    module: str = "control_plane.cli",
    files: tuple[Path, ...] = (),
    scratch: Path | None = None,
) -> tuple[int, str, str]:
    """Run one case and assert the contract; returns (code, stdout, stderr) for case-specific checks.
    ``scratch``: the case's own results directory, written only when the input is accepted."""
    world["n"][0] += 1
    before = _snapshot(world["root"], "scratch"), [p.read_bytes() for p in files]
    code, out, err = cli([str(a) for a in argv], module)
    assert "Traceback" not in err, err[-2000:]
    assert code in codes, f"exit {code} (wanted {sorted(codes)}) for {argv!r}: {err[-500:]}"
    if code == 2:
        lines = problem_lines(err)
        assert lines, f"refused without a line: {argv!r}"
        if many_ok:  # one line per field problem, each with the first line's prefix
            prefix = lines[0].split(": ", 1)[0]
            assert all(ln.startswith(prefix) for ln in lines), lines
        else:
            assert len(lines) == 1, lines
    assert (_snapshot(world["root"], "scratch"), [p.read_bytes() for p in files]) == before, (
        f"something changed: {argv!r}"
    )
    if code != 0 and scratch is not None:
        assert not os.path.lexists(scratch), f"a refusal wrote {scratch}: {argv!r}"
    return code, out, err


def _write(world, raw: bytes, suffix: str = ".json") -> Path:
    path = world["root"] / "inputs" / f"case-{hashlib.sha256(raw).hexdigest()[:16]}{suffix}"
    path.write_bytes(raw)
    return path


def _scratch(world) -> Path:
    """A results directory of its own for a case that may be accepted (never created by a refusal)."""
    return world["root"] / "scratch" / f"s{world['n'][0]}"


# ---- requests: plan --input, plan --local, run --local --input ---------------------------------------------
@settings(FUZZ, max_examples=160)
@given(raw=json_files())
def test_generated_request_files_are_planned_or_refused_in_lines_naming_each_problem(world, raw):
    path = _write(world, raw)
    check(world, ["plan", "--input", path], {0, 2}, many_ok=True, files=(path,))
    check(
        world, ["plan", "--local", "--input", path, "--results", world["results"]], {0, 2}, many_ok=True, files=(path,)
    )


@settings(FUZZ, max_examples=100)
@given(raw=json_files())
def test_generated_request_files_reach_run_local_only_when_valid(world, raw):
    path, scratch = _write(world, raw), _scratch(world)
    check(
        world,
        ["run", "--local", "--input", path, "--results", scratch, "--no-live"],
        {0, 2},
        many_ok=True,
        files=(path,),
        scratch=scratch,
    )


@settings(FUZZ, max_examples=60)
@given(
    config=st.dictionaries(st.sampled_from(FIELDS), VALUES, max_size=4) | VALUES,
    lane=st.sampled_from(LANES),
    how=st.sampled_from(["json", "file", "dup", "deep", "huge", "nan", "bad"]),
)
def test_generated_lane_configs_on_the_box_are_refused_in_one_line(world, config, lane, how):
    text = {
        "json": json.dumps(config),
        "file": json.dumps(config),
        "dup": '{"a": 1, "a": 2}',
        "deep": "[" * 5000 + "]" * 5000,
        "huge": '{"steps": ' + "7" * 6000 + "}",
        "nan": '{"steps": NaN}',
        "bad": json.dumps(config)[:-1],
    }[how]
    arg, scratch = f"@{_write(world, text.encode())}" if how == "file" else text, _scratch(world)
    check(
        world,
        ["run-lane", lane, "--run-id", "fz", "--results", scratch, "--config", arg],
        {0, 2},
        module="agents.__main__",
        scratch=scratch,
    )


# ---- workloads: a number beyond its field's bound is refused naming the field --------------------------------
@settings(FUZZ, max_examples=120)
@given(case=workload_numbers(), local=st.booleans())
def test_a_workload_number_beyond_its_bound_is_refused_naming_its_field(world, case, local):
    doc, field, hostile = case
    doc = json.loads(json.dumps(doc).replace("{trace}", str(world["trace"])))
    path = _write(world, json.dumps({"lanes": ["serve_sweep"], "profile": "tiny", "workloads": {"w": doc}}).encode())
    argv = ["plan", "--local", "--input", path, "--results", world["results"]] if local else ["plan", "--input", path]
    _code, _out, err = check(world, argv, {2} if hostile else {0, 2}, many_ok=True, files=(path,))
    if hostile:
        assert any(f"workloads.w.{field}" in ln for ln in problem_lines(err)), (field, err[-600:])


# ---- run ids: every command that takes one applies the control plane's rule ---------------------------------
@settings(FUZZ, max_examples=80)
@given(run_id=RUN_IDS, command=st.sampled_from(["query", "report", "loadgen", "run"]))
def test_every_command_taking_a_run_id_applies_the_control_planes_rule(world, run_id, command):
    from control_plane.run_ids import RunIdError, check_run_id

    try:
        check_run_id(run_id)
        valid = True
    except RunIdError:
        valid = False
    results, scratch = world["results"], _scratch(world)
    argv = {
        "query": ["query", "--results", results, "--run-id", run_id, "select 1"],
        "report": ["report", "--results", results, "--run-id", run_id, "--out", scratch],
        "loadgen": [
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
            "--results",
            scratch,
            "--run-id",
            run_id,
        ],
        "run": ["run", "--local", "--results", scratch, "--lanes", "host_cpu", "--run-id", run_id, "--no-live"],
    }[command]
    code, _out, err = check(world, argv, {0, 1, 2} if valid else {2}, scratch=scratch)
    said = [ln for ln in problem_lines(err) if "invalid run" in ln or "--run-id" in ln]
    assert bool(said) is not valid, (run_id, err[-400:])


# ---- vllm bench result files ---------------------------------------------------------------------------------
@settings(FUZZ, max_examples=80)
@given(raw=json_files(VLLM), lines=st.integers(1, 3))
def test_generated_vllm_bench_files_are_imported_or_refused_in_one_line(world, raw, lines):
    path, scratch = _write(world, b"\n".join([raw] * lines)), _scratch(world)
    check(world, [*VB, "--results", scratch, path], {0, 2}, files=(path,), scratch=scratch)


# ---- paths, for every command that takes one: every kind with every command (the product is small) ----------
PATH_KINDS = (
    "missing",
    "dir",
    "fifo",
    "sock",
    "devnull",
    "devzero",
    "file",
    "under_file",
    "secret",
    "store",
    "in_store_dir",
    "in_store_new",
    "parquet",
    "marker",
    "empty",
    "not_utf8_name",
)
PATH_COMMANDS = (
    "plan",
    "plan-local",
    "run",
    "import",
    "query",
    "verify",
    "report-results",
    "report-out",
    "compare",
    "trace-local",
    "dataset-local",
)
# a workload's file in a local plan: checked to be a regular file at plan time (read on the box, or by the lane)
REGULAR = ("file", "secret", "parquet", "marker")
# What is a fine input and would only do the command's work (a whole report built): the report tests' business.
FINE = {("report-results", "store"), ("report-out", "missing"), ("report-out", "dir")}


@pytest.mark.parametrize("command, kind", [(c, k) for c in PATH_COMMANDS for k in PATH_KINDS if (c, k) not in FINE])
def test_every_kind_of_path_is_refused_in_one_line_or_used_without_a_write(world, command, kind):
    p, results, scratch = world["paths"][kind], world["results"], _scratch(world)
    if command in ("trace-local", "dataset-local"):
        spec = (
            {"arrival": {"kind": "trace", "path": str(p)}}
            if command == "trace-local"
            else {"prompts": {"source": "jsonl", "path": str(p)}}
        )
        request = _write(
            world,
            json.dumps(
                {"lanes": ["serve_sweep"], "profile": "tiny", "workloads": {"w": spec}}, ensure_ascii=False
            ).encode("utf-8", "surrogateescape"),
        )
        check(
            world,
            ["plan", "--local", "--input", request, "--results", results],
            {0} if kind in REGULAR else {2},
            many_ok=True,
            files=(request,),
        )
        return
    store_ok = {0, 1} if kind == "store" else {0, 1, 2} if kind in ("dir", "in_store_dir") else set()
    argv, codes = {  # a directory that is not a store may be refused or read as holding nothing; never written
        "plan": (["plan", "--input", p], {2}),
        "plan-local": (["plan", "--local", "--input", p], {2}),
        "run": (["run", "--local", "--input", p, "--results", scratch, "--no-live"], {2}),
        "import": ([*VB, "--results", scratch, p], {2}),
        "query": (["query", "--results", p, "select count(*) from host_bench"], store_ok - {1} or {2}),
        "verify": (["verify", "--results", p], store_ok or {2}),
        "report-results": (["report", "--results", p, "--out", scratch], store_ok or {2}),
        "report-out": (["report", "--results", results, "--out", p], {2}),
        # r1 and r2 share no headline metric: a comparison of nothing exits 4
        "compare": (["compare", "--results", p, "r1", "r2"], store_ok | {2, 4} if store_ok else {2}),
    }[command]
    check(world, argv, codes, many_ok=command in ("plan", "plan-local", "run"), scratch=scratch)


@pytest.fixture
def table_views_only(monkeypatch):
    """The derived views are not what is fuzzed here (the table views and the sandbox are): skip creating them,
    a tenth of a query's time."""
    import analytics.views

    monkeypatch.setattr(analytics.views, "create_derived_views", lambda con, names=None: None)


@settings(FUZZ, max_examples=400)
@given(case=sql_cases())
def test_every_generated_write_is_classified_as_refused_and_every_read_as_a_read(case):
    from control_plane.commands.query import QueryRefusedError, read_statements

    template, holds = case
    sql = template.format(
        results="/r", root="/w", secret="/w/s", parquet="/r/p.parquet", marker="/r/m.json", fifo="/w/f"
    )
    if holds == "write":
        with pytest.raises(
            QueryRefusedError,
            match=r"^query runs only reads .*; (the statement|statement \d of \d) "
            r"is (a|an) .*: \S",
        ):
            read_statements(sql)
    else:
        assert len(read_statements(sql)) >= 1


@settings(FUZZ, max_examples=70)
@given(case=sql_cases(), fmt=st.sampled_from(["table", "csv", "json"]))
def test_generated_sql_reads_only_the_store_and_writes_nothing(world, table_views_only, case, fmt):
    template, holds = case
    names = {k: str(world["paths"][k]).replace("'", "''") for k in ("secret", "parquet", "marker", "fifo")}
    sql = template.format(results=world["results"], root=world["root"], **names)
    code, out, _err = check(
        world, ["query", "--results", world["results"], "--format", fmt, "--timeout", "20", sql], {0, 2}
    )
    assert SECRET not in out and "root:" not in out
    if holds == "write":  # refused before anything ran
        assert code == 2 and out == "", out[:300]


@settings(FUZZ, max_examples=40)
@given(sql=st.text(max_size=60))
def test_arbitrary_text_as_sql_is_run_or_refused_in_one_line(world, table_views_only, sql):
    check(world, ["query", "--results", world["results"], "--timeout", "20", sql], {0, 2})


CONTROLS = "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]"


@settings(FUZZ, max_examples=60)
@given(
    text=st.text(st.characters(blacklist_characters="\x00"), max_size=24)
    | st.sampled_from(["\x1b[2J\x1b]0;t\x07", "\x9b31m", "a\u202eb", "\r\x08\x7f", "\u2066x\u2069"]),
    fmt=st.sampled_from(["table", "csv", "json"]),
)
def test_a_stored_string_is_printed_with_no_control_character(world, table_views_only, text, fmt):
    """Whatever a string holds (a box wrote it), ``query`` prints its control characters as escapes."""
    import re

    literal = text.replace("'", "''")
    _code, out, _err = check(
        world, ["query", "--results", world["results"], "--format", fmt, f"select '{literal}' as s"], {0}
    )
    assert not re.search(CONTROLS, out), repr(out)


# ---- a few as real processes: the same contract from a shell ------------------------------------------------
@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["plan", "--input", "{fifo}"], "named pipe"),
        ([*VB, "--results", "{scratch}", "{fifo}"], "named pipe"),
        (["plan", "--input", "/dev/zero"], "character device"),
        (["plan", "--input", "{huge}"], "number literal of 6,000 characters"),
        (["plan", "--input", "{deep}"], "nested deeper than 64 levels"),
        (["query", "--results", "{results}", "ATTACH '{results}/x.duckdb'"], "ATTACH statement"),
    ],
)
def test_bad_input_from_a_shell_gets_one_line_and_exit_2(world, argv, fragment):
    root = world["root"]
    (root / "inputs" / "huge.json").write_text('{"lane_config": {"smoke": {"steps": ' + "9" * 6000 + "}}}")
    (root / "inputs" / "deep.json").write_text("[" * 5000 + "]" * 5000)
    names = {
        "fifo": root / "fifo",
        "scratch": root / "scratch" / "shell",
        "results": world["results"],
        "huge": root / "inputs" / "huge.json",
        "deep": root / "inputs" / "deep.json",
    }
    before = _snapshot(root)
    proc = subprocess.run(
        [sys.executable, "-m", "control_plane.cli", *[a.format(**names) for a in argv]],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    lines = problem_lines(proc.stderr)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert len(lines) == 1 and fragment in lines[0], lines
    assert _snapshot(root) == before
