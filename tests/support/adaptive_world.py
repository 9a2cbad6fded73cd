"""A rehearsal of an adaptive run matrix over simulated measurements (control_plane.adaptive): types with known true
$/M at the SLO, each run of a cell drawing its $/M from a lognormal run-to-run spread around the truth with a
point interval of its own. The same draws serve the full matrix (every cell ``max_repeats`` runs) and the adaptive
one (waves decided by control_plane.adaptive.next_wave over the noise view), so the two end on the same
measurements where they overlap and the comparison is of the rule alone.

Used by tests/unit/test_adaptive.py and benchmarks/adaptive_matrix.py.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from analytics.decision_noise import connection
from control_plane.adaptive import CellRuns, WavePlan, next_wave, ranking
from pipeline.matrix import AdaptiveSpec

GROUP = "llama-3.1-8b-instruct · A · chat · 512:128 · interactive"
# true $/M per type; the last one is clearly dominated
TYPES: dict[str, float] = {"inf2.xlarge": 1.00, "inf2.8xlarge": 1.15, "g5.xlarge": 1.35, "g6.xlarge": 3.2}
BOX_HOURS = {"inf2.xlarge": 0.6, "inf2.8xlarge": 0.5, "g5.xlarge": 0.5, "g6.xlarge": 0.5}  # one run of a cell


@dataclass(frozen=True)
class Outcome:
    ranking: list[str]
    box_hours: float
    runs: dict[str, int]
    plans: list[WavePlan]


def draws(seed: int, max_repeats: int, run_sd: float = 0.06, point_half: float = 0.03) -> dict[str, list[dict]]:
    """Per type, ``max_repeats`` candidate rows in run order (the k-th run of a cell is the same draw in both
    matrices)."""
    rng = random.Random(seed)
    out: dict[str, list[dict]] = {}
    for t, usd in TYPES.items():
        out[t] = []
        for k in range(max_repeats):
            v = usd * math.exp(rng.gauss(0.0, run_sd))
            out[t].append(
                {
                    "decision_group": GROUP,
                    "decision_section": GROUP,
                    "instance": t,
                    "family": t.split(".")[0],
                    "run_id": "matrix",
                    "lane": f"serve_sweep@c{list(TYPES).index(t) + 1:02d}" + (f"r{k + 1}" if k else ""),
                    "candidate": True,
                    "is_reference": False,
                    "ranked_basis": "rate",
                    "ranked_usd_per_million_output_tokens": v,
                    "ranked_usd_per_million_output_tokens_ci_low": v * (1 - point_half),
                    "ranked_usd_per_million_output_tokens_ci_high": v * (1 + point_half),
                }
            )
    return out


def full(seed: int, spec: AdaptiveSpec, run_sd: float = 0.06) -> Outcome:
    rows = draws(seed, spec.max_repeats, run_sd)
    con = connection([r for rs in rows.values() for r in rs])
    return Outcome(
        ranking(con)[GROUP],
        sum(BOX_HOURS[t] * spec.max_repeats for t in TYPES),
        {t: spec.max_repeats for t in TYPES},
        [],
    )


def adaptive(seed: int, spec: AdaptiveSpec, run_sd: float = 0.06) -> Outcome:
    rows = draws(seed, spec.max_repeats, run_sd)
    runs = {t: 1 for t in TYPES}  # wave 1: every cell once
    spent = sum(BOX_HOURS.values())
    running = set(TYPES)
    plans: list[WavePlan] = []
    wave = 1
    while running:
        con = connection([r for t, rs in rows.items() for r in rs[: runs[t]]])
        cells = [
            CellRuns(f"c{list(TYPES).index(t) + 1:02d}", t, GROUP, runs[t], BOX_HOURS[t]) for t in TYPES if t in running
        ]
        plan = next_wave(con, spec, cells, wave, spent)
        plans.append(plan)
        by_cell = {c.cell: c.instance for c in cells}
        running = {by_cell[c] for c in plan.repeat}
        for t in running:
            runs[t] += 1
            spent += BOX_HOURS[t]
        wave += 1
    con = connection([r for t, rs in rows.items() for r in rs[: runs[t]]])
    return Outcome(ranking(con)[GROUP], spent, runs, plans)


def compare(seeds: range, spec: AdaptiveSpec, run_sd: float = 0.06) -> Mapping[str, Any]:
    """Over ``seeds``: how often the adaptive matrix ends on the full matrix's ranking and cheapest, the box-hours
    of each, and the wave the dominated type stopped in."""
    same, same_top, saved, dominated_wave, out = 0, 0, [], [], []
    last = list(TYPES)[-1]
    for s in seeds:
        f, a = full(s, spec, run_sd), adaptive(s, spec, run_sd)
        same += f.ranking == a.ranking
        same_top += f.ranking[0] == a.ranking[0]
        saved.append(f.box_hours - a.box_hours)
        dominated_wave.append(next(st.wave for p in a.plans for st in p.stops if st.instance == last))
        out.append((s, f, a))
    return {
        "seeds": len(seeds),
        "same_ranking": same,
        "same_cheapest": same_top,
        "full_box_hours": out[0][1].box_hours,
        "saved_box_hours": saved,
        "dominated_stop_wave": dominated_wave,
        "outcomes": out,
    }
