"""A run judged against its history at finalize (docs/reference/history.md).

The baseline is named by the request (``baseline``: a run id, or ``{"last": N}``) or by the run's schedule (the
schedule's ``baseline_last``). Its runs are found in the results store by what the control plane committed at
each run's finalize: the request fingerprint (:mod:`control_plane.fingerprint`, a provenance row of category
``request``) and the instance type the run's lanes recorded. A baseline run of another fingerprint or instance
type is refused in one line (:class:`BaselineError`), never compared.

The comparison is ``compare``'s (:func:`analytics.report.sides.compare_sides`: run-level verdicts, the floor
from the baseline's own A/A spread when it holds ≥ 2 runs), then the family-wise rule
(:mod:`analytics.report.familywise`): the announced outcome is the run-level shift's, judged against the A/A
spread of the same statistic over the baseline's runs; a point that moved on its own is reported local. The
verdict rows, with the fingerprint, are one committed attempt of the reserved lane ``baseline`` under one fixed
attempt id, so a re-finalized run keeps its first judgement.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from analytics.schema.history import BASELINE_LANE, JUDGEMENT_ATTEMPT

EVENT_OF_OUTCOME = {"regressed": "RunRegressed", "improved": "RunImproved"}


class BaselineError(ValueError):
    """The baseline cannot be used: the message is one line naming the field and why."""


class NoHistoryError(BaselineError):
    """``{"last": N}`` and no earlier run of the fingerprint on the instance type: the run starts the series."""


@dataclass(frozen=True)
class RunFacts:
    run_id: str
    fingerprint: str | None
    instance_type: str | None
    ended_at: Any


@dataclass
class Judgement:
    run_id: str
    fingerprint: str
    instance_type: str | None
    baseline_spec: str | None
    baseline_runs: list[str] = field(default_factory=list)
    outcome: str = "untested"  # regressed | improved | unchanged | untested | no baseline
    counts: dict[str, int] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)
    note: str | None = None
    run_shift: dict[str, Any] | None = None  # analytics.report.familywise.RunShift as a dict
    change_points: list[dict[str, Any]] = field(default_factory=list)  # new in the run-level series with this run
    series_note: str | None = None  # why the series cannot say (too short), else None

    @property
    def event(self) -> str | None:
        """RunRegressed / RunImproved where the family-wise rule found a change; None: the run's own event."""
        return EVENT_OF_OUTCOME.get(self.outcome)

    def moved(self) -> list[dict[str, Any]]:
        """The rows of the points announced with the run (a local point's rows are not)."""
        return [r for r in self.rows if r["finding"] in ("faster", "slower") and r["point_finding"] == r["finding"]]

    def local(self) -> list[dict[str, Any]]:
        """The rows of the points that moved on their own (``local slower`` / ``local faster``), not announced."""
        return [r for r in self.rows if r["finding"] in ("faster", "slower") and r["point_finding"] != r["finding"]]

    def answer(self) -> dict[str, Any]:
        """What the finalize answer (and so the run's event) carries: the outcome, the counts, the rows that moved."""
        return {
            "outcome": self.outcome,
            "event": self.event,
            "baseline": self.baseline_spec,
            "baseline_runs": self.baseline_runs,
            "request_fingerprint": self.fingerprint,
            "instance_type": self.instance_type,
            "counts": self.counts,
            "run_shift": self.run_shift,
            "change_points": self.change_points,
            "series_note": self.series_note,
            "note": self.note,
            "moved": [
                {k: r[k] for k in ("metric", "pct", "ci_low_pct", "ci_high_pct", "familywise_floor_pct", "finding")}
                for r in self.moved()
            ][:20],
        }


def _fingerprints(store: Any, run_ids: list[str] | None = None) -> dict[str, str]:
    t = store.read_table("provenance", run_ids).to_pylist()
    return {r["run_id"]: r["value"] for r in t if r["category"] == "request" and r["name"] == "fingerprint"}


def run_facts(store: Any, run_ids: list[str] | None = None) -> dict[str, RunFacts]:
    """Every run's fingerprint (NULL when it was never judged), instance type and last lane end."""
    fps = _fingerprints(store, run_ids)
    lanes = store.read_table("lane_runs", run_ids).to_pylist()
    out: dict[str, RunFacts] = {}
    for rid in sorted({r["run_id"] for r in lanes} | set(fps)):
        mine = [r for r in lanes if r["run_id"] == rid]
        types = sorted({r.get("instance_type") or r.get("priced_as") for r in mine} - {None})
        ended = max((r["ended_at"] for r in mine if r.get("ended_at") is not None), default=None)
        out[rid] = RunFacts(rid, fps.get(rid), types[0] if types else None, ended)
    return out


