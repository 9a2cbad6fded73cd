"""REPORT.html's size and open time in headless Chromium, for a store (not a test: it prints figures).

    .venv/bin/python benchmarks/html_report.py --results results --out /tmp/html-bench [--run-id RUN ...]
    .venv/bin/python benchmarks/html_report.py --synthetic            # tests/support/report_store.py's store
    .venv/bin/python benchmarks/html_report.py --page report/REPORT.html   # an existing page, as it is

For the page it prints: the file's size split into plotly.js, the embedded data (comparison.json, distributions)
and the rest; then, over --repeats fresh page loads in one browser (the first load warms the disk cache), the
milliseconds from navigation to: the page's scripts starting (the HTML read), the data parsed, every table filled
(the outcome and the Decision readable), plotly.js evaluated, the first screen's charts drawn (what "open" means
here: npReport.ready), and every chart drawn (drawAll, as a print or a full screenshot forces). Medians; wall clock on
whatever machine runs it (shared CPUs make it noisy). The target: the first screen in under 2 s for a full-profile run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.support: the synthetic store and the browser launch live with the tests


def build(args: argparse.Namespace, work: Path) -> Path:
    from analytics.report.files import build_report_files

    if args.page:
        return Path(args.page)
    results, runs = args.results, args.run_id
    if args.synthetic:
        from tests.support.report_store import RUNS, write_report_store

        results, runs = str(work / "results"), list(RUNS)
        write_report_store(results, requests_per_point=args.requests_per_point)
    out = Path(args.out) if args.out else work / "report"
    t = time.perf_counter()
    build_report_files(results, runs, out, html=True)
    print(f"report built in {time.perf_counter() - t:.1f} s (comparison.json, REPORT.md, REPORT.html, plots): {out}")
    return out / "REPORT.html"


def sizes(page: Path) -> None:
    from analytics.report.html_assets import chart_library

    text = page.read_text(encoding="utf-8")
    total = len(text.encode())
    lib = len(chart_library().text.encode())

    def block(name: str) -> int:
        start = text.index(f'id="{name}">') + len(f'id="{name}">')
        return len(text[start : text.index("</script>", start)].encode())

    comparison, data = block("np-comparison"), block("np-data")
    mib = lambda n: f"{n / 2**20:.2f} MiB"  # noqa: E731 - a one-line formatter
    print(
        f"{page}: {mib(total)} = plotly.js {mib(lib)} + comparison.json {mib(comparison)} + distributions and "
        f"steps {mib(data)} + page scripts/styles/skeleton {mib(total - lib - comparison - data)}"
    )


def open_times(page: Path, repeats: int) -> None:
    from playwright.sync_api import sync_playwright

    from tests.support.browser import chromium_problem, launch, open_report

    executable, why = chromium_problem()
    if executable is None:
        print(f"no open-time figures: {why}")
        return
    keys = ("scripts_ms", "data_parsed_ms", "tables_ms", "charts_ready_ms", "first_screen_ms", "all_drawn_ms")
    seen: dict[str, list[float]] = {k: [] for k in keys}
    walls = []
    with sync_playwright() as p:
        browser = launch(p, executable)
        version = browser.version
        for _ in range(repeats + 1):
            tab, log, wall = open_report(browser, page)
            t = tab.evaluate("""async () => { await window.npReport.drawAll();
                return Object.assign({}, window.npReport.timings, {all_drawn_ms: performance.now(),
                    plots: window.npReport.plots.length, errors: window.npReport.errors.length}); }""")
            for k in keys:
                seen[k].append(t[k])
            walls.append(wall * 1000)
            if log.console_errors() or t["errors"]:
                print(f"  console errors: {log.console_errors()[:3]} page errors: {t['errors']}")
            tab.close()
        browser.close()
    print(f"Chromium {version}, {repeats} loads after one warm-up, {t['plots']} charts; median ms since navigation:")
    for k in keys:
        print(f"  {k:16s} {statistics.median(seen[k][1:]):8.0f}   (all: {', '.join(f'{x:.0f}' for x in seen[k])})")
    print(f"  {'wall to ready':16s} {statistics.median(walls[1:]):8.0f}   (Playwright: goto → npReport.ready)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--results", help="results root (directory or s3://)")
    src.add_argument("--synthetic", action="store_true", help="write tests/support/report_store.py's store first")
    src.add_argument("--page", help="an existing REPORT.html: measure it as it is")
    parser.add_argument("--run-id", action="append", default=None)
    parser.add_argument("--out", default=None, help="report directory (default: a temporary one)")
    parser.add_argument("--requests-per-point", type=int, default=40, help="--synthetic: requests per point")
    parser.add_argument("--repeats", type=int, default=3, help="page loads measured (after one warm-up)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="html-bench-") as tmp:
        page = build(args, Path(tmp))
        sizes(page)
        open_times(page, args.repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
