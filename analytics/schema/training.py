"""Training-side tables: train_steps, train_runs, compiles, artifacts. (Owned by the training lanes.)"""

import pyarrow as pa

from analytics.schema._types import TS, f, table

TRAIN_STEPS = table(
    f("model", pa.string(), False),
    f("step", pa.int32(), False, "optimizer step, 1-based"),
    f("loss", pa.float64()),
    f("learning_rate", pa.float64()),
    f("grad_norm", pa.float64()),
    f("tokens", pa.int64(), doc="tokens processed in this optimizer step (all ranks)"),
    f("step_s", pa.float64(), doc="wall seconds of this optimizer step"),
    f("ts", TS),
    doc="One row per optimizer step. Never written by a precompile run.",
)

TRAIN_RUNS = table(
    f("model", pa.string(), False),
    f("backend", pa.string()),
    f("device", pa.string(), doc="device key into the peak table, e.g. trn1, h100_sxm, cpu"),
    f("num_devices", pa.int32()),
    f("params_trainable", pa.int64()),
    f("params_frozen", pa.int64()),
    f("lora_r", pa.int32()),
    f("lora_alpha", pa.int32()),
    f("steps", pa.int32()),
    f("epochs", pa.float64()),
    f("tokens_total", pa.int64()),
    f("tokens_per_s", pa.float64()),
    f("first_step_s", pa.float64()),
    f("median_step_s", pa.float64()),
    f("flops_per_token", pa.float64()),
    f("flops_formula", pa.string()),
    f("activation_recompute", pa.bool_()),
    f("mfu", pa.float64(), doc="NULL when the peak is unknown or counts degenerate"),
    f("mfu_alt", pa.float64(), doc="MFU against the alternative published peak (e.g. trn1 210)"),
    f("peak_flops", pa.float64()),
    f("peak_source", pa.string()),
    f("peak_alt_flops", pa.float64()),
    f("peak_alt_source", pa.string()),
    f("mfu_null_reason", pa.string()),
    f("peak_host_mem_mib", pa.float64()),
    f("final_loss", pa.float64()),
    f("dataset_sha256", pa.string()),
    f("dataset_records", pa.int64()),
    f("max_seq_len", pa.int32()),
    f("adapter_uri", pa.string()),
    f(
        "train_loop_s",
        pa.float64(),
        doc="wall seconds of the whole training loop (trainer.train()), against which "
        "the summed step_s is checked: a step clock covering < 90 % of it is flagged",
    ),
    f("step_clock", pa.string(), doc="what interval step_s measures, e.g. 'on_step_end interval' (NULL: not recorded)"),
    doc="One row per training run (per model).",
)

COMPILES = table(
    f("what", pa.string(), False, "training_graph | serving_config"),
    f("model", pa.string()),
    f("config", pa.string(), doc="server config name or training config summary"),
    f("cache", pa.string(), False, "cold | warm | none"),
    f("wall_s", pa.float64()),
    f("cache_bytes_before", pa.int64()),
    f("cache_bytes_after", pa.int64()),
    f("new_artifacts", pa.int64(), doc="compiled graphs / NEFFs added by this compile"),
    f("succeeded", pa.bool_(), False),
    f("error", pa.string()),
    f("backend", pa.string()),
    f("ts", TS),
    f(
        "cache_scope",
        pa.string(),
        doc="which cache the cold/warm label speaks of: shared_compiler_cache (every "
        "model's graphs, e.g. NEURON_COMPILE_CACHE_URL) | artifacts_dir (this model and "
        "config's own compiled-artifacts dir)",
    ),
    f(
        "cache_basis",
        pa.string(),
        doc="observed (artifacts counted in that cache before and after) | inferred (from a "
        "proxy: the cache's size, a flag of the source) | s3 (the artifacts the boot "
        "used were seeded from the shared S3 compile cache this boot: box_boots)",
    ),
    f(
        "config_fingerprint",
        pa.string(),
        doc="serving: the server config's compile-cache fingerprint "
        "(pipeline.servers.ServerConfig.fingerprint: every field that changes "
        "the graphs); NULL for training and imported rows",
    ),
    f(
        "config_json",
        pa.string(),
        doc="serving: what the server config sets (name, base, fingerprint, lengths, "
        "tensor parallel, KV dtype, prefix caching, speculative, env, extra_args)",
    ),
    doc="One row per compile or server boot.",
)

ARTIFACTS = table(
    f("model", pa.string()),
    f("kind", pa.string(), False, "base | adapter | merged | dataset | roundtrip"),
    f("stage", pa.string(), doc="download (base/dataset) | after_train (adapter) | after_merge | after_copy"),
    f("path", pa.string(), False, "path relative to the artifact root"),
    f("uri", pa.string(), doc="where the artifact lives in the store"),
    f("bytes", pa.int64()),
    f("sha256", pa.string()),
    f("expected_sha256", pa.string(), doc="the hash it must match (from an earlier stage)"),
    f("roundtrip_verified", pa.bool_(), doc="sha256 == expected_sha256; NULL where nothing to compare"),
    doc="SHA-256 of every model and data artifact at every stage.",
)

TRAINING_TABLES = {
    "train_steps": TRAIN_STEPS,
    "train_runs": TRAIN_RUNS,
    "compiles": COMPILES,
    "artifacts": ARTIFACTS,
}
