"""The model server's own Prometheus ``/metrics``: running and waiting requests, KV-cache usage, preemptions.

Reads vLLM's metric names (both the older ``gpu_cache_usage_perc`` and the newer
``kv_cache_usage_perc``); a metric the server does not export is a NULL row with a
note, and an unreachable endpoint is a NULL row per metric saying so.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from typing import Any

# our metric -> (unit, scale, vLLM names in preference order)
METRICS: dict[str, tuple[str, float, tuple[str, ...]]] = {
    "server_requests_running": ("requests", 1.0, ("vllm:num_requests_running",)),
    "server_requests_waiting": ("requests", 1.0, ("vllm:num_requests_waiting",)),
    "server_kv_cache_usage_pct": (
        "%",
        100.0,
        ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "vllm:cpu_cache_usage_perc"),
    ),
    "server_preemptions_total": ("preemptions", 1.0, ("vllm:num_preemptions_total", "vllm:num_preemptions")),
}

_SAMPLE = re.compile(r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?P<labels>\{[^}]*\})?\s+(?P<value>\S+)")


def parse_prometheus_text(text: str) -> dict[str, float]:
    """Sum of every sample per metric name (labels folded: one server, one model)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        try:
            value = float(m.group("value"))
        except ValueError:
            continue
        if math.isnan(value):
            continue
        name = m.group("name")
        out[name] = out.get(name, 0.0) + value
    return out


def rows_from_metrics(samples: dict[str, float], device: str | None) -> list[dict[str, Any]]:
    rows = []
    for metric, (unit, scale, names) in METRICS.items():
        found = next((n for n in names if n in samples), None)
        rows.append(
            {
                "source": "prometheus",
                "metric": metric,
                "device": device,
                "unit": unit,
                "value": None if found is None else samples[found] * scale,
                "note": None if found is not None else f"server does not export {' or '.join(names)}",
            }
        )
    return rows


class PrometheusSensor:
    """Scrapes ``url`` on every telemetry tick; ``device`` tags the rows (e.g. ``model/config``)."""

    name = "prometheus"

    def __init__(
        self, url: str, device: str | None = None, timeout_s: float = 2.0, fetch: Callable[[str], str] | None = None
    ):
        self.url = url
        self.device = device
        self.timeout_s = timeout_s
        self._client: Any = None
        self._fetch = fetch or self._http_get
        self._detached = False

    def detach(self) -> None:
        """The server stopped: sample nothing from now on (the sampler has no remove)."""
        self._detached = True
        self.close()

    def _http_get(self, url: str) -> str:
        import httpx

        if self._client is None:
            logging.getLogger("httpx").setLevel(logging.WARNING)  # one INFO line per scrape otherwise
            self._client = httpx.Client(timeout=self.timeout_s)
        resp = self._client.get(url)
        resp.raise_for_status()
        return resp.text

    def sample(self) -> list[dict[str, Any]]:
        if self._detached:
            return []
        try:
            text = self._fetch(self.url)
        except Exception as exc:  # noqa: BLE001 - an unreachable endpoint is NULL rows, not a crash
            note = f"scrape of {self.url} failed: {type(exc).__name__}: {exc}"
            return [
                {"source": "prometheus", "metric": m, "device": self.device, "unit": u, "value": None, "note": note}
                for m, (u, _s, _n) in METRICS.items()
            ]
        return rows_from_metrics(parse_prometheus_text(text), self.device)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
