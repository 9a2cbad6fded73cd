"""A rehearsal of an adaptive run matrix over simulated measurements (control_plane.adaptive): types with known true
$/M at the SLO, each run of a cell drawing its $/M from a lognormal run-to-run spread around the truth with a
point interval of its own. The same draws serve the full matrix (every cell ``max_repeats`` runs) and the adaptive
one (waves decided by control_plane.adaptive.next_wave over the noise view), so the two end on the same
measurements where they overlap and the comparison is of the rule alone.

With ``bracket`` (the capacity search's relative bracket width, e.g. 1.0 for [R, 2R]) each run's $/M is priced at
the highest passing rate of its search, below the type's true rate by a uniform share of the bracket (so its $/M
lies above the truth by up to the bracket), and the adaptive matrix may spend a run on a bisection
(control_plane.adaptive.choose_use): a row from a bracket :data:`BISECTION_NARROWS` times narrower, at
:data:`CAPACITY_SHARE` of a run's box-hours.

Used by tests/unit/test_adaptive.py and benchmarks/adaptive_matrix.py.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from analytics.decision_noise import connection
from control_plane.adaptive import CAPACITY, CellRuns, WavePlan, next_wave, ranking
from pipeline.matrix import AdaptiveSpec

GROUP = "llama-3.1-8b-instruct · A · chat · 512:128 · interactive"
# true $/M per type; the last one is clearly dominated
TYPES: dict[str, float] = {"inf2.xlarge": 1.00, "inf2.8xlarge": 1.15, "g5.xlarge": 1.35, "g6.xlarge": 3.2}
BOX_HOURS = {"inf2.xlarge": 0.6, "inf2.8xlarge": 0.5, "g5.xlarge": 0.5, "g6.xlarge": 0.5}  # one run of a cell
CAPACITY_SHARE = 0.5  # a bisection's box-hours against a whole run's (its capacity lane and box lanes)
BISECTION_NARROWS = 4  # a bisection inside the bracket leaves a quarter of its width (two halvings)


@dataclass(frozen=True)
class Outcome:
    ranking: list[str]
    box_hours: float
    runs: dict[str, int]
    plans: list[WavePlan]


def draws(
    seed: int, max_repeats: int, run_sd: float = 0.06, point_half: float = 0.03, bracket: float | None = None
) -> dict[str, list[dict]]:
    """Per type, ``max_repeats`` candidate rows in run order (the k-th run of a cell is the same draw in both
    matrices); with ``bracket``, each row carries its search's bracket and a ``bisection`` row (the same run as a
    bisection of the cell's first bracket)."""
    rng = random.Random(seed)
    out: dict[str, list[dict]] = {}
    for t, usd in TYPES.items():
        out[t] = []
        for k in range(max_repeats):
            v = usd * math.exp(rng.gauss(0.0, run_sd))
            row = {
                "decision_group": GROUP,
                "decision_section": GROUP,
                "instance": t,
                "family": t.split(".")[0],
                "run_id": "matrix",
                "lane": f"serve_sweep@c{list(TYPES).index(t) + 1:02d}" + (f"r{k + 1}" if k else ""),
                "candidate": True,
                "is_reference": False,
                "ranked_basis": "rate",
            }
            if bracket is None:
                out[t].append({**row, **_priced(v, point_half)})
                continue
            searched = [(bracket, v * (1 + bracket * rng.random()))]
            searched.append((bracket / BISECTION_NARROWS, v * (1 + bracket / BISECTION_NARROWS * rng.random())))
            (w, x), (wb, xb) = searched
            out[t].append(
                {
                    **row,
                    **_priced(x, point_half),
                    **_rates(x, w),
                    "bisection": {**row, **_priced(xb, point_half), **_rates(xb, wb)},
                }
            )
    return out


def _priced(v: float, point_half: float) -> dict[str, float]:
    return {
        "ranked_usd_per_million_output_tokens": v,
        "ranked_usd_per_million_output_tokens_ci_low": v * (1 - point_half),
        "ranked_usd_per_million_output_tokens_ci_high": v * (1 + point_half),
    }


