"""`neuronpipe demo --base-url URL`: the live TTFT streamer, then the headline tables of the latest report.

The streamer is for people watching, not for measurement (the load generator is
the instrument): it streams one answer token by token and shows TTFT and the
running tokens/s as they happen, counting tokens from the server's per-chunk
usage when given, else one per content chunk.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_PROMPT = "Explain in three sentences why compile time matters when serving a model on Inferentia2."


class StreamProtocolError(Exception):
    """The server's stream was not OpenAI-compatible SSE."""


@dataclass
class StreamStats:
    t_sent: float
    t_first: float | None = None
    t_last: float | None = None
    chunks: int = 0
    tokens: int = 0
    text: list[str] = field(default_factory=list)
    usage: dict[str, Any] | None = None

    @property
    def ttft_s(self) -> float | None:
        return None if self.t_first is None else self.t_first - self.t_sent

    def tokens_per_s(self, now: float) -> float | None:
        """Decode rate after the first token (the first token's wait is TTFT, not decode)."""
        if self.t_first is None or self.tokens < 2 or now <= self.t_first:
            return None
        return (self.tokens - 1) / (now - self.t_first)


def parse_sse(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """Yield each JSON event of an SSE stream until ``[DONE]``."""
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith(":"):
            continue
        if not line.startswith("data:"):
            raise StreamProtocolError(f"not an SSE data line: {line[:200]!r}")
        data = line[5:].strip()
        if data == "[DONE]":
            return
        try:
            yield json.loads(data)
        except json.JSONDecodeError as exc:
            raise StreamProtocolError(f"malformed event: {data[:200]!r}") from exc


def chunk_text(event: dict[str, Any]) -> str:
    choice = (event.get("choices") or [{}])[0]
    if "delta" in choice:
        return choice["delta"].get("content") or ""
    return choice.get("text") or ""


def stream_answer(
    client: Any,
    base_url: str,
    model: str,
    prompt: str,
    max_tokens: int,
    on_update: Callable[[StreamStats, str], None] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> StreamStats:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        "temperature": 0,
    }
    stats = StreamStats(t_sent=clock())
    with client.stream("POST", f"{base_url.rstrip('/')}/v1/chat/completions", json=body) as resp:
        if resp.status_code != 200:
            resp.read()
            raise StreamProtocolError(f"HTTP {resp.status_code}: {resp.text[:500]}")
        prev_completion = 0
        for event in parse_sse(resp.iter_lines()):
            if event.get("usage"):
                stats.usage = event["usage"]
            if not event.get("choices"):
                continue
            now = clock()
            piece = chunk_text(event)
            usage = event.get("usage") or {}
            if "completion_tokens" in usage:
                n = max(0, usage["completion_tokens"] - prev_completion)
                prev_completion = usage["completion_tokens"]
            else:
                n = 1
            if stats.t_first is None:
                stats.t_first = now
            stats.t_last = now
            stats.chunks += 1
            stats.tokens += n
            stats.text.append(piece)
            if on_update:
                on_update(stats, piece)
    if stats.usage and "completion_tokens" in stats.usage:
        stats.tokens = stats.usage["completion_tokens"]
    return stats


# (title, section, key, columns): the headline sections of comparison.json (analytics/report/comparison.py)
HEADLINES: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    (
        "Compile / boot",
        "compile",
        "summary",
        ("run_id", "lane", "model", "config", "cold_wall_s", "warm_wall_s", "uncached_wall_s", "n_failed"),
    ),
    (
        "Training",
        "training",
        "runs",
        ("run_id", "lane", "model", "steps", "first_loss", "last_loss", "tokens_per_s", "mfu", "mfu_null_reason"),
    ),
    (
        "Serving (headline points)",
        "serving",
        "points",
        (
            "run_id",
            "lane",
            "model",
            "server_config",
            "input_len",
            "output_len",
            "max_concurrency",
            "median_ttft_ms",
            "p99_ttft_ms",
            "median_tpot_ms",
            "output_throughput",
        ),
    ),
    (
        "Sustained retention",
        "sustained",
        "retention",
        ("run_id", "point_id", "windows", "retention_vs_first", "retention_vs_peak"),
    ),
    ("Weights round trip", "roundtrip", "models", ("run_id", "model", "artifacts", "verified", "verdict")),
)


def headline_tables(report_dir: Path) -> list[tuple[str, list[str], list[list[Any]]]]:
    """(title, columns, rows) for the headline sections of a report's comparison.json.

    Serving points follow the report's own headline rule (telemetry present, not flagged invalid).
    """
    from analytics.report.compare import is_headline_point

    path = Path(report_dir) / "comparison.json"
    if not path.exists():
        return []
    data = json.loads(path.read_text())
    tables = []
    for title, section, key, cols in HEADLINES:
        rows = (data.get(section) or {}).get(key) or []
        if section == "serving":
            rows = [r for r in rows if is_headline_point(r) and r.get("mode") != "sustained"]
        if rows:
            tables.append((title, list(cols), [[r.get(c) for c in cols] for r in rows[:20]]))
    return tables


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="live TTFT streamer against a server, then the latest report's headlines")
    p.add_argument("--base-url", required=True, help="OpenAI-compatible server, e.g. http://127.0.0.1:8000")
    p.add_argument("--model", default=None, help="model name (default: the server's first /v1/models entry)")
    p.add_argument("--prompt", default=DEFAULT_PROMPT)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--report", default="report", help="report directory holding comparison.json")
    p.add_argument("--timeout-s", type=float, default=120.0)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import httpx
    from rich.live import Live
    from rich.table import Table
    from rich.text import Text

    from control_plane.console import make_console

    console = make_console()
    with httpx.Client(timeout=httpx.Timeout(args.timeout_s, connect=10.0)) as client:
        model = args.model
        try:
            if model is None:
                resp = client.get(f"{args.base_url.rstrip('/')}/v1/models")
                resp.raise_for_status()
                model = resp.json()["data"][0]["id"]
            console.print(f"[bold]{model}[/bold] @ {args.base_url}\n[dim]{args.prompt}[/dim]\n")
            answer = Text()

            def status(stats: StreamStats) -> Text:
                ttft = f"{stats.ttft_s * 1000:.0f} ms" if stats.ttft_s is not None else "…"
                rate = stats.tokens_per_s(time.perf_counter())
                return Text(
                    f"\nTTFT {ttft}   tokens {stats.tokens}   {'' if rate is None else f'{rate:.1f} tok/s'}",
                    style="cyan",
                )

            with Live(Text(""), console=console, refresh_per_second=12) as live:

                def on_update(stats: StreamStats, piece: str) -> None:
                    answer.append(piece)
                    live.update(Text.assemble(answer, status(stats)))

                stats = stream_answer(client, args.base_url, model, args.prompt, args.max_tokens, on_update)
                live.update(Text.assemble(answer, status(stats)))
        except (httpx.HTTPError, StreamProtocolError, KeyError, IndexError, ValueError) as exc:
            print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
    tables = headline_tables(Path(args.report))
    for title, cols, rows in tables:
        table = Table(title=title)
        for c in cols:
            table.add_column(str(c))
        for r in rows:
            table.add_row(*["" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v)) for v in r])
        console.print(table)
    if not tables:
        console.print(f"[dim]no report at {args.report}/comparison.json (run `make run` or `neuronpipe report`)[/dim]")
    return 0
