"""PNG plots for REPORT.md, drawn only from comparison.json.

Matplotlib's Agg backend, no clock in the files: PNG metadata carries no
Software/date entries, the SVG hash salt is fixed, and series are drawn in
sorted order, so the same comparison gives byte-identical PNGs.
"""
from __future__ import annotations

import contextlib
import importlib.util
import math
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

from analytics.report.compare import closed_loop_headline, is_headline_point, metric_value
from analytics.report.decision_md import hardware_plot_file, hardware_plotted, hardware_sections
from analytics.report.document import Comparison
from analytics.report.names import compile_rows, slug  # noqa: F401 - re-exported for the plots' callers

if importlib.util.find_spec("matplotlib") is None:  # the report Lambda ships without it: write_report says so
    raise ImportError("No module named 'matplotlib'", name="matplotlib")

PNG_METADATA = {"Software": None}
STYLE = {"svg.hashsalt": "neuronpipe", "figure.dpi": 100, "font.size": 9, "axes.grid": True,
         "grid.alpha": 0.3, "path.simplify": False}

Plot = Callable[[Comparison, Path], "list[Path]"]

# pyplot is imported when the first figure is made, not with this module: importing it costs ~1.5 s of CPU, which a
# report with nothing to plot (a preflight-only run, most finalize calls of a short run) need not pay
_STYLED: list[contextlib.ExitStack] = []  # draw_all's: the style is entered into it on the first figure


class _PyplotOnUse:
    pyplot: Any = None

    def __getattr__(self, name: str) -> Any:
        pyplot = _PyplotOnUse.pyplot
        if pyplot is None:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as pyplot

            _PyplotOnUse.pyplot = pyplot
        if _STYLED and not getattr(_STYLED[-1], "styled", False):
            _STYLED[-1].enter_context(pyplot.rc_context(STYLE))
            _STYLED[-1].styled = True
        return getattr(pyplot, name)


plt: Any = _PyplotOnUse()


def _y(value: Any) -> Any:
    """A NULL value is a gap in the line (NaN), never zero."""
    return float("nan") if value is None else value


def _save(fig: Any, path: Path) -> Path:
    from analytics.atomic import write_atomic_with

    fig.tight_layout()
    try:  # temp name, then rename: a failure leaves the previous plot whole
        write_atomic_with(path, lambda fh: fig.savefig(fh, format="png", metadata=PNG_METADATA))
    finally:
        plt.close(fig)
    return path


def concurrency_axis(ax: Any, values: list[Any]) -> None:
    """Concurrency on a log2 axis with integer ticks at the powers of two the values span (1, 2, 4, ...): the
    field's habit, and never a fractional tick such as 1.5 or 2.5."""
    from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

    xs = [v for v in values if isinstance(v, (int, float)) and v > 0]
    if not xs:
        return
    lo, hi = math.floor(math.log2(min(xs))), math.ceil(math.log2(max(xs)))
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator([2.0 ** k for k in range(lo, hi + 1)]))
    ax.xaxis.set_minor_locator(NullLocator())
    formatter = ScalarFormatter()
    formatter.set_scientific(False)
    ax.xaxis.set_major_formatter(formatter)
    ax.set_xlim(2.0 ** lo / 1.15, 2.0 ** hi * 1.15)
    ax.set_xlabel("max concurrency (log2)")


def from_zero(ax: Any) -> None:
    """A throughput (or any amount) axis starts at 0, so the eye reads ratios right."""
    ax.set_ylim(bottom=0)


def _series_label(p: dict[str, Any], multi_run: bool) -> str:
    parts = [str(p.get("model"))]
    if p.get("lane") not in (None, "serve_sweep"):
        parts.append(str(p["lane"]))
    if multi_run:
        parts.insert(0, str(p.get("run_id")))
    return " · ".join(parts)


def _headline_points(c: Comparison) -> list[dict[str, Any]]:
    """The closed-loop headline points: an open-loop point (an offered rate) is plotted against its rate, never on
    the concurrency axis (capacity_knee; REPORT.html's rate chart)."""
    return [p for p in c.serving.points if closed_loop_headline(p)]


