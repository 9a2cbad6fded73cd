"""Tables every lane touches: lane_runs, telemetry, provenance, host_bench."""

import pyarrow as pa

from analytics.schema._types import TS, f, table

LANE_STATUSES = ("succeeded", "failed", "skipped")

LANE_RUNS = table(
    f("status", pa.string(), False, "succeeded | failed | skipped"),
    f(
        "skip_reason",
        pa.string(),
        doc="why a skipped attempt did not run (already committed; not applicable on this backend; a need did not "
        "succeed)",
    ),
    f(
        "blocked_by",
        pa.string(),
        doc="the lane (or gate, or box:<role>) whose failure kept this lane from running; NULL when it ran or skipped "
        "itself",
    ),
    f(
        "supersedes",
        pa.bool_(),
        False,
        "true when this attempt's rows replace earlier attempts (false for resume skips)",
    ),
    f("started_at", TS, False),
    f("ended_at", TS, False),
    f("wall_s", pa.float64()),
    f("error_type", pa.string(), doc="exception class of a failed attempt"),
    f("error_message", pa.string(), doc="verbatim message of a failed attempt"),
    f("traceback", pa.string()),
    f("backend", pa.string(), False, "neuron | cuda | cpu"),
    f("host", pa.string(), False),
    f("box_role", pa.string(), doc="trn1 | inf2 | local"),
    f("instance_type", pa.string()),
    f("instance_id", pa.string()),
    f(
        "priced_as",
        pa.string(),
        doc="local runs only: the on-demand instance type that prices this host in the Decision table (run --local "
        "--price-as; declared, not detected); NULL otherwise",
    ),
    f("profile", pa.string(), doc="tiny | full"),
    f("forced", pa.bool_()),
    f("config_json", pa.string(), doc="the lane's resolved config"),
    f("harness_sha", pa.string()),
    f("telemetry_samples", pa.int64()),
    f("log_uri", pa.string()),
    doc="One row per attempt of a lane.",
)

TELEMETRY = table(
    f("ts", TS, False, "wall-clock time of the sample"),
    f(
        "t_mono_ns",
        pa.int64(),
        doc="time.perf_counter_ns() of the sample (same clock as the load generator on one box)",
    ),
    f("source", pa.string(), False, "host | neuron_monitor | nvidia_smi | prometheus"),
    f(
        "metric",
        pa.string(),
        False,
        "e.g. host_cpu_util_pct, host_mem_used_mib, accel_util_pct, device_mem_used_mib, power_w",
    ),
    f("device", pa.string(), doc="device or core the value belongs to, null for host-wide"),
    f("value", pa.float64(), doc="NULL when the sensor is absent on this platform (never zero)"),
    f("unit", pa.string()),
    f("note", pa.string(), doc="why a value is NULL"),
    doc="Long-format samples taken while a lane ran.",
)

PROVENANCE = table(
    f(
        "category",
        pa.string(),
        False,
        "python | os | cpu | memory | package | driver | device | instance | harness | artifact",
    ),
    f("name", pa.string(), False),
    f("value", pa.string(), doc="NULL when absent; note says why"),
    f("source", pa.string(), doc="the command or API the value came from"),
    f("note", pa.string()),
    doc="Key/value facts about the machine and stack a run used.",
)

HOST_BENCH = table(
    f("bench", pa.string(), False, "triad | matmul | tokenizer"),
    f("threads", pa.int32()),
    f("size", pa.int64(), doc="problem size (elements, matrix side, characters)"),
    f("value", pa.float64(), doc="best of the repeats"),
    f("unit", pa.string(), False, "GB/s | GFLOP/s | tokens/s"),
    f("median", pa.float64()),
    f("repeats", pa.int32()),
    f("note", pa.string()),
    doc="Host CPU context: memory bandwidth, matmul scaling, tokenizer throughput.",
)

CORE_TABLES = {
    "lane_runs": LANE_RUNS,
    "telemetry": TELEMETRY,
    "provenance": PROVENANCE,
    "host_bench": HOST_BENCH,
}
