"""A kernel error's class, on the predecessor's recorded NKI errors: the device compile's receipt (its log, in the
fixtures) and the four API-drift errors its Phase-2 report (§13.8) and its kernel script quote verbatim."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.kernel_errors import ERROR_CLASSES, classify, compiler_line, error_code

RECEIPTS = Path(__file__).resolve().parents[1] / "fixtures" / "torchneuronx" / "trn1" / "results" / "extras"


def test_the_recorded_device_compile_failure_is_a_compiler_internal_error_with_its_code():
    log = (RECEIPTS / "nki_device.log").read_text()
    line = compiler_line(log)
    assert line is not None and line.startswith("(Activation: I-3_inst__I-3-0)") and "[NCC_IBIR605]" in line
    assert line.endswith("or recompile for trn2+")
    assert (classify(line), error_code(line)) == ("compiler_internal_error", "NCC_IBIR605")


# the errors the predecessor quoted on its way to a simulated kernel (REPORT-EXTENSIONS §13.8, lessons 1-4)
DRIFT = [
    ("simulate() takes 1 positional argument but 3 were given", "TypeError", "api_convention"),
    ("unsupported operand type(s) for -: 'NkiTensor' and 'NkiTensor'", "TypeError", "api_unsupported"),
    ("unsupported operator 'divide'", "RuntimeError", "api_unsupported"),
    ("failed to resolve name 'nl.load'", "RuntimeError", "name_resolution"),
]


@pytest.mark.parametrize(("error", "error_type", "expected"), DRIFT)
def test_the_api_drift_errors_get_their_class(error, error_type, expected):
    assert classify(error, error_type) == expected
    assert error_code(error) is None


def test_timeouts_memory_shapes_and_the_rest():
    assert classify("compile took too long", "TimeoutExpired") == "timeout"
    assert classify("[NCC_EOOM002] Out of memory in SBUF") == "out_of_memory"
    assert classify("partition dimension 256 exceeds 128") == "shape_unsupported"
    assert classify("something new", "ValueError") == "other"
    assert classify(None) is None and classify("") is None
    assert set(ERROR_CLASSES) >= {classify(e, t) for e, t, _ in DRIFT}
