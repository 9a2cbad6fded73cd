"""`neuronpipe` as a person runs it, for the tests that drive whole local runs: the command in a subprocess, and
`query` over the results it wrote (in this process: the tests read rows, `neuronpipe query` itself is tested in
tests/functional/test_query_read_only.py and test_cli_output_off_tty.py)."""

from __future__ import annotations

import json
import subprocess
import sys


def neuronpipe(*args: str, check: bool = True, timeout: float = 900) -> subprocess.CompletedProcess:
    out = subprocess.run(
        [sys.executable, "-m", "control_plane.cli", *args], capture_output=True, text=True, timeout=timeout
    )
    if check:
        assert out.returncode == 0, out.stderr[-3000:] + out.stdout[-3000:]
    return out


def query(results: str, sql: str) -> list[dict]:
    """The rows ``neuronpipe query --format json`` prints for ``sql`` over ``results`` (values through JSON as it
    writes them), read in this process: a query process costs ~4 s of CPU (imports and every view bound), and most
    of these statements read views before the Decision files, which are bound only when a statement needs them."""
    import duckdb

    from analytics.store import open_store
    from analytics.views import connect, view_files_through

    store = open_store(results)
    for views in (view_files_through("70_aggregates.sql"), None):  # None: every view, for a Decision or capacity one
        con = connect(store, view_files=views)
        try:
            rel = con.sql(sql)
            cols = rel.columns
            return [json.loads(json.dumps(dict(zip(cols, row)), default=str)) for row in rel.fetchall()]
        except duckdb.CatalogException:
            if views is None:
                raise
        finally:
            con.close()
    raise AssertionError("unreachable")


def run_local(tmp_path, request: dict, run_id: str, check: bool = True) -> tuple[str, object]:
    """``neuronpipe run --local`` of ``request`` (written to ``tmp_path/run.json``); (results dir, report dir)."""
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
        run_id,
        "--no-live",
        check=check,
    )
    return results, report