def latency_vs_concurrency(c: Comparison, out: Path) -> list[Path]:
    """TTFT and TPOT p50/p99 against concurrency (log2, integer ticks), one figure per server config."""
    by_config: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    multi = len(c.run_ids) > 1
    for p in _headline_points(c):
        by_config[str(p.get("server_config"))][_series_label(p, multi)].append(p)
    # one figure per config REPORT.md links (markdown.s_serving: every config with a headline point); a config
    # measured only open loop says so on its figure instead of a broken link
    linked = {str(p.get("server_config")) for p in c.serving.points
              if is_headline_point(p) and p.get("mode") != "sustained"}
    paths = []
    for config in sorted(set(by_config) | linked):
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        if config not in by_config:
            for ax in axes:
                ax.text(0.5, 0.5, "no closed-loop points: open loop only (capacity_knee.png)", ha="center",
                        va="center", transform=ax.transAxes, fontsize=8)
            paths.append(_save(fig, out / f"latency_vs_concurrency_{slug(config)}.png"))
            continue
        for ax, metric in zip(axes, ("ttft", "tpot")):
            for label in sorted(by_config[config]):
                pts = sorted(by_config[config][label], key=lambda p: p["max_concurrency"])
                xs = [p["max_concurrency"] for p in pts]
                for q, style in (("p50", "-o"), ("p99", "--s")):
                    ax.plot(xs, [_y(metric_value(p, f"{q}_{metric}_ms")) for p in pts], style, label=f"{label} {q}")
            concurrency_axis(ax, [p["max_concurrency"] for s in by_config[config].values() for p in s])
            from_zero(ax)
            ax.set_ylabel(f"{metric.upper()} (ms)")
            ax.set_title(f"{metric.upper()} p50/p99 · {config}")
            ax.legend(fontsize=7)
        paths.append(_save(fig, out / f"latency_vs_concurrency_{slug(config)}.png"))
    return paths


def throughput_vs_concurrency(c: Comparison, out: Path) -> list[Path]:
    series: dict[str, list[dict[str, Any]]] = defaultdict(list)
    multi = len(c.run_ids) > 1
    for p in _headline_points(c):
        series[f"{_series_label(p, multi)} · {p.get('server_config')}"].append(p)
    if not series:
        if not any(is_headline_point(p) and p.get("mode") != "sustained" for p in c.serving.points):
            return []
        fig, ax = plt.subplots(figsize=(7, 4))  # REPORT.md links it: open loop only, said on the figure
        ax.text(0.5, 0.5, "no closed-loop points: open loop only (capacity_knee.png)", ha="center", va="center",
                transform=ax.transAxes, fontsize=8)
        return [_save(fig, out / "output_throughput_vs_concurrency.png")]
    fig, ax = plt.subplots(figsize=(7, 4))
    for label in sorted(series):
        pts = sorted(series[label], key=lambda p: p["max_concurrency"])
        ax.plot([p["max_concurrency"] for p in pts],
                [_y(p.get("output_throughput")) for p in pts],
                "-o", label=label)
    concurrency_axis(ax, [p["max_concurrency"] for s in series.values() for p in s])
    from_zero(ax)
    ax.set_ylabel("output tokens/s")
    ax.set_title("Output throughput against concurrency")
    ax.legend(fontsize=7)
    return [_save(fig, out / "output_throughput_vs_concurrency.png")]


def loss_curves(c: Comparison, out: Path) -> list[Path]:
    curves = c.training.loss_curves
    if not curves:
        return []
    fig, ax = plt.subplots(figsize=(7, 4))
    multi = len(c.run_ids) > 1
    for curve in curves:
        label = f"{curve['run_id']} · {curve['model']}" if multi else str(curve["model"])
        ax.plot(curve["step"], curve["loss"], "-", label=label)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("loss")
    ax.set_title("Training loss")
    ax.legend(fontsize=7)
    return [_save(fig, out / "loss_curves.png")]


