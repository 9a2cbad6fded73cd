"""A run's outcome read from what the store holds, for readers that have no plan (the report, ``status``).

The graph rules (:mod:`pipeline.graph`) take nodes; here the nodes come from the lane catalogue
(:mod:`pipeline.lanes`: gates and order), so the graph module never needs the catalogue.
"""

from __future__ import annotations

from collections.abc import Mapping

from pipeline.graph import LOCAL, LaneStatus, Node, RunOutcome, outcome
from pipeline.lanes import all_lanes


def nodes_from_statuses(statuses: Mapping[str, LaneStatus]) -> list[Node]:
    """The nodes a run's store shows (every lane with an attempt), for readers that have no plan (the report,
    ``status``): gates from the registry, waves not needed."""
    specs = all_lanes()
    out = []
    for name in sorted(statuses):
        base, _, box = name.partition("@")
        spec = specs.get(base)
        out.append(Node(base, box or LOCAL, name, spec.order if spec else 10_000, gate=bool(spec and spec.gate)))
    return out


def outcome_of_run(statuses: Mapping[str, LaneStatus]) -> RunOutcome:
    """The outcome over what the store holds for a run (the report's and ``status``'s view)."""
    return outcome(nodes_from_statuses(statuses), statuses)
