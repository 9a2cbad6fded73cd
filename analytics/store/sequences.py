"""Sequence claims (``v1/_seq/run_id=<id>/lane=<lane>/<n, 8 digits>``) as ``verify`` checks them.

Each attempt that begins without an explicit id claims the next number of its (run, lane) with a create-only
key whose body names the claim's time and the stamp of the attempt id (``s<n>-<stamp>``,
:func:`analytics.store.markers.sequenced_attempt_id`). A claim is *explained* by a marker of that attempt or
by files of it (an attempt still open, or killed before its commit: ``verify`` lists those as orphaned). What
``verify`` reports:

* ``stray``     a file under ``v1/_seq/`` that is not a claim's key (a problem);
* ``malformed`` a claim whose body is not the JSON a claim holds, or whose number a committed attempt with
                another id holds (a problem);
* ``unused``    a well-formed claim nothing explains: a writer that stopped before its first file, or one just
                starting (information: claims are bookkeeping and never removed, so a number is never reused).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from analytics.store.markers import SEQUENCES, sequenced_attempt_id

PREFIX = f"v1/{SEQUENCES}/"
_KEY = re.compile(r"^v1/_seq/run_id=([^/=\s]+)/lane=([^/=\s]+)/(\d{8})$")
_STAMP = re.compile(r"^\d{8}T\d{12}Z-[0-9a-f]+$")


@dataclass(frozen=True)
class ClaimFinding:
    kind: str  # stray | malformed | unused
    key: str
    reason: str
    attempt: tuple[str, str, str] | None = None


def parse_claim(key: str, body: bytes) -> tuple[tuple[str, str, str] | None, ClaimFinding | None]:
    """(run, lane, attempt id) the claim at ``key`` names, or the finding that says why it names none."""
    m = _KEY.match(key)
    if not m or m.group(1).startswith(".") or m.group(2).startswith("."):
        return None, ClaimFinding("stray", key, "not a sequence claim (v1/_seq/run_id=<id>/lane=<lane>/<8 digits>)")
    run, lane, n = m.group(1), m.group(2), int(m.group(3))
    try:
        raw = json.loads(body)
    except (UnicodeDecodeError, ValueError):
        return None, ClaimFinding("malformed", key, f"claim body is not JSON ({len(body)} bytes)")
    stamp = raw.get("stamp") if isinstance(raw, dict) else None
    claimed = raw.get("claimed_at") if isinstance(raw, dict) else None
    if not isinstance(stamp, str) or not _STAMP.match(stamp):
        return None, ClaimFinding("malformed", key, "claim has no attempt stamp (<UTC time>-<hex>)")
    try:
        datetime.fromisoformat(str(claimed))
    except ValueError:
        return None, ClaimFinding("malformed", key, "claim has no ISO 'claimed_at' time")
    return (run, lane, sequenced_attempt_id(n, stamp)), None


def check_claims(
    store: Any, keys: Iterable[str], committed: dict[tuple[str, str, int], str], attempts_seen: set[str]
) -> list[ClaimFinding]:
    """Findings for every key under ``v1/_seq/``.

    ``committed``: (run, lane, sequence) -> attempt id of each readable marker with a sequence;
    ``attempts_seen``: the attempt id of every marker (readable or not) and of every file of an attempt.
    """
    out = []
    for key in keys:
        owner, finding = parse_claim(key, store.get_bytes(key))
        if finding is not None:
            out.append(finding)
            continue
        assert owner is not None
        run, lane, attempt = owner
        n = int(key.rsplit("/", 1)[1])
        holder = committed.get((run, lane, n))
        if holder is not None and holder != attempt:
            out.append(
                ClaimFinding(
                    "malformed",
                    key,
                    f"claims sequence {n} for attempt {attempt}, but the "
                    f"committed attempt with sequence {n} is {holder}",
                    owner,
                )
            )
        elif holder is None and attempt not in attempts_seen:
            out.append(
                ClaimFinding(
                    "unused",
                    key,
                    f"attempt {attempt} claimed sequence {n} and wrote nothing "
                    "(stopped before its first file, or just starting)",
                    owner,
                )
            )
    return out
