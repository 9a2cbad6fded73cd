"""What went wrong with a kernel, in one word: the class of a simulator, compiler or device error.

The classes come from the predecessor's NKI receipts (its trn1 ``extras/nki_*`` results and the five API-drift lessons
its Phase-2 report drew from them), each matched on what the error itself carries — its exception type, the
compiler's own tags (``[INTERNAL_ERROR]``, an ``NCC_*`` code) or the exact phrase the receipt recorded:

========================== ===========================================================================================
class                      what it is (the receipt it was drawn from)
========================== ===========================================================================================
``timeout``                the stage ran past its time (a ``TimeoutError`` / ``TimeoutExpired``)
``name_resolution``        the device compiler could not resolve a name the kernel uses: ``nl.*`` imported inside a
                           function instead of at module level (``failed to resolve name 'nl.load'``)
``api_convention``         the package's calling convention is not the one used: ``simulate(kernel)(x)`` is a
                           wrapper factory in nki 0.5 (``simulate() takes 1 positional argument but 3 were given``)
``api_unsupported``        an operation the API does not offer: Python operators on an NKI tensor (``unsupported
                           operand type(s) for -``), an ``nl.*`` op the device compiler rejects (``unsupported
                           operator 'divide'``)
``out_of_memory``          the compiler ran out of on-chip or device memory (``NCC_EOOM*``)
``shape_unsupported``      a shape the hardware or the API cannot take (partition dimension over 128, a tile too large)
``compiler_internal_error`` neuronx-cc failed with its ``[INTERNAL_ERROR]`` tag or an internal ``NCC_I*`` code (the
                           device compile of the row softmax: ``[NCC_IBIR605] Bias parameter for InstActivation ...``)
``other``                  none of the above: the verbatim error is the record
========================== ===========================================================================================
"""

from __future__ import annotations

import re

ERROR_CLASSES = (
    "timeout",
    "name_resolution",
    "api_convention",
    "api_unsupported",
    "out_of_memory",
    "shape_unsupported",
    "compiler_internal_error",
    "other",
)
TIMEOUT_TYPES = frozenset({"TimeoutError", "TimeoutExpired", "subprocess.TimeoutExpired"})
NCC_CODE = re.compile(r"\bNCC_[A-Z]+\d+\b")
# (class, pattern), first match wins; each phrase is one a receipt recorded or the compiler's own tag
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("timeout", re.compile(r"\btimed out\b|\bTimeoutExpired\b", re.I)),
    ("name_resolution", re.compile(r"failed to resolve name", re.I)),
    ("api_convention", re.compile(r"takes \d+ positional arguments? but \d+ (were|was) given")),
    ("api_unsupported", re.compile(r"unsupported operand type\(s\)|unsupported operator\b", re.I)),
    ("out_of_memory", re.compile(r"\bNCC_EOOM\d+\b|\bout of memory\b", re.I)),
    (
        "shape_unsupported",
        re.compile(r"partition dimension|exceeds? (the )?(maximum )?partition|tile size|unsupported shape", re.I),
    ),
    ("compiler_internal_error", re.compile(r"\[INTERNAL_ERROR\]|\bNCC_I[A-Z]*\d+\b")),
)


def classify(error: str | None, error_type: str | None = None) -> str | None:
    """The class of an error (None: no error). ``error_type``: the exception's class name, where there was one."""
    if not error and not error_type:
        return None
    if error_type in TIMEOUT_TYPES:
        return "timeout"
    text = error or ""
    return next((cls for cls, pattern in _PATTERNS if pattern.search(text)), "other")


def error_code(error: str | None) -> str | None:
    """The compiler's code in an error (``NCC_IBIR605``), the first one; None where it names none."""
    m = NCC_CODE.search(error or "")
    return m.group(0) if m else None


def compiler_line(text: str) -> str | None:
    """The compiler's own line in a log or a long error: the first line carrying an ``NCC_*`` code, as written."""
    return next((line.strip() for line in text.splitlines() if NCC_CODE.search(line)), None)
