"""`control_plane.console.make_console`: off a terminal nothing is wrapped or cut; on one, tables fit its width."""

from __future__ import annotations

import io

from rich.cells import cell_len
from rich.table import Table

from control_plane.console import make_console

LONG = "/work/" + "/".join(f"a-rather-long-directory-name-{i:02d}" for i in range(12)) + "/REPORT.md"


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def table(cell: str) -> Table:
    t = Table(title="plan")
    for col in ("lane", "config"):
        t.add_column(col)
    t.add_row("host_cpu@trn1", cell)
    return t


def test_off_a_terminal_lines_and_cells_stay_whole_whatever_columns_says(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")  # CI runners set it; a pipe is still not a terminal
    out = io.StringIO()
    console = make_console(file=out)
    console.print(f"report: [bold]{LONG}[/bold]  (4 plots)")
    console.print(table(LONG))
    lines = out.getvalue().splitlines()
    assert f"report: {LONG}  (4 plots)" in lines
    assert any(line.startswith("│ host_cpu@trn1 │ ") and line.endswith(f"{LONG} │") for line in lines), lines
    assert "…" not in out.getvalue() and "\x1b[" not in out.getvalue()  # nothing cut, no escape codes


def test_on_a_terminal_tables_fit_its_width(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    out = FakeTerminal()
    console = make_console(file=out)
    assert console.is_terminal and console.width == 80
    console.print(table(LONG))
    lines = [_plain(line) for line in out.getvalue().splitlines()]
    assert any(line.startswith("│ host_cpu@trn1") for line in lines), lines
    assert max(cell_len(line) for line in lines) <= 80, lines


def test_stderr_console_follows_the_stream_it_writes_to(capsys):
    console = make_console(stderr=True)
    console.print(LONG)
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [LONG] and captured.out == ""


def _plain(line: str) -> str:
    import re

    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", line)