def resolve_baseline(
    facts: dict[str, RunFacts], run_id: str, fingerprint: str, instance_type: str | None, spec: Any
) -> tuple[str, list[str]]:
    """(the spec as text, the baseline's runs oldest first); :class:`BaselineError` naming the problem."""
    last = getattr(spec, "last", None) if not isinstance(spec, dict) else spec.get("last")
    if last is None:
        rid = str(spec)
        if rid == run_id:
            raise BaselineError(f"baseline: run {rid} is this run; a baseline is an earlier run")
        other = facts.get(rid)
        if other is None:
            raise BaselineError(f"baseline: run {rid} is not in the results store")
        if other.fingerprint != fingerprint:
            raise BaselineError(
                f"baseline: run {rid} is of another request (fingerprint {other.fingerprint or 'none'}"
                f", this run's {fingerprint}); a baseline measures the same request"
            )
        if other.instance_type != instance_type:
            raise BaselineError(
                f"baseline: run {rid} ran on {other.instance_type or 'no recorded instance type'}, "
                f"this run on {instance_type or 'no recorded instance type'}; a baseline runs on the "
                "same instance type"
            )
        return rid, [rid]
    # the history: runs finalized before this one (a fingerprint is committed at a run's finalize)
    same = [
        f
        for f in facts.values()
        if f.run_id != run_id and f.fingerprint == fingerprint and f.instance_type == instance_type
    ]
    same.sort(key=lambda f: (f.ended_at is None, f.ended_at, f.run_id))
    if not same:
        raise NoHistoryError(
            f"baseline: last:{last}: no earlier run of fingerprint {fingerprint} on "
            f"{instance_type or 'this host'} in the results store"
        )
    return f"last:{last}", [f.run_id for f in same[-int(last) :]]


def _fingerprint_rows(fingerprint: str, spec: str | None, schedule: str | None) -> list[dict[str, Any]]:
    src = "control_plane.fingerprint (at finalize)"
    rows = [{"category": "request", "name": "fingerprint", "value": fingerprint, "source": src}]
    if spec is not None:
        rows.append({"category": "request", "name": "baseline", "value": spec, "source": src})
    if schedule is not None:
        rows.append({"category": "request", "name": "schedule", "value": schedule, "source": src})
    return rows


