"""Per-box tables: ``box_boots`` (cold start as a result) and ``preflight_checks`` (the preflight gate).

``box_boots`` is written on the box by ``agents cache push`` at the end of a run segment: one row per boot of a
box, the boot's timeline (from the Step Functions start request to the compile cache seeded) and what the
shared S3 compile cache moved each way. The ``cold_start`` view (``analytics/views/sql/39_report_cold_start.sql``)
joins it with ``compiles`` and ``requests`` to reach the first token. Every timestamp is UTC; a moment the
platform cannot observe (locally there is no instance start) is NULL, never a made-up time.

``preflight_checks`` is written by the ``preflight`` gate lane, first on each box: one row per check, with what
was observed, what was expected and, on a failure, the verbatim actionable line.
"""

import pyarrow as pa

from analytics.schema._types import TS, f, table

BOX_BOOTS = table(
    f("box_role", pa.string(), doc="trn1 | inf2 | local"),
    f("segment", pa.int32(), doc="the run segment (wave) this boot served, 0-based"),
    f("instance_id", pa.string(), doc="EC2 instance id; NULL locally"),
    f("instance_type", pa.string(), doc="e.g. inf2.xlarge; NULL locally"),
    f("boot_id", pa.string(), doc="the kernel's boot id (/proc/sys/kernel/random/boot_id): one per boot of the box"),
    f("backend", pa.string(), doc="neuron | cuda | cpu"),
    f(
        "start_requested_at",
        TS,
        doc="when Step Functions asked EC2 to start the box; NULL locally (no instance "
        "start) or when the state machine did not pass it",
    ),
    f("kernel_boot_at", TS, doc="the box's kernel boot time (btime in /proc/stat)"),
    f("boot_done_at", TS, doc="when the per-boot setup (OS, volumes, agent install) finished"),
    f("sync_started_at", TS, doc="when the first SSM command ran on the box: the agent had registered"),
    f("harness_synced_at", TS, doc="when the harness code was synced onto the box"),
    f("cache_seeded_at", TS, doc="when the compile cache was seeded from S3 (NULL: no seed ran)"),
    f("seed_entries_fetched", pa.int64(), doc="compile-cache entries downloaded from S3 by the seed"),
    f("seed_bytes_fetched", pa.int64(), doc="bytes of those entries"),
    f("seed_entries_present", pa.int64(), doc="entries the seed found already on the box's volume (not fetched)"),
    f("seed_s", pa.float64(), doc="wall seconds of the seed"),
    f("push_entries", pa.int64(), doc="compile-cache entries pushed to S3 at the segment's end (new on this box)"),
    f("push_bytes", pa.int64(), doc="bytes of those entries"),
    f("push_s", pa.float64(), doc="wall seconds of the push"),
    f("cache_uri", pa.string(), doc="the S3 prefix of the shared compile cache"),
    f("cache_namespace", pa.string(), doc="the compiler version the cache is keyed by (e.g. neuronx-cc 2.x.y)"),
    f("ts", TS, doc="when the row was written (the segment's end)"),
    doc="One row per box boot of a run segment: its timeline and the compile cache it seeded and pushed.",
)

PREFLIGHT_STATUSES = ("pass", "fail", "skip")

PREFLIGHT_CHECKS = table(
    f("box_role", pa.string(), doc="trn1 | inf2 | local"),
    f(
        "check",
        pa.string(),
        False,
        "the check's name, e.g. venv.vllm, pins.neuronx-cc, path.libneuronpjrt-path, "
        "venv.vllm.no-optimum-neuron, neuron-cores, cache.writable, cache.free_space, "
        "hf.token, hf.licence, dataset, clock",
    ),
    f("status", pa.string(), False, "pass | fail | skip"),
    f("observed", pa.string(), doc="what the check found (a version, a path, a count, free bytes)"),
    f("expected", pa.string(), doc="what it had to be"),
    f("reason", pa.string(), doc="the verbatim actionable line of a failed or skipped check; NULL on pass"),
    f("duration_s", pa.float64(), doc="wall seconds of the check"),
    f("ts", TS, doc="when the check ran"),
    doc="One row per check of the preflight gate lane, run first on each box.",
)

BOX_TABLES = {
    "box_boots": BOX_BOOTS,
    "preflight_checks": PREFLIGHT_CHECKS,
}
