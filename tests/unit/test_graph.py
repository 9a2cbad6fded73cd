"""The run as a graph (pipeline.graph): needs and gates from the registry, waves, blocked reasons, the outcome."""

from __future__ import annotations

import pytest

from pipeline.graph import (
    EXIT_PARTIAL,
    LaneGraphError,
    LaneStatus,
    Node,
    blocked_reason,
    build_nodes,
    exit_code,
    outcome,
    statuses_from_rows,
    topological,
    validate,
)
from pipeline.lanes import LaneSpec, get_lane, plan_order
from pipeline.run_outcome import outcome_of_run


def _by_name(nodes):
    return {n.result_lane: n for n in nodes}


def test_registry_declares_the_data_needs_and_the_gate():
    assert get_lane("merge").needs == ("sft",)
    assert get_lane("finetune_serve").needs == ("merge",)
    assert get_lane("smoke").gate and not get_lane("sft").gate
    assert (
        get_lane("preflight").gate
        and get_lane("provenance").order < get_lane("preflight").order < get_lane("smoke").order
    )


def test_full_graph_on_both_boxes_puts_only_merge_consumers_in_a_later_wave():
    nodes = _by_name(build_nodes(plan_order(), ["trn1", "inf2"]))
    assert nodes["finetune_serve"].needs == ("preflight@inf2", "smoke@inf2", "merge")
    assert nodes["finetune_serve"].wave == 1 and nodes["quality"].wave == 1 and nodes["accuracy"].wave == 1
    assert {n.result_lane for n in nodes.values() if n.wave == 1} == {"finetune_serve", "quality", "accuracy"}
    # the gate precedes the lanes after it on its own box only; lanes before it are not gated
    assert nodes["sft"].gated_by == ("preflight@trn1", "smoke@trn1")
    assert nodes["serve_sweep"].gated_by == ("preflight@inf2", "smoke@inf2")
    assert nodes["host_cpu@trn1"].needs == ("preflight@trn1",)
    assert nodes["provenance@trn1"].needs == ()  # provenance first: nothing runs on a box before its facts


def test_a_need_outside_the_run_does_not_bind_unless_committed_before():
    alone = _by_name(build_nodes([get_lane("finetune_serve")], ["inf2"]))
    assert alone["finetune_serve"].needs == ()  # the new-adapter preset waits for nothing
    resumed = _by_name(build_nodes([get_lane("finetune_serve")], ["inf2"], in_run={"merge"}))
    assert resumed["finetune_serve"].needs == ("merge",)


def test_local_order_is_topological_and_single_box():
    order = [n.result_lane for n in topological(build_nodes(plan_order(), ["local"]))]
    assert order.index("sft") < order.index("merge") < order.index("finetune_serve")
    assert all("@" not in name for name in order)


def test_graph_validation_names_unknown_lanes_and_cycles():
    a = LaneSpec(name="a", module="m", boxes=("trn1",), order=1, summary="", needs=("b",))
    b = LaneSpec(name="b", module="m", boxes=("trn1",), order=2, summary="", needs=("a",))
    with pytest.raises(LaneGraphError, match="cycle: a -> b -> a"):
        validate({"a": a, "b": b})
    with pytest.raises(LaneGraphError, match="needs 'nope', which is not a lane"):
        validate({"a": LaneSpec(name="a", module="m", boxes=("trn1",), order=1, summary="", needs=("nope",))})


def test_extra_lanes_declare_needs_and_are_validated(monkeypatch):
    from pipeline.lanes import all_lanes

    monkeypatch.setenv("NEURONPIPE_EXTRA_LANES", "late=tests.fixtures.x:120:merge")
    assert all_lanes()["late"].needs == ("merge",)
    monkeypatch.setenv("NEURONPIPE_EXTRA_LANES", "late=tests.fixtures.x:120:nothing_like_it")
    with pytest.raises(LaneGraphError, match="nothing_like_it"):
        all_lanes()


def test_blocked_reasons_name_the_lane_the_attempt_and_the_gate():
    nodes = _by_name(build_nodes(plan_order(), ["trn1", "inf2"]))
    statuses = {
        "smoke@inf2": LaneStatus("succeeded", "a0"),
        "smoke@trn1": LaneStatus("succeeded", "a1"),
        "preflight@inf2": LaneStatus("succeeded", "a2"),
        "preflight@trn1": LaneStatus("succeeded", "a3"),
        "merge": LaneStatus("failed", "20261130T0101-ab", "RuntimeError: disk full"),
    }
    by, reason = blocked_reason(nodes["finetune_serve"], statuses)
    assert by == "merge"
    assert reason == "needs merge, which failed in attempt 20261130T0101-ab (RuntimeError: disk full)"
    by, reason = blocked_reason(
        nodes["sft"],
        {
            "preflight@trn1": LaneStatus("succeeded", "a8"),
            "smoke@trn1": LaneStatus("failed", "a9", "AssertionError: loss"),
        },
    )
    assert by == "smoke@trn1" and reason.startswith("gate smoke@trn1 did not pass: it failed in attempt a9")
    assert blocked_reason(nodes["serve_sweep"], statuses) is None


