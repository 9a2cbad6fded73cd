"""What changed between two runs, from their provenance rows: the attribution of a change in a number.

Provenance records every version a run used (rule 2). Between the runs on either side of a change, the facts that
can move a benchmark are compared one by one (:data:`WATCHED`): the AMI, the Neuron driver, the compiler, vLLM
and the other accelerator packages, the model's revision, and the request itself (its fingerprint). A fact that
one run recorded and the other did not is a change too (``None`` on the side without it); a fact neither recorded
is not compared. What is listed is what differs, not a cause: a number can move with nothing here changed (a
neighbour, the host), and the announcement says so when the list is empty.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# (label, category, name): the facts whose change is attributed. A name ending in "*" matches by prefix.
WATCHED: tuple[tuple[str, str, str], ...] = (
    ("AMI", "instance", "ami-id"),
    ("instance type", "instance", "instance-type"),
    ("driver", "driver", "*"),
    ("neuronx-cc", "neuron", "neuronx-cc"),
    ("neuronx-cc", "package", "neuronx-cc"),
    ("vLLM", "package", "vllm"),
    ("torch-neuronx", "package", "torch-neuronx"),
    ("torch", "package", "torch"),
    ("transformers", "package", "transformers"),
    ("model revision", "model", "*revision*"),
    ("model revision", "artifact", "*revision*"),
    ("request", "request", "fingerprint"),
    ("harness", "harness", "sha"),
)


@dataclass(frozen=True)
class Change:
    label: str
    category: str
    name: str
    before: str | None
    after: str | None

    def text(self) -> str:
        return (
            f"{self.label} ({self.category}/{self.name}): {self.before or 'not recorded'} → "
            f"{self.after or 'not recorded'}"
        )


def _label(category: str, name: str) -> str | None:
    for label, cat, pattern in WATCHED:
        if cat != category:
            continue
        if pattern == "*" or pattern == name:
            return label
        if pattern.startswith("*") and pattern.endswith("*") and pattern.strip("*") in name:
            return label
    return None


def facts(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], str | None]:
    """{(category, name): value} of one run's provenance rows (the last row wins; values as text)."""
    out: dict[tuple[str, str], str | None] = {}
    for r in rows:
        v = r.get("value")
        out[(str(r.get("category")), str(r.get("name")))] = None if v is None else str(v)
    return out


def changes(before: Iterable[Mapping[str, Any]], after: Iterable[Mapping[str, Any]]) -> list[Change]:
    """The watched facts that differ between two runs' provenance rows, ordered by label then name."""
    a, b = facts(before), facts(after)
    out = []
    for key in sorted(set(a) | set(b)):
        label = _label(*key)
        if label is None:
            continue
        va, vb = a.get(key), b.get(key)
        if va != vb:
            out.append(Change(label, key[0], key[1], va, vb))
    return sorted(out, key=lambda c: (c.label, c.category, c.name))


def summary(chs: Iterable[Change]) -> str:
    """One line: what changed, or that provenance shows no change."""
    chs = list(chs)
    if not chs:
        return (
            "provenance shows no change in the watched facts (AMI, driver, neuronx-cc, vLLM, model revision, request)"
        )
    return "; ".join(c.text() for c in chs)
