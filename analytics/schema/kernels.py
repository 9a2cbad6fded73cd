"""The nki lane's tables: ``kernel_checks`` (does a kernel match its reference, does it compile) and ``kernel_timings``
(how fast it runs on the device against its reference op).

``kernel_checks``: one row per kernel × shape set × stage — ``simulate`` (``nki.simulate`` on generated inputs against
the reference), ``compile`` (the first device call: neuronx-cc's compile and one execution), ``device`` (that call's
output against the reference). The errors of a stage are the tool's own words, verbatim, with their class
(``pipeline.kernel_errors``). A stage that did not run is a row with ``outcome`` ``not_run`` and its reason; a
stage's numbers are NULL unless it ran.

``kernel_timings``: one row per kernel × shape set × implementation (``kernel`` / ``reference``): every timed call's
latency, in call order. Percentiles, their intervals and the speed-up are the views' (45_report_kernels.sql).
"""

import pyarrow as pa

from analytics.schema._types import TS, f, table

KERNEL_STAGES = ("simulate", "compile", "device")
KERNEL_OUTCOMES = ("ok", "error", "not_run")

_KERNEL = (
    f("kernel", pa.string(), False, "the kernel's name (its spec file's stem)"),
    f("kernel_function", pa.string(), doc="the @nki.jit function of the kernel file the spec names"),
    f("kernel_file", pa.string(), doc="the kernel file, as the lane or the importer found it"),
    f("shape_index", pa.int32(), doc="the shape set's place in the spec, 0-based"),
    f("shape", pa.string(), doc="the shape set, one shape per input: 128x512,1x512"),
    f("dtypes", pa.string(), doc="the inputs' dtypes, comma-separated; NULL where the source does not say"),
)

KERNEL_CHECKS = table(
    *_KERNEL,
    f("stage", pa.string(), False, "simulate | compile | device"),
    f(
        "outcome",
        pa.string(),
        False,
        "ok (the stage ran to its end) | error (it raised) | not_run (see not_run_reason)",
    ),
    f("reference", pa.string(), doc="what the output was compared with: numpy:<function> | torch:<op>"),
    f("elements", pa.int64(), doc="output elements compared"),
    f("max_abs_err", pa.float64(), doc="max |got - want| over the output; NULL unless compared"),
    f("max_rel_err", pa.float64(), doc="max |got - want| / |want| over elements with want != 0; NULL: none such"),
    f(
        "outside_tolerance",
        pa.int64(),
        doc="elements with |got - want| > tol_max_abs + tol_max_rel * |want| (0: within tolerance)",
    ),
    f("tol_max_abs", pa.float64(), doc="the spec's max_abs tolerance"),
    f("tol_max_rel", pa.float64(), doc="the spec's max_rel tolerance; NULL where the source had none"),
    f("error_class", pa.string(), doc="the error's class (pipeline.kernel_errors.ERROR_CLASSES); NULL: no error"),
    f("error_code", pa.string(), doc="the compiler's code in the error (NCC_IBIR605); NULL where it names none"),
    f("error_type", pa.string(), doc="the exception's class name"),
    f("error", pa.string(), doc="the verbatim error (the compiler's own line where it gave one)"),
    f("not_run_reason", pa.string(), doc="why the stage did not run (outcome not_run)"),
    f("wall_s", pa.float64(), doc="wall seconds of the stage; NULL: not run or not recorded"),
    f("seed", pa.int64(), doc="the generated inputs' seed"),
    f("nki_version", pa.string(), doc="the NKI package's version"),
    f("backend", pa.string(), doc="neuron | cuda | cpu"),
    f("ts", TS, doc="when the stage ended"),
    doc="One row per kernel x shape set x stage (simulate, compile, device): outcome, errors and their class, wall.",
)

KERNEL_TIMINGS = table(
    *_KERNEL,
    f("implementation", pa.string(), False, "kernel | reference"),
    f("op", pa.string(), doc="what was timed: the kernel function, or torch:<op> for the reference"),
    f("warmup", pa.int32(), doc="untimed calls before the timed ones"),
    f("latencies_us", pa.list_(pa.float64()), doc="each timed call's latency in microseconds, in call order"),
    f(
        "timing_method",
        pa.string(),
        doc="what one latency spans (e.g. the call, the XLA step mark and the wait for the device)",
    ),
    f("not_run_reason", pa.string(), doc="why nothing was timed (latencies_us NULL)"),
    f("device", pa.string(), doc="the device the calls ran on"),
    f("backend", pa.string(), doc="neuron | cuda | cpu"),
    f("ts", TS, doc="when the timed calls ended"),
    doc="One row per kernel x shape set x implementation (kernel, its torch reference): every timed call's latency.",
)

KERNEL_TABLES = {
    "kernel_checks": KERNEL_CHECKS,
    "kernel_timings": KERNEL_TIMINGS,
}