def judge_run(
    store: Any,
    run_id: str,
    request: Any,
    *,
    schedule: str | None = None,
    baseline_last: int | None = None,
    now: datetime | None = None,
    commit: bool = True,
) -> Judgement:
    """Judge ``run_id`` (its :class:`control_plane.models.RunRequest`) against its baseline and commit the rows.

    The baseline is the request's ``baseline``, else ``{"last": baseline_last}`` for a scheduled run, else none
    (only the fingerprint is committed). :class:`BaselineError` for a baseline that names a run of another
    request or instance type (nothing is committed)."""
    from analytics.report.familywise import judge_family
    from control_plane.fingerprint import request_fingerprint

    fp = request_fingerprint(request)
    spec = request.baseline if request.baseline is not None else ({"last": baseline_last} if baseline_last else None)
    facts = run_facts(store)
    mine = facts.get(run_id)
    itype = mine.instance_type if mine else None
    j = Judgement(run_id, fp, itype, None)
    try:
        resolved = None if spec is None else resolve_baseline(facts, run_id, fp, itype, spec)
    except NoHistoryError as exc:
        resolved, j.outcome, j.note = None, "no history", f"{exc}: this run starts the series"
    if resolved is not None:
        j.baseline_spec, j.baseline_runs = resolved
        if schedule:  # a scheduled run: its schedule named the baseline (pipeline.schedules.delivered_request)
            j.baseline_spec = f"schedule:{schedule} ({j.baseline_spec})"
        # the run's series: the earlier runs of its fingerprint on its instance type (the last ones), then the run
        earlier = sorted(
            (f for f in facts.values() if f.run_id != run_id and f.fingerprint == fp and f.instance_type == itype),
            key=lambda f: (f.ended_at is None, f.ended_at, f.run_id),
        )
        series_runs = [f.run_id for f in earlier][-(SERIES_MAX_RUNS - 1) :] + [run_id]
        entry, values = compare_with_values(
            store,
            j.baseline_runs,
            [run_id],
            floor_runs=j.baseline_runs if len(j.baseline_runs) >= 2 else (),
            value_runs=series_runs,
        )
        base_values = {
            m: [values[r].get(m) for r in j.baseline_runs] for m in {k for r in j.baseline_runs for k in values[r]}
        }
        fam = judge_family(entry["rows"], entry["noise_floor"], len(j.baseline_runs), 1, baseline_values=base_values)
        run = fam.run
        j.change_points, j.series_note = _series_changes(store, series_runs, values, entry["rows"])
        outcome = combined_outcome(fam.outcome, j.change_points)
        at = now or datetime.now(timezone.utc)
        by_metric = {r["metric"]: r for r in entry["rows"]}
        for jr in fam.rows:
            r = by_metric[jr.metric]
            a = r.get("a")
            j.rows.append(
                {
                    "request_fingerprint": fp,
                    "instance_type": itype,
                    "baseline_spec": j.baseline_spec,
                    "baseline_runs": ",".join(j.baseline_runs),
                    "metric": jr.metric,
                    "point": jr.point,
                    "family": jr.family,
                    "better": r.get("better") or "lower",
                    "baseline_value": a,
                    "value": r.get("b"),
                    "pct": jr.pct,
                    "ci_low_pct": None if r.get("run_ci_low") is None or not a else 100.0 * r["run_ci_low"] / a,
                    "ci_high_pct": None if r.get("run_ci_high") is None or not a else 100.0 * r["run_ci_high"] / a,
                    "unit": r.get("unit"),
                    "floor_pct": jr.floor_pct,
                    "familywise_floor_pct": jr.familywise_floor_pct,
                    "verdict": jr.verdict,
                    "finding": jr.finding,
                    "point_finding": fam.points[jr.point],
                    "outcome": outcome,
                    "findings_tested": fam.findings_tested,
                    "run_shift_pct": run.pct,
                    "run_shift_ci_low_pct": run.ci_low_pct,
                    "run_shift_ci_high_pct": run.ci_high_pct,
                    "run_floor_pct": run.floor_pct,
                    "run_finding": run.finding,
                    "note": r.get("note"),
                    "judged_at": at,
                }
            )
        j.outcome, j.counts = outcome, fam.counts()
        j.run_shift = {
            "pct": run.pct,
            "ci_low_pct": run.ci_low_pct,
            "ci_high_pct": run.ci_high_pct,
            "floor_pct": run.floor_pct,
            "finding": run.finding,
            "points": run.points,
            "basis": run.basis,
        }
        j.note = (
            f"run-level: the median over {run.points} points of their mean log change against {run.basis}, "
            f"α = {fam.alpha}; points family-wise: {fam.findings_tested} tested (Bonferroni over points, a point's "
            "correlated rows count once), a point not in the run's direction is local, not announced; "
            + (j.series_note or f"change points sought in the run-level series of its last {len(series_runs)} runs")
        )
    elif spec is None:
        j.outcome, j.note = "no baseline", "no baseline named (request baseline or a schedule's)"
    if commit:
        commit_judgement(store, j, schedule)
    return j


def compare_with_values(
    store: Any, runs_a: list[str], runs_b: list[str], floor_runs: Any = (), value_runs: Any = ()
) -> tuple[dict[str, Any], dict[str, dict[str, float | None]]]:
    """compare's entry of ``runs_b`` against ``runs_a`` (:func:`analytics.report.sides.compare_sides`) and each
    headline's value in each run of ``runs_a`` and ``value_runs`` (``{run: {metric: value}}``): the baseline's runs
    the run-level shift's A/A spread is measured over, and the series' runs."""
    from analytics.report.compare import FAIL_PCT, side_deltas, unit_headlines
    from analytics.report.comparison import build_comparison
    from analytics.report.rows import clean
    from analytics.report.run_level import center
    from analytics.views import connect

    ids = list(dict.fromkeys([*runs_a, *runs_b, *floor_runs, *value_runs]))
    con = connect(store, run_ids=ids)
    try:
        c = build_comparison(con, ids, with_deltas=False)
        entry = clean(side_deltas(c, runs_a, runs_b, con, FAIL_PCT, list(floor_runs)))
        heads = {r: unit_headlines(c, r) for r in dict.fromkeys([*runs_a, *value_runs])}
    finally:
        con.close()
    values: dict[str, dict[str, float | None]] = {}
    for run, h in heads.items():
        vals = {metric: center(v or []) for metric, v in h.items()}
        values[run] = {m: v if isinstance(v, (int, float)) else None for m, v in vals.items()}
    return entry, values


