"""A run judged against its history: the verdict rows of its baseline comparison (docs/reference/history.md)."""

import pyarrow as pa

from analytics.schema._types import TS, f, table

BASELINE_LANE = "baseline"  # the lane a judgement commits under (no lane of the catalogue has it)
# the one attempt id a run's judgement commits as: the store writes create-only, so a run is judged once
JUDGEMENT_ATTEMPT = "00000000-judged"

BASELINE_VERDICTS = table(
    f("request_fingerprint", pa.string(), False, "control_plane.fingerprint: the request without run-specific fields"),
    f("instance_type", pa.string(), doc="the instance type the run's serving lanes ran on; NULL: local, undeclared"),
    f("baseline_spec", pa.string(), False, "what named the baseline: a run id, last:N, or schedule:<name>"),
    f("baseline_runs", pa.string(), False, "the baseline's runs, comma-separated, oldest first"),
    f("metric", pa.string(), False, "compare's headline key: lane · point · family"),
    f("point", pa.string(), False, "the measurement point the metric belongs to (one finding per point)"),
    f("family", pa.string(), False, "the headline's metric family, e.g. p99_ttft_ms"),
    f("better", pa.string(), False, "higher | lower"),
    f("baseline_value", pa.float64(), doc="the baseline's value (geometric mean of its units)"),
    f("value", pa.float64(), doc="this run's value"),
    f("pct", pa.float64(), doc="100 · (value / baseline_value − 1)"),
    f("ci_low_pct", pa.float64(), doc="the 95 % interval of pct (run level, where the units allow it)"),
    f("ci_high_pct", pa.float64()),
    f("unit", pa.string(), doc="run | repeat; NULL: one value per side (judged against the measured floor)"),
    f("floor_pct", pa.float64(), doc="compare's per-row noise floor (the history's own A/A spread)"),
    f("familywise_floor_pct", pa.float64(), doc="the floor widened for the number of findings tested"),
    f("verdict", pa.string(), False, "compare's run-level verdict: faster | slower | within noise | untested"),
    f("finding", pa.string(), False, "faster | slower | within noise | untested: the family-wise rule's answer"),
    f(
        "point_finding",
        pa.string(),
        False,
        "the point's finding: slower / faster (a row of it beyond the family-wise floor, in the run's direction), "
        "local slower / local faster (not in the run's direction: reported, not announced), within noise, untested",
    ),
    f("outcome", pa.string(), False, "the run's (its run-level shift's): regressed | improved | unchanged | untested"),
    f("findings_tested", pa.int32(), False, "points with a tested row: the m the family-wise floor is widened for"),
    f("run_shift_pct", pa.float64(), doc="the run-level shift: median over points of their mean change (slower > 0)"),
    f("run_shift_ci_low_pct", pa.float64(), doc="its 95 % interval (NULL: fewer than 2 baseline runs)"),
    f("run_shift_ci_high_pct", pa.float64()),
    f("run_floor_pct", pa.float64(), doc="the shift's floor: the A/A spread of the same statistic over the baseline"),
    f("run_finding", pa.string(), doc="faster | slower | within noise | untested: the run-level shift's verdict"),
    f("note", pa.string()),
    f("judged_at", TS, False, "when the control plane judged the run (at finalize)"),
    doc="One row per headline a run shares with its baseline: compare's verdict and the family-wise finding.",
)

HISTORY_TABLES = {"baseline_verdicts": BASELINE_VERDICTS}
