"""The adaptive matrix in the wave scheduler (``matrix.adaptive``; control_plane.waves.schedule calls this when the
plan's waves are done, and after each repeat wave; docs/explanation/decision-noise.md).

After the plan's last wave, and after each repeat wave, the scheduler:

1. records the lanes of the last repeat wave that left no attempt (``skipped``: their box failed or their segment
   ended early), as it does for the plan's own waves;
2. judges the cells that ran in the last wave (every cell after the plan's waves; the repeated ones after a repeat
   wave) with :func:`control_plane.adaptive.next_wave`, reading the store through the Decision's noise view over
   this run's rows, with the store's other runs that committed a serving lane as history
   (analytics.decision_noise.history_runs: their groups relabelled, so they inform the family's run-level spread,
   'aa_history', never this run's means). A cell is judged in every Decision group it has rows in and runs again
   when one of them keeps it in contention; it stops when every one of them stops it (one ``matrix_stops`` row
   per group, with the kind, the reason, the P and where its run-level spread came from), or when its box
   failed. ``budget_box_hours`` is applied per cell: the cells in contention in order of their highest P bound
   while the box-hours spent plus their next run's (the use's: a repeat costs the cell's last run, a capacity
   search its last capacity lane) stay within it;
3. commits the wave's stops and runs (``matrix_stops`` and ``matrix_repeats``, each run with its use and why)
   under the lane ``matrix_stops@w<wave>``, once: a retried call finds them committed and plans the same runs;
4. answers the next wave: each running cell on a new box of its type, its lanes committing as
   ``<lane>@<cell>r<run>`` (``serve_sweep@c01r2``) and its boot record as the new wave's — for a ``repeat`` the
   cell's segment of the plan again, for a ``capacity`` run only its capacity lane, its config's ``rate_min`` and
   ``rate_max`` set to the bracket it bisects (:func:`capacity_segment`).

Box-hours are the cells' lanes' wall time (lane_runs), boot and harness sync not counted. The run's outcome counts
the plan's lanes, not the repeats' (their records are in the store and the report).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from analytics.decision_noise import HISTORY_GROUP
from analytics.schema.matrix import MATRIX_STOPS_LANE
from control_plane.adaptive import CAPACITY, NO_CAPACITY_LANE, CellRuns, Stop, Use, next_wave
from pipeline.lanes import CELL_ENV
from pipeline.matrix import MATRIX_LANES, AdaptiveSpec

CAPACITY_LANE = "capacity"  # the lane a capacity use runs (pipeline.lanes)
DECIDED_ATTEMPT = "00000000-decided"  # one attempt per wave's decision: the store writes create-only
# a result lane of a matrix cell: <lane>@c01 (its first run) or <lane>@c01r2 (its second)
CELL_LANE = re.compile(r"^(?P<lane>[^@]+)@(?P<cell>c[0-9]+)(?:r(?P<run>[0-9]+))?$")


class AdaptiveScheduleError(ValueError):
    """A plan's cell segment the scheduler cannot repeat (one line: which and why)."""


def repeat_cell(cell: str, run: int) -> str:
    """What a cell's ``run``-th run commits its lanes under: ``c01`` for the first, ``c01r2`` for the second."""
    return cell if run <= 1 else f"{cell}r{run}"


def decided_lane(wave: int) -> str:
    return f"{MATRIX_STOPS_LANE}@w{wave}"


def adaptive_spec(waves: Sequence[Mapping[str, Any]]) -> AdaptiveSpec | None:
    """The matrix's ``adaptive`` spec, as the plan put it in each cell's segment (``cell.adaptive``)."""
    for wave in waves:
        for seg in wave.get("segments") or []:
            spec = (seg.get("cell") or {}).get("adaptive")
            if spec:
                return AdaptiveSpec.model_validate(spec)
    return None