SERIES_MAX_RUNS = 30  # the run-level series a run's change points are sought in: its last runs


def _series_changes(
    store: Any, runs: list[str], values: dict[str, dict[str, float | None]], rows: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], str | None]:
    """The change points the judged run (``runs[-1]``) revealed in its run-level series, with what provenance says
    changed between the runs on either side; a note when the series cannot say."""
    from analytics.provenance_diff import changes, summary
    from analytics.report.familywise import TESTED, new_change_points, run_level_series

    better = {r["metric"]: r.get("better") for r in rows if r.get("verdict") in TESTED}
    series = run_level_series(runs, {m: [values.get(r, {}).get(m) for r in runs] for m in better}, better)
    found, note = new_change_points(runs, series)
    out = []
    prov = store.read_table("provenance", [c.run_before for c in found] + [c.run_after for c in found]).to_pylist()
    for c in found:
        diff = changes(
            [p for p in prov if p["run_id"] == c.run_before], [p for p in prov if p["run_id"] == c.run_after]
        )
        out.append(
            {
                "run_before": c.run_before,
                "run_after": c.run_after,
                "pct": c.pct,
                "p_value": c.p_value,
                "finding": c.finding,
                "what_changed": summary(diff),
            }
        )
    return out, note


def combined_outcome(run_outcome: str, change_points: list[dict[str, Any]]) -> str:
    """The run's outcome: a regression is the run-level verdict or a new change point of the run-level series
    towards slower (whatever the run-level verdict says)."""
    return "regressed" if any(c["finding"] == "slower" for c in change_points) else run_outcome


def commit_judgement(store: Any, j: Judgement, schedule: str | None = None) -> bool:
    """One attempt of the ``baseline`` lane: the fingerprint rows and the verdict rows; False when the run was
    judged before (the first judgement stands)."""
    from analytics.store.markers import AlreadyExistsError

    if store.latest_committed(j.run_id, BASELINE_LANE) is not None:
        return False
    try:
        writer = store.begin_attempt(j.run_id, BASELINE_LANE, JUDGEMENT_ATTEMPT)
        writer.add_rows("provenance", _fingerprint_rows(j.fingerprint, j.baseline_spec, schedule))
        if j.rows:
            writer.add_rows("baseline_verdicts", j.rows)
        writer.commit("succeeded")
    except AlreadyExistsError:
        return False
    return True


# ---- the AWS path: the request kept as control data, the announcement -------------------------------------
HISTORY_OBJECT = "history.json"


def schedule_of(trigger: str | None) -> str | None:
    """The schedule's name of a scheduled run (trigger ``schedule:<name>``), else None."""
    return trigger.split(":", 1)[1] or None if trigger and trigger.startswith("schedule:") else None


def history_record(request: Any) -> dict[str, Any]:
    """What finalize needs of a run's request: the request itself and its schedule's name."""
    return {"request": request.model_dump(mode="json"), "schedule": schedule_of(request.trigger)}


def register_history(blobs: Any, run_id: str, request: Any) -> str:
    """``control/<run_id>/history.json``, create-only (the planners write it before the execution starts)."""
    from control_plane.control_data import canonical, control_key, write_new

    return write_new(blobs, control_key(run_id, HISTORY_OBJECT), canonical(history_record(request)))


def read_history(blobs: Any, run_id: str) -> tuple[Any, str | None] | None:
    """(the run's RunRequest, its schedule) from its control object; None when the planners wrote none."""
    import json

    from control_plane.control_data import control_key
    from control_plane.models import RunRequest

    body = blobs.get(control_key(run_id, HISTORY_OBJECT))
    if body is None:
        return None
    data = json.loads(body)
    return RunRequest.model_validate(data["request"]), data.get("schedule")


