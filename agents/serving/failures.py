"""Boot failures of a model server, classified from its log with the verbatim line kept.

A server that dies or never answers its health check leaves a log; the class
(``oom``, ``compile_error``, ``unsupported_architecture``, ...) is read from the
first line that matches one of the known signatures, and that line is kept
verbatim so the failure record says exactly what the server said.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path


class BootFailureKind(str, Enum):
    OOM = "oom"
    COMPILE_ERROR = "compile_error"
    UNSUPPORTED_ARCHITECTURE = "unsupported_architecture"
    PORT_IN_USE = "port_in_use"
    MISSING_PACKAGE = "missing_package"
    DEVICE_UNAVAILABLE = "device_unavailable"
    TIMEOUT = "timeout"
    EXITED = "exited"


# Order matters: the most specific signature wins when several lines match.
_SIGNATURES: tuple[tuple[BootFailureKind, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern, re.IGNORECASE))
    for kind, pattern in [
        (
            BootFailureKind.UNSUPPORTED_ARCHITECTURE,
            r"(model architectures? \[?'?\w+'?\]? (is|are) not supported|not supported for now|"
            r"unsupported (model )?architecture|does not support .*architecture|"
            r"unrecognized configuration class|model type .* not supported|UnsupportedArchitectureError)",
        ),
        (
            BootFailureKind.OOM,
            r"(out of memory|OutOfMemoryError|CUDA error: out of memory|Failed to allocate|"
            r"NRT_RESOURCE|insufficient (device )?memory|No available memory for the cache blocks|"
            r"MemoryError|Killed process|Cannot allocate memory)",
        ),
        (
            BootFailureKind.COMPILE_ERROR,
            r"(neuronx-cc .*(failed|error)|Compilation (failed|error)|CompilerError|NCC_\w+|"
            r"Failed compilation|torch\._dynamo\.exc|InductorError|compile.*returned non-zero)",
        ),
        (
            BootFailureKind.DEVICE_UNAVAILABLE,
            r"(NRT (init|initialization) failed|nrt_init|no neuron device|Neuron device not found|"
            r"No CUDA GPUs are available|CUDA driver initialization failed|Failed to infer device type)",
        ),
        (BootFailureKind.PORT_IN_USE, r"(address already in use|Errno 98)"),
        (BootFailureKind.MISSING_PACKAGE, r"(ModuleNotFoundError|No module named|ImportError)"),
    ]
)

# Lines that carry an error without a known signature, used as the verbatim line for EXITED/TIMEOUT.
_ERRORISH = re.compile(r"(Error|Exception|error:|FATAL|Traceback)", re.IGNORECASE)


@dataclass(frozen=True)
class BootFailure:
    kind: BootFailureKind
    line: str  # verbatim log line (stripped), or a sentence saying what was observed when the log is silent

    def message(self) -> str:
        return f"{self.kind.value}: {self.line}"


def classify_log(
    lines: list[str], exited: bool, returncode: int | None = None, timeout_s: float | None = None
) -> BootFailure:
    """Classify a failed boot from the server log's lines.

    ``exited`` tells whether the process died (else the health check timed out).
    A known signature anywhere in the log decides the class; otherwise the class
    is ``exited`` or ``timeout`` with the last error-looking line verbatim.
    """
    stripped = [ln.rstrip("\n").strip() for ln in lines if ln.strip()]
    for kind, pattern in _SIGNATURES:
        for line in stripped:
            if pattern.search(line):
                return BootFailure(kind, line)
    errorish = [ln for ln in stripped if _ERRORISH.search(ln)]
    if exited:
        line = (
            errorish[-1]
            if errorish
            else (stripped[-1] if stripped else f"server exited with code {returncode} and an empty log")
        )
        return BootFailure(BootFailureKind.EXITED, line)
    line = (
        errorish[-1]
        if errorish
        else (
            f"server did not answer its health check within {timeout_s:g} s"
            if timeout_s is not None
            else "server did not answer its health check"
        )
    )
    return BootFailure(BootFailureKind.TIMEOUT, line)


def tail_lines(path: Path, max_bytes: int = 256 * 1024, start: int = 0) -> list[str]:
    """The last ``max_bytes`` of a log after byte ``start``, as lines (a boot log can be large on Neuron)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(start, size - max_bytes))
            return fh.read().decode("utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return []
