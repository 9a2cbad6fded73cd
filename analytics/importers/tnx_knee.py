"""torchneuronx ``inf2/results/extras/knee/rate_*.json`` → our ``capacity`` lane: its Phase-2 open-loop ladder.

Each rate file is one open-loop point (Poisson arrivals, its offered rate, the declared SLO ``--slo-ttft-ms`` /
``--slo-tpot-ms``): a ``sweep_points`` row whose ``search_json`` names the search (kind ``capacity``, its
attainment target and the ladder's precision), its summary as an aggregate-only ``serving_aggregates`` row with
the source's attainment and goodput in ``stats_json``, and its telemetry CSV. The capacity views then judge the
ladder by the same pass rule as our own searches (docs/guides/import.md).
"""

from __future__ import annotations

import json
import re
from datetime import timedelta

from analytics.importers.common import LaneImport, integer, load_json, num, parse_time
from analytics.importers.source import Tree
from analytics.importers.tnx_served import served_json

KNEE = "inf2/results/extras/knee/"
RATE_RE = re.compile(r"rate_([0-9.]+)\.json$")
SEARCH_ID = "torchneuronx-knee"
# The source's ladder was fixed (0.5, 1, 2, 4, 6, 8 req/s), not bisected: the precision it reached between two
# neighbours is a factor 2 at the knee; the attainment it treated as holding was all requests good.
ATTAINMENT = 0.99
STATS = (
    "slo_attainment_pct",
    "goodput_output_tokens_per_s",
    "completed_rate_per_s",
    "requests_offered",
    "request_rate_offered",
    "arrival_mode",
    "slo_ttft_ms",
    "slo_tpot_ms",
)


def knee(tree: Tree, aggregate_row) -> LaneImport | None:
    files = set(tree.files(KNEE))
    rates = sorted((p for p in files if RATE_RE.search(p)), key=lambda p: float(RATE_RE.search(p).group(1)))
    if not rates:
        return None
    li = LaneImport("capacity", "inf2")
    li.config["search"] = {"source": "extras/knee_search.sh: a fixed ladder of Poisson rates", "search_id": SEARCH_ID}
    for step, path in enumerate(rates):
        d = load_json(tree, path)
        rate = num(d.get("request_rate_offered"))
        point_id = f"knee/rate_{RATE_RE.search(path).group(1)}"
        captured, duration = parse_time(d.get("date")), num(d.get("duration"))
        slo = {
            "name": "torchneuronx-knee",
            "ttft_ms": num(d.get("slo_ttft_ms")),
            "tpot_ms": num(d.get("slo_tpot_ms")),
            "percentile": 99.0,
            "source": "torchneuronx extras/knee_search.sh --slo-ttft-ms/--slo-tpot-ms",
        }
        search = {
            "kind": "capacity",
            "search_id": SEARCH_ID,
            "phase": "ladder",
            "step": step,
            "attainment": ATTAINMENT,
            "precision": 1.0,
            "slo_name": slo["name"],
        }
        li.add(
            "sweep_points",
            {
                "point_id": point_id,
                "model": d.get("model_id"),
                "server_config": "short",
                "served_json": served_json(d.get("model_id"), "short"),
                "server_kind": "vllm",
                "backend": "neuron",
                "endpoint": "/v1/completions",
                "mode": "open",
                "prompt_source": "random",
                "input_len": integer(d.get("input_len_configured")),
                "output_len": integer(d.get("output_len_configured")),
                "max_concurrency": integer(d.get("max_concurrency")),
                "request_rate": rate,
                "burstiness": 1.0 if d.get("arrival_mode") == "poisson" else None,
                "num_prompts": integer(d.get("requests_offered")),
                "warmup_requests": 0,
                "window_end": captured,
                "window_start": captured - timedelta(seconds=duration) if captured and duration is not None else None,
                "slo_json": json.dumps(slo, sort_keys=True),
                "search_json": json.dumps(search, sort_keys=True),
                "note": f"imported aggregate-only open-loop point ({d.get('backend')}); see serving_aggregates",
            },
        )
        row = aggregate_row(d, point_id, "short", "open", tree.uri(path))
        row["stats_json"] = json.dumps({k: d[k] for k in STATS if k in d}, sort_keys=True)
        li.add("serving_aggregates", row)
        li.add_point_file(tree, files, path, captured)
    return li