def sustained_timeline(c: Comparison, out: Path) -> list[Path]:
    series: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for w in c.sustained.windows:
        series[f"{w['run_id']} · {w.get('model')} · {w['point_id']}"].append(w)
    if not series:
        return []
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    for label in sorted(series):
        ws = series[label]
        xs = [w["window"] for w in ws]
        ax1.plot(xs, [_y(w["output_throughput"]) for w in ws], "-o", label=label)
        ax2.plot(xs, [_y(w["p99_ttft_ms"]) for w in ws], "-o", label=label)
        warm = [w["window"] for w in ws if w["warmup"]]
        if warm:
            ax1.axvspan(min(warm) - 0.5, max(warm) + 0.5, color="grey", alpha=0.15)
    from_zero(ax1)
    ax1.set_ylabel("output tokens/s")
    ax1.set_title("Sustained closed loop (grey: warm-up windows)")
    ax2.set_ylabel("TTFT p99 (ms)")
    ax2.set_xlabel("window")
    ax1.legend(fontsize=7)
    return [_save(fig, out / "sustained_timeline.png")]


def compile_cold_warm(c: Comparison, out: Path) -> list[Path]:
    rows = compile_rows(c.compile.summary)
    if not rows:
        return []
    multi = len(c.run_ids) > 1
    labels = [(f"{r['run_id']}\n" if multi else "") + f"{r['lane']}\n{r.get('model')}\n{r.get('config') or ''}"
              for r in rows]
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(rows)), 4.5))
    xs = list(range(len(rows)))
    for offset, key, label in ((-0.27, "cold_wall_s", "cold cache"), (0.0, "warm_wall_s", "warm cache"),
                               (0.27, "uncached_wall_s", "no cache (JIT backend)")):
        ax.bar([x + offset for x in xs], [_y(r.get(key)) for r in rows],
               width=0.27, label=label)
    ax.set_xticks(xs)
    ax.set_xticklabels(labels, fontsize=6)
    from_zero(ax)
    ax.set_ylabel("wall seconds")
    ax.set_title("Compile / server boot: cold vs warm cache")
    ax.legend(fontsize=7)
    return [_save(fig, out / "compile_cold_warm.png")]


def capacity_knee(c: Comparison, out: Path) -> list[Path]:
    """Attainment and goodput against offered rate per search, the knee (max rate meeting the SLO) marked."""
    d = c.decision
    pts, searches = d.capacity_points or [], d.capacity or []
    if not pts:
        return []
    series: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for p in pts:
        if p.get("excluded_reason") is None:
            series[(p.get("run_id"), p.get("lane"), p.get("search_id"), p.get("model"), p.get("server_config"))].append(p)
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    for key in sorted(series, key=lambda k: tuple(str(x) for x in k)):
        s = sorted(series[key], key=lambda p: p["offered_rate"])
        label = f"{key[0]} · {key[1]} · {key[4]}"
        x = [p["offered_rate"] for p in s]
        ax1.plot(x, [_y(p.get("attained")) for p in s], "-o", label=label)
        ax2.plot(x, [_y(p.get("goodput_tok_s")) for p in s], "-o", label=label)
    for r in searches:
        if r.get("max_rate_meeting_slo") is not None:
            for ax in (ax1, ax2):
                ax.axvline(r["max_rate_meeting_slo"], linestyle="--", linewidth=1, color="grey")
    ax1.set_ylabel("SLO attainment")
    ax1.set_ylim(0, 1.05)
    from_zero(ax2)
    ax2.set_ylabel("goodput output tok/s")
    ax2.set_xlabel("offered rate (req/s)")
    ax1.set_title("Capacity search: attainment and goodput against offered rate (dashed: the knee)")
    ax1.legend(fontsize=7)
    return [_save(fig, out / "capacity_knee.png")]


def _bar(value: float, low: Any, high: Any) -> tuple[float, float]:
    """(below, above) the value of an interval bar; a missing bound draws no bar on its side."""
    return (max(0.0, value - low) if low is not None else 0.0, max(0.0, high - value) if high is not None else 0.0)


