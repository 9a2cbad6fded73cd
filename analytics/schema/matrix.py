"""An adaptive run matrix's stops and repeats (``matrix.adaptive``; control_plane.adaptive_waves,
docs/explanation/decision-noise.md)."""

import pyarrow as pa

from analytics.schema._types import f, table

# the lane a wave's stops commit under: matrix_stops@w<wave>, one attempt per wave (the scheduler commits it once;
# a retried call finds it committed and reads it back). No lane of the catalogue has the name.
MATRIX_STOPS_LANE = "matrix_stops"

MATRIX_STOPS = table(
    f("wave", pa.int32(), False, "the wave after which the cell stopped (the plan's waves first, then the repeats)"),
    f("cell", pa.string(), False, "the matrix cell (c01, ...)"),
    f("instance_type", pa.string(), doc="the cell's instance type"),
    f("decision_group", pa.string(), doc="the Decision group it was judged in; NULL: the cell has no Decision row"),
    f("kind", pa.string(), False, "no $/M at the SLO | decided | dominated | max repeats | budget | box failed"),
    f("reason", pa.string(), False, "why, in words (the pair that bounds it, the leader and its P, the budget)"),
    f("p_bound", pa.float64(), doc="the probability the stop was decided on (its kind says which); NULL: none"),
    f(
        "run_sd_source",
        pa.string(),
        doc="where P's run-level spread came from (78's run_sd_source): repeats (the group's own), aa_history (the "
        "family's in the store's earlier runs) or prior; NULL: the stop read no P",
    ),
    f("runs", pa.int32(), False, "the cell's runs when it stopped (its first included)"),
    f("box_hours_spent", pa.float64(), False, "box-hours the matrix's cells had spent when the wave was decided"),
    doc="One row per cell an adaptive matrix stopped, per Decision group it was judged in, with its reason.",
)

MATRIX_REPEATS = table(
    f("wave", pa.int32(), False, "the wave the repeat runs in"),
    f("cell", pa.string(), False, "the matrix cell (c01, ...)"),
    f("instance_type", pa.string(), doc="the cell's instance type"),
    f(
        "run",
        pa.int32(),
        False,
        "which run of the cell it is (2 for its first repeat); its lanes commit as <lane>@<cell>r<run>",
    ),
    f("p_bound", pa.float64(), doc="the cell's highest P(cheapest within the margin) bound over its groups"),
    f(
        "box_hours_per_run",
        pa.float64(),
        False,
        "box-hours the run is estimated at: a repeat the cell's last whole run's lanes' wall time, a capacity run "
        "its last capacity lane's",
    ),
    f("use", pa.string(), doc="repeat (every lane of the cell again) | capacity (its capacity lane alone, bisecting)"),
    f("use_reason", pa.string(), doc="why that use (control_plane.adaptive.choose_use), in words"),
    f("rate_min", pa.float64(), doc="capacity: the bracket's low end, the highest rate that met the SLO (req/s)"),
    f("rate_max", pa.float64(), doc="capacity: the bracket's high end, the lowest rate that missed it (req/s)"),
    doc="One row per cell an adaptive matrix runs again, per wave: another box of its type, its lanes again or its "
    "capacity lane alone.",
)

MATRIX_TABLES = {"matrix_stops": MATRIX_STOPS, "matrix_repeats": MATRIX_REPEATS}