def cell_segments(waves: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each cell's segment of the plan (a cell runs in one segment), by cell."""
    return {
        str(seg["box"]): dict(seg)
        for wave in waves
        for seg in wave.get("segments") or []
        if seg.get("launch") is not None and seg.get("box")
    }


def repeat_segment(seg: Mapping[str, Any], run: int, wave: int) -> dict[str, Any]:
    """``seg`` (a cell's segment of the plan) as the cell's ``run``-th run in ``wave``: its lanes commit under
    ``<lane>@<cell>r<run>`` (the scripts' cell line), their needs on the cell's own lanes follow them, the cache
    push records the boot as ``wave``'s; the launch (template, subnets, tags) is the cell's own."""
    cell = str(seg["box"])
    new = repeat_cell(cell, run)

    def rename(name: str) -> str:
        lane, _, box = str(name).partition("@")
        return f"{lane}@{new}" if box == cell else str(name)

    old_line, new_line = f"export {CELL_ENV}={cell}\n", f"export {CELL_ENV}={new}\n"
    lanes = []
    for st in seg["lanes"]:
        if old_line not in st["script"]:
            raise AdaptiveScheduleError(f"cell {cell}: lane {st['result_lane']}'s script does not set {CELL_ENV}")
        old_prefix = f"{st['result_lane']}/ssm-{cell}"
        prefix = str(st.get("output_prefix") or "")
        lanes.append(
            {
                **st,
                "result_lane": rename(st["result_lane"]),
                "needs": [rename(n) for n in st.get("needs") or []],
                "wave": wave,
                "script": st["script"].replace(old_line, new_line),
                "output_prefix": prefix[: -len(old_prefix)] + f"{rename(st['result_lane'])}/ssm-{cell}"
                if prefix.endswith(old_prefix)
                else prefix,
            }
        )
    push = dict(seg["cache_push"])
    old_seg = f" --segment {seg.get('wave', 0)} "
    if old_seg not in push["script"]:
        raise AdaptiveScheduleError(f"cell {cell}: its cache push does not name its segment")
    push["script"] = push["script"].replace(old_seg, f" --segment {wave} ")
    return {**seg, "wave": wave, "lanes": lanes, "cache_push": push}


def schedule_adaptive(
    store: Any,
    run_id: str,
    waves: Sequence[Mapping[str, Any]],
    wave: int,
    statuses: Mapping[str, Any],
    box_failures: Mapping[str, str],
    record_skipped: Callable[[str, str, str], None],
) -> list[dict[str, Any]] | None:
    """The repeat wave ``wave`` (module steps) or ``[]`` when the matrix is decided or its budget ends; ``None``
    when the plan's matrix is not adaptive. ``record_skipped(result_lane, cell, reason)`` records a lane that
    left no attempt."""
    spec = adaptive_spec(waves)
    if spec is None:
        return None
    segments = cell_segments(waves)
    first = wave == len(waves)
    done = store.latest_committed(run_id, decided_lane(wave))
    repeats_before = [r for r in _table(store, "matrix_repeats", run_id) if int(r["wave"]) < wave]
    if done is not None:  # decided by an earlier try of this call: the same repeats
        planned = [r for r in _table(store, "matrix_repeats", run_id) if int(r["wave"]) == wave]
        return [planned_segment(segments, r, wave) for r in planned]
    last = [r for r in repeats_before if int(r["wave"]) == wave - 1]
    for r in last:  # step 1
        for st in planned_segment(segments, r, wave - 1)["lanes"]:
            if st["result_lane"] not in statuses:
                why = box_failures.get(r["cell"]) or f"its repeat segment on {r['cell']} ended early"
                record_skipped(st["result_lane"], r["cell"], f"did not run: {why}")
    runs = {c: 1 for c in segments}
    for r in repeats_before:
        runs[r["cell"]] = max(runs[r["cell"]], int(r["run"]))
    judged = sorted(segments) if first else sorted({r["cell"] for r in last})
    if not judged:
        return []
    stops, repeats = _decide(store, run_id, spec, segments, judged, runs, wave, box_failures)
    writer = store.begin_attempt(run_id, decided_lane(wave), DECIDED_ATTEMPT)
    if stops:
        writer.add_rows("matrix_stops", stops)
    if repeats:
        writer.add_rows("matrix_repeats", repeats)
    writer.commit("succeeded")
    return [planned_segment(segments, r, wave) for r in repeats]


def capacity_segment(seg: Mapping[str, Any], run: int, wave: int, rate_min: float, rate_max: float) -> dict[str, Any]:
    """``seg`` (a cell's segment of the plan) as the cell's ``run``-th run in ``wave`` that runs its box's own lanes
    (provenance, preflight: every lane but the matrix's serving lanes) and its capacity lane, as
    ``<lane>@<cell>r<run>``, the search bisecting [``rate_min``, ``rate_max``] req/s (the lane's config in its
    script: the bracket's rates as the search's start and top). A need on a lane left out names its first run's
    (committed)."""
    cell = str(seg["box"])
    base = repeat_segment(seg, run, wave)
    suffix = f"@{repeat_cell(cell, run)}"
    lanes = [
        st
        for st in base["lanes"]
        if st["result_lane"].split("@")[0] == CAPACITY_LANE or st["result_lane"].split("@")[0] not in MATRIX_LANES
    ]
    if not any(st["result_lane"] == CAPACITY_LANE + suffix for st in lanes):
        raise AdaptiveScheduleError(f"cell {cell}: {NO_CAPACITY_LANE}")
    kept = {st["result_lane"] for st in lanes}

    def need(n: str) -> str:
        return n if n in kept or not n.endswith(suffix) else n[: -len(suffix)] + f"@{cell}"

    return {
        **base,
        "lanes": [
            {
                **st,
                "needs": [need(n) for n in st.get("needs") or []],
                "script": _with_rates(st, rate_min, rate_max)
                if st["result_lane"] == CAPACITY_LANE + suffix
                else st["script"],
            }
            for st in lanes
        ],
    }


def _with_rates(step: Mapping[str, Any], rate_min: float, rate_max: float) -> str:
    """The lane's script with ``rate_min`` and ``rate_max`` in its ``--config`` (box_scripts.lane_script's exec
    line; the task token's argument is left as written, so the shell still expands it)."""
    lines = str(step["script"]).split("\n")
    for i, line in enumerate(lines):
        if not line.startswith("exec "):
            continue
        head, sep, tail = line[len("exec ") :].partition(" --task-token ")
        argv = shlex.split(head)
        if "--config" in argv:
            k = argv.index("--config") + 1
            argv[k] = json.dumps({**json.loads(argv[k]), "rate_min": rate_min, "rate_max": rate_max}, sort_keys=True)
        else:
            argv += ["--config", json.dumps({"rate_min": rate_min, "rate_max": rate_max}, sort_keys=True)]
        lines[i] = "exec " + " ".join(shlex.quote(a) for a in argv) + sep + tail
        return "\n".join(lines)
    raise AdaptiveScheduleError(f"lane {step['result_lane']}: its script has no exec line to set the rates on")


def planned_segment(segments: Mapping[str, Mapping[str, Any]], row: Mapping[str, Any], wave: int) -> dict[str, Any]:
    """A ``matrix_repeats`` row's segment in ``wave``: the cell's plan again (``repeat``) or its capacity lane alone
    (``capacity``)."""
    seg = segments[row["cell"]]
    if row.get("use") == CAPACITY:
        return capacity_segment(seg, int(row["run"]), wave, float(row["rate_min"]), float(row["rate_max"]))
    return repeat_segment(seg, int(row["run"]), wave)


def _table(store: Any, table: str, run_id: str) -> list[dict[str, Any]]:
    """``table``'s rows of ``run_id`` (none when no attempt wrote it)."""
    from analytics.store.integrity import plan_reads

    if not plan_reads(store, [run_id]).keys_by_table.get(table):
        return []
    return store.read_table(table, [run_id]).to_pylist()


def _decide(
    store: Any,
    run_id: str,
    spec: AdaptiveSpec,
    segments: Mapping[str, Mapping[str, Any]],
    judged: Sequence[str],
    runs: Mapping[str, int],
    wave: int,
    box_failures: Mapping[str, str],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Steps 2 and 3's rows: the stops (per group) and the runs of the ``judged`` cells."""
    from analytics.decision_noise import history_runs, store_connection

    walls: dict[tuple[str, int], float] = {}
    # per (cell, run): its lanes' box-hours, and those of a capacity run's lanes (the capacity lane and the box's own)
    capacity_walls: dict[tuple[str, int], float] = {}
    full_runs: dict[str, int] = {}  # cell -> its latest run with a serving lane other than capacity (a whole run)
    for r in _table(store, "lane_runs", run_id):
        m = CELL_LANE.match(str(r.get("lane") or ""))
        if m and r.get("wall_s") is not None:
            key = (m["cell"], int(m["run"] or 1))
            hours = float(r["wall_s"]) / 3600
            walls[key] = walls.get(key, 0.0) + hours
            if m["lane"] == CAPACITY_LANE or m["lane"] not in MATRIX_LANES:
                capacity_walls[key] = capacity_walls.get(key, 0.0) + hours
            else:
                full_runs[key[0]] = max(full_runs.get(key[0], 0), key[1])
    spent = sum(walls.values())
    con = store_connection(store, [run_id], history=history_runs(store, run_id))
    groups: dict[str, set[tuple[str | None, str]]] = {c: set() for c in judged}
    for lane, group, instance in con.execute(
        "SELECT DISTINCT lane, decision_group, instance FROM report_decision_hardware WHERE NOT is_reference"
    ).fetchall():
        m = CELL_LANE.match(str(lane))
        if m and m["cell"] in groups and not str(group).startswith(HISTORY_GROUP):
            groups[m["cell"]].add((group, instance))
    instance_of = {c: str(segments[c].get("instance_type")) for c in segments}
    stops: list[dict[str, Any]] = []

    def stop_row(s: Stop) -> dict[str, Any]:
        return {
            "wave": wave,
            "cell": s.cell,
            "instance_type": instance_of[s.cell],
            "decision_group": s.decision_group,
            "kind": s.kind,
            "reason": s.reason,
            "p_bound": s.p_bound,
            "run_sd_source": s.run_sd_source,
            "runs": runs[s.cell],
            "box_hours_spent": spent,
        }

    entries = []
    for c in judged:
        if c in box_failures:
            stops.append(
                stop_row(Stop(c, instance_of[c], None, wave, "box failed", f"its box failed: {box_failures[c]}"))
            )
            continue
        per_run = walls.get((c, full_runs.get(c, runs[c])), 0.0)  # a repeat costs the cell's last whole run
        has_capacity = any(st["result_lane"] == f"{CAPACITY_LANE}@{c}" for st in segments[c]["lanes"])
        for group, instance in sorted(groups[c], key=lambda g: (g[0] or "", g[1])) or [(None, instance_of[c])]:
            entries.append(
                CellRuns(
                    c,
                    instance,
                    group,
                    runs[c],
                    per_run,
                    capacity_walls.get((c, runs[c]), per_run) if has_capacity else None,
                    None if has_capacity else NO_CAPACITY_LANE,
                )
            )
    plan = next_wave(con, spec.model_copy(update={"budget_box_hours": None}), entries, wave, spent)
    keep = set(plan.repeat)
    stops += [stop_row(s) for s in plan.stops if s.cell not in keep]

    def p_of(u: Use) -> float:
        return u.p_bound or 0.0

    # a cell in several groups: the use its most contended group chose
    use_of = {c: max((u for u in plan.uses if u.cell == c), key=p_of) for c in keep}
    bound = {c: p_of(use_of[c]) for c in keep}
    repeats: list[dict[str, Any]] = []
    for c in sorted(keep, key=lambda c: (-bound[c], c)):
        use = use_of[c]
        if spec.budget_box_hours is not None and spent + use.box_hours > spec.budget_box_hours:
            reason = (
                f"another run ({use.use}, {use.box_hours:.3g} box-hours) would pass the budget: {spent:.3g} of "
                f"{spec.budget_box_hours:g} box-hours spent"
            )
            stops.append(stop_row(Stop(c, instance_of[c], None, wave, "budget", reason)))
            continue
        spent += use.box_hours
        repeats.append(
            {
                "wave": wave,
                "cell": c,
                "instance_type": instance_of[c],
                "run": runs[c] + 1,
                "p_bound": bound[c] or None,
                "box_hours_per_run": use.box_hours,
                "use": use.use,
                "use_reason": use.reason,
                "rate_min": use.rate_min,
                "rate_max": use.rate_max,
            }
        )
    return stops, repeats