def decision_hardware(c: Comparison, out: Path) -> list[Path]:
    """$/M output tokens against capacity (output tok/s on the row's ranked basis), one marker per instance type
    (and config, where a section has several) with its 95 % intervals on both axes; one figure per section of the
    Decision across instance types. References (measured elsewhere) are hollow; the label carries the verdict."""
    rows = c.decision.hardware or []
    measured_runs = {r.get("run_id") for r in rows if not r.get("is_reference")}
    paths = []
    for section, section_rows in hardware_sections(rows).items():
        if not hardware_plotted(section_rows):
            continue
        configs = {r.get("server_config") for r in section_rows if not r.get("is_reference")}
        fig, ax = plt.subplots(figsize=(7, 4.5))
        costs = []
        for r in section_rows:  # the view's order: deterministic
            x, y = r.get("capacity_tok_s"), r.get("ranked_usd_per_million_output_tokens")
            if x is None or y is None:
                continue
            costs.append(y)
            xlo, xhi = _bar(x, r.get("capacity_tok_s_ci_low"), r.get("capacity_tok_s_ci_high"))
            ylo, yhi = _bar(y, r.get("ranked_usd_per_million_output_tokens_ci_low"),
                            r.get("ranked_usd_per_million_output_tokens_ci_high"))
            parts = [str(r.get("instance"))]
            if len(configs) > 1 and not r.get("is_reference"):
                parts.append(str(r.get("server_config")))
            if len(measured_runs) > 1 and not r.get("is_reference"):
                parts.insert(0, str(r.get("run_id")))
            label = " · ".join(parts) + f" ({r.get('verdict')}, {r.get('ranked_basis')})"
            ref = bool(r.get("is_reference"))
            ax.errorbar([x], [y], xerr=[[xlo], [xhi]], yerr=[[ylo], [yhi]], fmt="D" if ref else "o",
                        mfc="none" if ref else None, capsize=3, label=label)
        if costs and min(costs) > 0 and max(costs) / min(costs) > 20:
            ax.set_yscale("log")
        ax.set_xlim(left=0)  # capacity is a throughput: from 0
        ax.set_xlabel("capacity at the SLO: output tokens/s")
        ax.set_ylabel("$ per million output tokens")
        ax.set_title(f"$/M against capacity per instance type · {section}", fontsize=8)
        ax.legend(fontsize=6)
        paths.append(_save(fig, out / hardware_plot_file(section)))
    return paths


def roofline(c: Comparison, out: Path) -> list[Path]:
    """Measured output tokens/s against concurrency, each series beside its roofline bound (dashed), log-log."""
    from analytics.report.roofline_md import PLOT_FILE, plotted_points

    series: dict[str, list[dict[str, Any]]] = defaultdict(list)
    multi = len(c.run_ids) > 1
    for p in plotted_points(c):
        series[f"{_series_label(p, multi)} · {p.get('server_config')} · {p.get('input_len')}:{p.get('output_len')}"
               ].append(p)
    if not series:
        return []
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for label in sorted(series):
        pts = sorted(series[label], key=lambda p: p["max_concurrency"])
        xs = [p["max_concurrency"] for p in pts]
        line = ax.plot(xs, [_y(p.get("output_throughput")) for p in pts], "-o", label=f"{label} measured")[0]
        ax.plot(xs, [_y(p.get("output_tokens_per_s_bound")) for p in pts], "--", color=line.get_color(),
                label=f"{label} bound")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("concurrency")
    ax.set_ylabel("output tokens/s")
    ax.set_title("Output throughput against its roofline bound (dashed)")
    ax.legend(fontsize=6)
    return [_save(fig, out / PLOT_FILE)]


PLOTS: dict[str, Plot] = {
    "capacity_knee": capacity_knee,
    "compile_cold_warm": compile_cold_warm,
    "decision_hardware": decision_hardware,
    "loss_curves": loss_curves,
    "latency_vs_concurrency": latency_vs_concurrency,
    "output_throughput_vs_concurrency": throughput_vs_concurrency,
    "roofline": roofline,
    "sustained_timeline": sustained_timeline,
}


def draw_all(comparison: Comparison, out_dir: Path) -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    with contextlib.ExitStack() as styled:
        _STYLED.append(styled)
        try:
            for name in PLOTS:
                paths.extend(PLOTS[name](comparison, out_dir))
        finally:
            _STYLED.pop()
    return paths
