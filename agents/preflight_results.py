"""What every preflight check returns and reads: a check's result (one ``preflight_checks`` row) and the gate's
inputs. Shared by the Neuron checks (:mod:`agents.preflight`) and the CUDA ones (:mod:`agents.preflight_gpu`),
which import it, not each other."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal

from agents.box_env import LaneEnvironment

Status = Literal["pass", "fail", "skip"]


@dataclass
class CheckResult:
    check: str
    status: Status
    observed: str | None = None
    expected: str | None = None
    reason: str | None = None
    duration_s: float = 0.0

    def row(self, box_role: str) -> dict[str, Any]:
        return {
            "box_role": box_role,
            "check": self.check,
            "status": self.status,
            "observed": self.observed,
            "expected": self.expected,
            "reason": self.reason,
            "duration_s": round(self.duration_s, 6),
            "ts": datetime.now(timezone.utc),
        }


def ok(check: str, observed: Any = None, expected: Any = None) -> CheckResult:
    return CheckResult(check, "pass", _s(observed), _s(expected))


def fail(check: str, reason: str, observed: Any = None, expected: Any = None) -> CheckResult:
    return CheckResult(check, "fail", _s(observed), _s(expected), reason)


def skip(check: str, why: str) -> CheckResult:
    return CheckResult(check, "skip", reason=why)


def pin_checks(
    installed: Mapping[str, str],
    pins: Mapping[str, str],
    *,
    missing: Callable[[str, str], str],
    mismatched: Callable[[str, str, str], str],
) -> list[CheckResult]:
    """One ``pins.<package>`` check per pin: pass where the installed version matches it, else fail with the
    backend's own reason — ``missing(package, pin)`` for one not installed, ``mismatched(package, installed, pin)``
    for another version."""
    from pipeline.box_stack import version_matches

    out = []
    for pkg, pin in sorted(pins.items()):
        have = installed.get(pkg)
        if have is None:
            out.append(fail(f"pins.{pkg}", missing(pkg, pin), expected=pin))
        elif not version_matches(have, pin):
            out.append(fail(f"pins.{pkg}", mismatched(pkg, have, pin), observed=have, expected=pin))
        else:
            out.append(ok(f"pins.{pkg}", have, pin))
    return out


def _s(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass
class PreflightInputs:
    """Everything the checks read; tests pass fakes for the CLI runner, the hub and the clock."""

    box_role: str
    backend: str
    lane_env: LaneEnvironment
    models: list[tuple[str, str, str | None, bool]]  # (name, hub repo, revision, gated) of hub models only
    dataset: str | None  # path or s3:// URI; None: the bundled set
    cache_free_gib: float
    max_clock_skew_s: float
    install_missing: bool = True
    timeout_s: float = 30.0
    token: Callable[[], tuple[str, str]] | None = None  # -> (token, where it came from); raises with the reason
    run: Callable[..., subprocess.CompletedProcess] = subprocess.run
    http_head: Callable[[str, dict[str, str], float], tuple[int, dict[str, str]]] | None = None
    s3_client: Any = None
    store_clock: Callable[[], datetime | None] | None = None  # the store's Date header, when it has one
    now: Callable[[], datetime] = field(default=lambda: datetime.now(timezone.utc))
    reference_dates: list[datetime] = field(default_factory=list)  # Date headers seen by the checks