def _row(lane, status, attempt, supersedes=True, blocked_by=None, **kw):
    return {
        "lane": lane,
        "status": status,
        "attempt": attempt,
        "supersedes": supersedes,
        "blocked_by": blocked_by,
        **kw,
    }


def test_statuses_ignore_resume_records_but_follow_blocked_ones():
    rows = [
        _row("merge", "failed", "a1", error_type="OSError", error_message="no space"),
        _row("merge", "skipped", "a2", supersedes=False, skip_reason="already committed"),  # a resume record
        _row("finetune_serve", "succeeded", "a0"),
        _row("finetune_serve", "skipped", "a3", supersedes=False, blocked_by="merge", skip_reason="needs merge"),
    ]
    st = statuses_from_rows(rows)
    assert st["merge"] == LaneStatus("failed", "a1", "OSError: no space", None)
    assert st["finetune_serve"].status == "blocked" and st["finetune_serve"].blocked_by == "merge"
    # a later successful run of the consumer wins over its blocked record
    st = statuses_from_rows(rows + [_row("finetune_serve", "succeeded", "a4")])
    assert st["finetune_serve"].status == "succeeded"


def test_outcome_rules():
    nodes = build_nodes(plan_order(), ["trn1", "inf2"])
    ok = {n.result_lane: LaneStatus("succeeded", "a") for n in nodes}
    assert outcome(nodes, ok).status == "succeeded"
    # a failed non-gate lane: partial, the rest stays
    part = {**ok, "quality": LaneStatus("failed", "b", "ValueError: x")}
    res = outcome(nodes, part)
    assert (res.status, res.failed, res.skipped) == ("partial", ["quality"], [])
    # a lane that skipped itself (not applicable here) is not a failure
    assert (
        outcome(nodes, {**ok, "precompile": LaneStatus("skipped", "c", "needs a Neuron device")}).status == "succeeded"
    )
    # a failed gate fails the run
    gate = {
        **ok,
        "smoke@trn1": LaneStatus("failed", "d", "E: x"),
        "sft": LaneStatus("blocked", "e", "gate", "smoke@trn1"),
    }
    res = outcome(nodes, gate)
    assert res.status == "failed" and "gate smoke@trn1" in res.why and "sft" in res.skipped
    # a box that failed: its lanes did not run, the run failed
    res = outcome(nodes, {k: v for k, v in ok.items() if not k.endswith("trn1")}, {"trn1": "Harness.TimedOut"})
    assert res.status == "failed" and "box trn1 failed" in res.why
    # nothing succeeded
    assert outcome(nodes, {}).status == "failed"
    assert (exit_code("succeeded"), exit_code("partial"), exit_code("failed")) == (0, EXIT_PARTIAL, 1)


def test_outcome_of_run_reads_gates_from_the_registry():
    st = {"smoke": LaneStatus("failed", "a", "E: x"), "provenance": LaneStatus("succeeded", "b")}
    assert outcome_of_run(st).status == "failed"
    assert (
        outcome_of_run({"quality": LaneStatus("failed", "a"), "provenance": LaneStatus("succeeded", "b")}).status
        == "partial"
    )


def test_runner_records_a_blocked_lane_without_running_it(tmp_path):
    from agents.runner import LaneRequest, lane_statuses, run_lane
    from analytics.store import open_store

    store = open_store(tmp_path)
    w = store.begin_attempt("r1", "sft")
    w.add_rows(
        "lane_runs",
        [
            {
                "status": "failed",
                "supersedes": True,
                "started_at": _now(),
                "ended_at": _now(),
                "backend": "cpu",
                "host": "h",
                "error_type": "RuntimeError",
                "error_message": "boom",
            }
        ],
    )
    w.commit("failed")
    result = run_lane(LaneRequest("merge", "r1", needs=("sft",)), store)
    assert (result.status, result.blocked_by, result.exit_code) == ("skipped", "sft", 0)
    assert result.skip_reason == f"needs sft, which failed in attempt {w.attempt} (RuntimeError: boom)"
    st = lane_statuses(store, "r1")["merge"]
    assert st.status == "blocked" and st.reason == result.skip_reason
    assert store.latest_committed("r1", "merge") is None  # a resume runs merge once sft succeeds


def _now():
    from datetime import datetime, timezone

    return datetime.now(timezone.utc)


def test_node_json_round_trips_the_fields_the_plan_carries():
    n = Node("merge", "trn1", "merge", 60, ("smoke@trn1", "sft"), False, 0, ("smoke@trn1",))
    assert n.to_json()["needs"] == ["smoke@trn1", "sft"] and n.to_json()["gated_by"] == ["smoke@trn1"]
