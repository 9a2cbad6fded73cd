"""The run as a dependency graph: which lane waits for which, which lanes a failure blocks, the run's outcome.

Pure and cheap (no torch, no AWS): the planner, the local runner, the on-box runner, the scheduler
Lambda, ``finalize_run``, ``status`` and the report all decide with these functions, so a rule holds the
same way everywhere.

Rules:

* **needs** (``LaneSpec.needs``): a lane consumes the committed output of the lanes it names
  (``merge`` needs ``sft``; ``finetune_serve`` needs ``merge``). A need binds only when the needed lane is
  part of the run (selected now, or committed for this run before a resume): ``finetune_serve`` alone
  (the new-adapter preset) reads an adapter or another run's merge and waits for nothing. A need is met
  by the same box's instance of the lane when it runs there, else by the box that runs it.
* **gates** (``LaneSpec.gate``): a gate lane (``smoke``, the $1 plumbing gate) precedes every lane after
  it in its box's order; those lanes need it.
* **failure stays local**: a lane whose need did not succeed is not run; it is recorded ``skipped`` with
  the reason (``needs merge, which failed in attempt …``) and ``blocked_by`` naming the lane. Every
  other lane runs.
* **outcome**: ``failed`` when a gate did not pass, a box failed, or nothing succeeded; ``partial`` when
  some lane failed or was blocked; else ``succeeded`` (a lane that skipped itself — not applicable on
  this backend, already committed — is not a failure).
* **waves**: a lane that needs a lane on another box waits for that box: its wave is one more than its
  producer's. Within a wave the boxes work at once; a box's lanes in a wave run in registry order.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

LOCAL = "local"
BOX_PREFIX = "box:"  # blocked_by value when a box's phase failed (the lane never reached the box)


class LaneGraphError(ValueError):
    """The registry's dependency graph is invalid (unknown lane, cycle, a need that no box can meet)."""


@dataclass(frozen=True)
class Node:
    """One lane on one box: what is committed as ``result_lane`` (``smoke@trn1``; ``merge``; locally the name)."""

    lane: str
    box: str
    result_lane: str
    order: int
    needs: tuple[str, ...] = ()  # result lanes this node waits for (data needs and its gate)
    gate: bool = False  # this node is a gate
    wave: int = 0
    gated_by: tuple[str, ...] = ()  # the needs that are gates (wording: "gate smoke@trn1 did not pass")

    def to_json(self) -> dict[str, Any]:
        return {
            "lane": self.lane,
            "box": self.box,
            "result_lane": self.result_lane,
            "order": self.order,
            "needs": list(self.needs),
            "gate": self.gate,
            "wave": self.wave,
            "gated_by": list(self.gated_by),
        }


@dataclass(frozen=True)
class LaneStatus:
    """A lane's standing in a run, from the store (or from the state machine for a box that failed)."""

    status: str  # succeeded | failed | skipped | blocked | missing
    attempt: str | None = None
    reason: str | None = None  # skip reason, error "Class: message", or box failure
    blocked_by: str | None = None


MISSING = LaneStatus("missing")


@dataclass
class RunOutcome:
    status: str  # succeeded | partial | failed
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # blocked lanes, with their reasons in `reasons`
    reasons: dict[str, str] = field(default_factory=dict)
    why: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "failed": self.failed,
            "skipped": self.skipped,
            "reasons": self.reasons,
            "why": self.why,
        }

    def summary(self) -> str:
        parts = [self.status]
        if self.failed:
            parts.append(f"failed: {', '.join(self.failed)}")
        if self.skipped:
            parts.append(f"skipped: {', '.join(self.skipped)}")
        if self.why:
            parts.append(self.why)
        return "; ".join(parts)