def alert_message(j: Judgement, report_uri: str | None, what_changed: str) -> tuple[str, str]:
    """(subject, body) of the announcement of a regressed run: each slower row with its size and interval."""
    slower = [r for r in j.moved() if r["finding"] == "slower"]
    subject = f"neuronpipe: run {j.run_id} regressed against {j.baseline_spec}"[:100]
    lines = [
        f"Run {j.run_id} (request {j.fingerprint}, {j.instance_type or 'local'}) regressed against its "
        f"baseline {j.baseline_spec}: runs {', '.join(j.baseline_runs)}.",
        run_shift_line(j),
        f"Since the baseline: {j.counts.get('faster', 0)} faster, {j.counts.get('slower', 0)} slower, "
        f"{j.counts.get('within noise', 0)} within noise, {j.counts.get('local', 0)} local (points; {j.note}).",
        "",
        "Slower points:" if slower else "No point slower beyond its family-wise floor in the run's direction.",
    ]
    for r in slower[:20]:
        ci = (
            "" if r["ci_low_pct"] is None else f" (95 % interval {r['ci_low_pct']:+.1f} % to {r['ci_high_pct']:+.1f} %)"
        )
        lines.append(
            f"- {r['metric']}: {r['pct']:+.1f} %{ci}, beyond the family-wise floor {r['familywise_floor_pct']:.1f} %"
        )
    for c in j.change_points:
        lines.append(
            f"New change point in the run-level series: from run {c['run_after']} on (after {c['run_before']}), "
            f"{c['pct']:+.1f}% ({c['finding']}, permutation p = {c['p_value']:.3f}); what changed: {c['what_changed']}"
        )
    if j.series_note:
        lines.append(f"Change points: {j.series_note}.")
    lines += ["", f"What changed (provenance): {what_changed}", f"Report: {report_uri or 'not written'}"]
    return subject, "\n".join(lines)


def run_shift_line(j: Judgement) -> str:
    """``Run-level shift: +24.8 % slower (95 % interval …), beyond its floor 6.1 % (…)``."""
    r = j.run_shift or {}
    if r.get("pct") is None:
        return "Run-level shift: not measured (no tested row)."
    ci = (
        "" if r.get("ci_low_pct") is None else f" (95 % interval {r['ci_low_pct']:+.1f} % to {r['ci_high_pct']:+.1f} %)"
    )
    return (
        f"Run-level shift: {r['pct']:+.1f} %{ci}, {r['finding']} against its floor {r['floor_pct']:.1f} % "
        f"(median over {r['points']} points; {r['basis']})."
    )


def what_changed(store: Any, before: str, after: str) -> str:
    """provenance_diff between the baseline's last run and this run, as one line."""
    from analytics.provenance_diff import changes, summary

    rows = store.read_table("provenance", [before, after]).to_pylist()
    return summary(changes([r for r in rows if r["run_id"] == before], [r for r in rows if r["run_id"] == after]))


# ---- the local path ------------------------------------------------------------------------------------
def check_named_baseline(results: str, run_id: str, request: Any, instance_type: str | None) -> None:
    """Before a local run starts: a baseline naming a run id must be a run of this request on this instance type
    (``--price-as``, the local run's declared type) in the results store; :class:`BaselineError` otherwise."""
    from pathlib import Path

    from analytics.store import open_store
    from control_plane.fingerprint import request_fingerprint

    if request.baseline is None or not isinstance(request.baseline, str):
        return
    facts = run_facts(open_store(results)) if Path(results).is_dir() else {}
    resolve_baseline(facts, run_id, request_fingerprint(request), instance_type, request.baseline)


def judgement_line(j: Judgement) -> str:
    """One line for the console: what the run was judged against and what came of it."""
    if not j.baseline_runs:
        return f"baseline: {j.outcome} ({j.note})"
    c = j.counts
    return (
        f"since the baseline ({j.baseline_spec}: {', '.join(j.baseline_runs)}): {c.get('faster', 0)} faster, "
        f"{c.get('slower', 0)} slower, {c.get('within noise', 0)} within noise, {c.get('local', 0)} local — "
        f"{j.outcome}; {run_shift_line(j)}"
    )


def judge_local(results: str, run_id: str, request: Any) -> str:
    """A local run judged against its baseline after its lanes (the control plane's finalize, here); its line."""
    from analytics.store import open_store

    try:
        return judgement_line(judge_run(open_store(results), run_id, request))
    except BaselineError as exc:
        return f"baseline: not judged: {exc}"