def _rates(usd: float, width: float) -> dict[str, float]:
    """The bracket of a search whose passing rate gives ``usd`` (rate = 1 / $/M in the simulation's units)."""
    return {"max_rate_meeting_slo": 1 / usd, "lowest_rate_missing_slo": (1 + width) / usd}


def full(seed: int, spec: AdaptiveSpec, run_sd: float = 0.06, bracket: float | None = None) -> Outcome:
    rows = draws(seed, spec.max_repeats, run_sd, bracket=bracket)
    con = connection([_row(r) for rs in rows.values() for r in rs])
    return Outcome(
        ranking(con)[GROUP],
        sum(BOX_HOURS[t] * spec.max_repeats for t in TYPES),
        {t: spec.max_repeats for t in TYPES},
        [],
    )


def _row(r: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in r.items() if k != "bisection"}


def adaptive(seed: int, spec: AdaptiveSpec, run_sd: float = 0.06, bracket: float | None = None) -> Outcome:
    rows = draws(seed, spec.max_repeats, run_sd, bracket=bracket)
    runs = {t: 1 for t in TYPES}  # wave 1: every cell once
    measured = {t: [_row(rs[0])] for t, rs in rows.items()}
    spent = sum(BOX_HOURS.values())
    running = set(TYPES)
    plans: list[WavePlan] = []
    wave = 1
    capacity = {"capacity_why_not": None} if bracket is not None else {}
    while running:
        con = connection([r for rs in measured.values() for r in rs])
        cells = [
            CellRuns(
                f"c{list(TYPES).index(t) + 1:02d}",
                t,
                GROUP,
                runs[t],
                BOX_HOURS[t],
                BOX_HOURS[t] * CAPACITY_SHARE,
                **capacity,
            )
            for t in TYPES
            if t in running
        ]
        plan = next_wave(con, spec, cells, wave, spent)
        plans.append(plan)
        by_cell = {c.cell: c.instance for c in cells}
        running = set()
        for u in plan.uses:
            t = by_cell[u.cell]
            running.add(t)
            drawn = rows[t][runs[t]]
            measured[t].append(_row(drawn["bisection"]) if u.use == CAPACITY else _row(drawn))
            runs[t] += 1
            spent += u.box_hours
        wave += 1
    con = connection([r for rs in measured.values() for r in rs])
    return Outcome(ranking(con)[GROUP], spent, runs, plans)


def compare(seeds: range, spec: AdaptiveSpec, run_sd: float = 0.06, bracket: float | None = None) -> Mapping[str, Any]:
    """Over ``seeds``: how often the adaptive matrix ends on the full matrix's ranking and cheapest, and on the true
    order, the box-hours of each, the wave the dominated type stopped in and the uses of the runs."""
    same, same_top, true_full, true_adaptive, saved, dominated_wave, out = 0, 0, 0, 0, [], [], []
    last = list(TYPES)[-1]
    truth = sorted(TYPES, key=TYPES.__getitem__)
    uses: dict[str, int] = {}
    for s in seeds:
        f, a = full(s, spec, run_sd, bracket), adaptive(s, spec, run_sd, bracket)
        same += f.ranking == a.ranking
        same_top += f.ranking[0] == a.ranking[0]
        true_full += f.ranking == truth
        true_adaptive += a.ranking == truth
        saved.append(f.box_hours - a.box_hours)
        dominated_wave.append(next(st.wave for p in a.plans for st in p.stops if st.instance == last))
        for p in a.plans:
            for u in p.uses:
                uses[u.use] = uses.get(u.use, 0) + 1
        out.append((s, f, a))
    return {
        "seeds": len(seeds),
        "same_ranking": same,
        "same_cheapest": same_top,
        "true_ranking_full": true_full,
        "true_ranking_adaptive": true_adaptive,
        "full_box_hours": out[0][1].box_hours,
        "saved_box_hours": saved,
        "dominated_stop_wave": dominated_wave,
        "uses": uses,
        "outcomes": out,
    }