# ---- the registry's graph ------------------------------------------------------------------------------
def validate(specs: Mapping[str, Any]) -> None:
    """No unknown names, no self-needs, no cycles, every need runs on some box of the needing lane's run."""
    for spec in specs.values():
        for need in spec.needs:
            if need not in specs:
                raise LaneGraphError(
                    f"lane {spec.name} needs {need!r}, which is not a lane (valid: {', '.join(sorted(specs))})"
                )
            if need == spec.name:
                raise LaneGraphError(f"lane {spec.name} needs itself")
    state: dict[str, int] = {}  # 1 visiting, 2 done

    def visit(name: str, path: list[str]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            cycle = path[path.index(name) :] + [name]
            raise LaneGraphError(f"lane needs form a cycle: {' -> '.join(cycle)}")
        state[name] = 1
        for need in specs[name].needs:
            visit(need, path + [name])
        state[name] = 2

    for name in sorted(specs):
        visit(name, [])


def _result_name(spec: Any, box: str) -> str:
    return f"{spec.name}@{box}" if box in spec.boxes and len(spec.boxes) > 1 else spec.name


def build_nodes(
    specs: Sequence[Any],
    boxes: Sequence[str],
    in_run: Iterable[str] = (),
    place: Callable[[Any, str], str | None] | None = None,
) -> list[Node]:
    """The run's nodes: each selected lane on each selected box it supports (locally: ``boxes=["local"]``).

    ``in_run`` are base lane names committed for this run before (a resume): a need on one of them binds
    (and is met or not by the store), although the lane itself is not re-run. ``place(spec, box)`` (a run matrix:
    the pinned boxes and the cells) says where a lane goes instead of its boxes: the result lane it commits as on
    that box, or None when it does not run there."""
    specs = sorted(specs, key=lambda s: s.order)
    local = list(boxes) == [LOCAL]
    placed: dict[str, list[tuple[str, str]]] = {}  # lane -> [(box, result lane)]
    for spec in specs:
        if place is not None:
            for box in boxes:
                if (rname := place(spec, box)) is not None:
                    placed.setdefault(spec.name, []).append((box, rname))
            continue
        for box in [LOCAL] if local else [b for b in boxes if b in spec.boxes]:
            placed.setdefault(spec.name, []).append((box, spec.name if local else _result_name(spec, box)))
    prior = set(in_run)
    nodes: list[Node] = []
    for spec in specs:
        for box, rname in placed.get(spec.name, []):
            needs: list[str] = []
            for need in spec.needs:
                producers = placed.get(need)
                if producers:
                    same = [r for b, r in producers if b == box]
                    needs.append(same[0] if same else producers[0][1])
                elif need in prior:
                    needs.append(need)  # committed earlier in this run (single-box lanes commit under their name)
            gates = [
                r
                for g in specs
                if g.gate and g.order < spec.order and g.name != spec.name
                for b, r in placed.get(g.name, [])
                if b == box
            ]
            nodes.append(
                Node(
                    spec.name,
                    box,
                    rname,
                    spec.order,
                    tuple(dict.fromkeys(gates + needs)),
                    bool(spec.gate),
                    gated_by=tuple(gates),
                )
            )
    return assign_waves(nodes)


def assign_waves(nodes: Sequence[Node]) -> list[Node]:
    """A node's wave: the most of (producer's wave + 1 when the producer is on another box, else + 0)."""
    by_name = {n.result_lane: n for n in nodes}
    waves: dict[str, int] = {}

    def wave(name: str) -> int:
        if name not in waves:
            node = by_name.get(name)
            if node is None:
                return -1  # committed before this run's plan: no wait
            waves[name] = max(
                [
                    wave(p) + (1 if by_name.get(p) and by_name[p].box != node.box else 0)
                    for p in node.needs
                    if p in by_name
                ]
                or [0]
            )
        return waves[name]

    out = [Node(n.lane, n.box, n.result_lane, n.order, n.needs, n.gate, wave(n.result_lane), n.gated_by) for n in nodes]
    return sorted(out, key=lambda n: (n.wave, n.box, n.order))


def topological(nodes: Sequence[Node]) -> list[Node]:
    """One machine's order: by wave, then registry order (a need always comes first)."""
    return sorted(nodes, key=lambda n: (n.wave, n.order, n.box))


# ---- statuses and blocking -----------------------------------------------------------------------------
def blocked_reason(node: Node, statuses: Mapping[str, LaneStatus]) -> tuple[str, str] | None:
    """``(blocked_by, reason)`` when a need of ``node`` did not succeed; None when it may run."""
    for need in node.needs:
        st = statuses.get(need, MISSING)
        if st.status == "succeeded":
            continue
        where = f" in attempt {st.attempt}" if st.attempt else ""
        said = f" ({_short(st.reason)})" if st.reason else ""
        if st.status == "failed":
            detail = f"failed{where}{said}"
        elif st.status in ("skipped", "blocked"):
            detail = f"was skipped{where}{said}"
        else:
            detail = f"did not run{said}"
        if need in node.gated_by:
            return need, f"gate {need} did not pass: it {detail}"
        return need, f"needs {need}, which {detail}"
    return None


def _short(text: str | None, limit: int = 160) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def statuses_from_rows(rows: Iterable[Mapping[str, Any]]) -> dict[str, LaneStatus]:
    """Each lane's standing from its ``lane_runs`` rows (one row per committed attempt).

    The standing is the newest attempt that counts: an attempt that supersedes (the lane ran), or a
    blocked record (``blocked_by`` set) newer than it. A resume's "already committed" record (does not
    supersede, nothing blocked it) never changes the standing."""
    best: dict[str, tuple[str, LaneStatus]] = {}
    for r in rows:
        blocked = r.get("blocked_by")
        if not r.get("supersedes") and not blocked:
            continue
        status = r.get("status") or "missing"
        if blocked and status == "skipped":
            status = "blocked"
        if status == "failed":
            reason = f"{r.get('error_type') or 'Error'}: {r.get('error_message') or ''}".strip()
        else:
            reason = r.get("skip_reason")
        key = str(r.get("attempt") or "")  # attempt ids sort in the store's clock-proof sequence order
        lane = str(r["lane"])
        if lane not in best or key > best[lane][0]:
            best[lane] = (key, LaneStatus(status, r.get("attempt"), reason, blocked))
    return {lane: st for lane, (_, st) in best.items()}


def outcome(
    nodes: Sequence[Node],
    statuses: Mapping[str, LaneStatus],
    box_failures: Mapping[str, str] | None = None,
    cells: Collection[str] = (),
) -> RunOutcome:
    """The run's outcome over its planned nodes (see the module's rules). ``cells``: the boxes that are cells of
    a run matrix: a cell's failure (its box refused for capacity, its gate, a hung lane) is contained: the run is
    ``partial`` while another lane succeeded, and ``failed`` only when nothing did or a pinned box failed."""
    box_failures = dict(box_failures or {})
    cell_failures = {b: e for b, e in box_failures.items() if b in cells}
    box_failures = {b: e for b, e in box_failures.items() if b not in cells}
    out = RunOutcome("succeeded")
    gate_failed: list[str] = []
    cell_gate_failed: set[str] = set()
    any_ok = False
    for n in nodes:
        st = statuses.get(n.result_lane, MISSING)
        if st.status == "succeeded" or (st.status == "skipped" and not st.blocked_by):
            any_ok = any_ok or st.status == "succeeded"
            continue
        if st.status == "failed":
            out.failed.append(n.result_lane)
            out.reasons[n.result_lane] = st.reason or "failed"
        else:
            out.skipped.append(n.result_lane)
            out.reasons[n.result_lane] = st.reason or (
                f"did not run (box {n.box} failed: {box_failures[n.box]})"
                if n.box in box_failures
                else f"did not run (cell {n.box} failed: {cell_failures[n.box]})"
                if n.box in cell_failures
                else "did not run"
            )
        if n.gate and n.box not in cells:
            gate_failed.append(n.result_lane)
        if n.gate and n.box in cells:
            cell_gate_failed.add(n.box)
    cell_why = "; ".join(f"cell {b} failed: {_short(e)}" for b, e in sorted(cell_failures.items()))
    if box_failures:
        out.status = "failed"
        out.why = "; ".join(f"box {b} failed: {_short(e)}" for b, e in sorted(box_failures.items()))
    elif gate_failed:
        out.status, out.why = "failed", f"gate {', '.join(gate_failed)} did not pass"
    elif (
        cells
        and not (set(cells) - set(cell_failures) - cell_gate_failed)
        and not any(statuses.get(n.result_lane, MISSING).status == "succeeded" for n in nodes if n.box not in cells)
    ):
        out.status = "failed"
        out.why = "every cell of the matrix failed"
    elif not any_ok and nodes:
        out.status, out.why = "failed", "no lane succeeded"
    elif out.failed or out.skipped or cell_failures:
        out.status = "partial"
    if cell_why:
        out.why = "; ".join(w for w in (out.why, cell_why) if w)
    return out


def exit_code(status: str) -> int:
    """``run --local`` / ``run --aws`` exit codes: 0 succeeded, 3 partial, 1 failed (130 interrupted, 2 refused)."""
    return {"succeeded": 0, "partial": EXIT_PARTIAL, "failed": 1}.get(status, 1)


EXIT_PARTIAL = 3


def outcome_text(result: RunOutcome | Mapping[str, Any]) -> str:
    """``failed: quality (RuntimeError: boom); skipped: finetune_serve (needs merge, which failed …)``: the
    one wording of an outcome's lanes and reasons (terminal, run summary and REPORT.md); "" when clean."""
    data = result.to_json() if isinstance(result, RunOutcome) else result
    reasons = data.get("reasons") or {}
    parts = []
    for key in ("failed", "skipped"):
        if data.get(key):
            parts.append(
                f"{key}: "
                + ", ".join(f"{lane} ({_short(reasons[lane])})" if reasons.get(lane) else lane for lane in data[key])
            )
    if data.get("why"):
        parts.append(str(data["why"]))
    return "; ".join(parts)
