"""torchneuronx ``REPORT-EXTENSIONS.md`` §13.9 (predicted vs observed) → the imported run's registered predictions.

The predecessor wrote a verdict for each Phase-2 item before spending compute and scored it after, in one table
(item | predicted | observed), closed by a count ("12 of 15 verdicts held"). Each row becomes a ``predictions`` row
of the run, committed once like a run's own registration (``analytics.schema.predictions``):

* ``target`` / ``target_lane``: the source's item, as written (its items are the predecessor's experiments, not our
  lanes);
* ``expected``: ``works`` for a GO verdict, ``excluded`` for an attempt-only one (the source's word in ``note``);
* ``recorded_verdict``: the source's own verdict, from the observed column's mark — ✅ held, ⏸ held (a declared
  not-attempted, as predicted for an attempt-only item), ❌ and ⚠ missed — checked against the source's own count
  (a table whose marks do not add up to the count it states is refused); ``recorded_observed``: that column verbatim.

None is rescored from the imported rows: the items' outcomes were judged on the predecessor's terms (a "parity A/B",
"bracketed both cliffs"), which no lane of ours recorded as one verdict; the view keeps the recorded verdict for
``source = 'imported'``. ``registered_at``: the source commit's time (the table's own time is not recorded).
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime, timezone
from typing import Any

from analytics.importers.common import ImportInputError, parse_time
from analytics.importers.source import Tree

PATH = "REPORT-EXTENSIONS.md"
SECTION_RE = re.compile(r"^(#{2,6})\s*13\.9\b.*$", re.M)
COUNT_RE = re.compile(r"(\d+)\s+of\s+(\d+)\s+verdicts\s+held")
MARKS = {"✅": "held", "⏸": "held", "❌": "missed", "⚠": "missed"}


def _section(text: str) -> str | None:
    m = SECTION_RE.search(text)
    if m is None:
        return None
    level = len(m.group(1))
    end = re.compile(rf"^#{{1,{level}}}\s", re.M).search(text, m.end())
    return text[m.end() : end.start() if end else len(text)]


def _expected(predicted: str) -> str:
    return "works" if predicted.strip().upper().startswith("GO") else "excluded"


def _verdict(observed: str, where: str) -> str:
    mark = next((v for k, v in MARKS.items() if observed.strip().startswith(k)), None)
    if mark is None:
        raise ImportInputError(f"{where}: observed {observed!r} starts with none of {', '.join(MARKS)}")
    return mark


def predictions(tree: Tree) -> list[dict[str, Any]] | None:
    """The §13.9 table's rows as ``predictions`` rows (None: the source has no such section)."""
    if not tree.exists(PATH):
        return None
    section = _section(tree.text(PATH))
    if section is None:
        return None
    table = [line for line in section.splitlines() if line.strip().startswith("|")]
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in table]
    if len(cells) < 3 or [c.lower() for c in cells[0]] != ["item", "predicted", "observed"]:
        raise ImportInputError(f"{PATH} §13.9: no table with the columns item | predicted | observed")
    items = [c for c in cells[2:] if len(c) == 3]
    count = COUNT_RE.search(section)
    if count is None:
        raise ImportInputError(f"{PATH} §13.9: no 'N of M verdicts held' line to check the table against")
    verdicts = [_verdict(obs, f"{PATH} §13.9 {item}") for item, _, obs in items]
    held, total = int(count.group(1)), int(count.group(2))
    if (verdicts.count("held"), len(items)) != (held, total):
        raise ImportInputError(
            f"{PATH} §13.9: the table's marks give {verdicts.count('held')} of {len(items)} held, "
            f"the section says {held} of {total}"
        )
    digest = "sha256:" + hashlib.sha256(json.dumps(items, ensure_ascii=False).encode()).hexdigest()
    at = parse_time(tree.committed_at) or datetime.now(timezone.utc)
    return [
        {
            "prediction": i,
            "target": item,
            "target_lane": item,
            "expected": _expected(predicted),
            "note": f"predicted: {predicted}",
            "registered_at": at,
            "digest": digest,
            "source": "imported",
            "recorded_verdict": verdict,
            "recorded_observed": observed,
        }
        for i, ((item, predicted, observed), verdict) in enumerate(zip(items, verdicts, strict=True))
    ]


def commit(store: Any, run_id: str, rows: list[dict[str, Any]] | None) -> int:
    """Commit the rows as the run's registration (once: a run that has them with the same digest keeps them, as a
    forced re-import does); the number of predictions the run holds."""
    from analytics.registered_predictions import commit_registration, registered_rows

    if not rows:
        return 0
    there = registered_rows(store, run_id)
    if there:
        if there[0]["digest"] != rows[0]["digest"]:
            raise ImportInputError(
                f"{PATH} §13.9: run {run_id} registered other predictions ({there[0]['digest']}); they cannot change"
            )
        return len(there)
    commit_registration(store, run_id, rows)
    return len(rows)
