"""The measurement rules (docs/reference/rules.md), summarised for the generated report.

The report states the rules it was measured under; the wording here is a
summary for readers of REPORT.md, docs/reference/rules.md stays the authority.
"""
from __future__ import annotations

MEASUREMENT_RULES: tuple[tuple[str, str], ...] = (
    ("Smallest rentable boxes",
     "Numbers come from trn1.2xlarge and inf2.xlarge (one chip, two NeuronCores each); per-chip is the unit."),
    ("Stock stack, recorded",
     "Only the published Neuron DLAMI environments, pinned by AMI; the provenance lane records every version."),
    ("Compile time is a result",
     "Cold and warm compile wall times, cache sizes and new artifacts are reported first, before throughput."),
    ("Precompile numerics are garbage",
     "A precompile run records no loss; any loss from one is listed as a violation."),
    ("MFU is LoRA-aware",
     "FLOPs/token = 6·N_trainable + 4·N_frozen (recompute adds 2·N), parameters counted after the LoRA wrap; "
     "the formula and the peak, with its source, travel with every MFU value."),
    ("The serving grid comes from KV arithmetic",
     "Concurrency stops at the resident-sequence bound from KV bytes per token; every sweep declares its grid, "
     "bound and whether it was reduced."),
    ("No result without telemetry; absent sensors are NULL",
     "A point measured without telemetry is dropped from headline tables and counted; power is not exposed "
     "on these instances, so energy is NULL with a note."),
    ("Failures are results",
     "A lane that cannot boot or generate writes a failure record with the verbatim error; every exclusion is "
     "listed."),
    ("Weights are verified end to end",
     "SHA-256 of every artifact at download, after merge and after the copy to the serving box."),
    ("Host CPU is context",
     "The host benchmark bounds the client; it never headlines."),
    ("Results are append-only",
     "Nothing deletes or overwrites a committed result; a re-run is a new attempt."),
    ("One definition per metric",
     "Every number is defined once (docs/reference/metrics.md) and computed once, in the DuckDB views this report reads; "
     "field names follow `vllm bench serve`."),
)
