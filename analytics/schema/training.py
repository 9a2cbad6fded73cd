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
    f("what", pa.string(), False, "training_graph | serving_config | encoder_trace (an encoder traced ahead)"),
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

TRAIN_SAVES = table(
    f("model", pa.string(), False),
    f("step", pa.int32(), False, "the optimizer step after which the checkpoint was saved"),
    f("save_s", pa.float64(), doc="wall seconds of the save itself (the trainer's checkpoint call, timed around it)"),
    f("bytes", pa.int64(), doc="sum of the checkpoint directory's files right after the save (NULL: not recorded)"),
    f("kind", pa.string(), doc="adapter (weights only) | full_state (optimizer/scheduler state written too)"),
    f("files", pa.int32(), doc="files in the checkpoint directory"),
    f("path", pa.string(), doc="the checkpoint directory, relative to the training run's output directory"),
    f("ts", TS),
    doc="One row per mid-run checkpoint save (sft's save_every_steps).",
)

SCRATCH_RUNS = table(
    f("model", pa.string(), False, "mlp | cnn | vit"),
    f("dataset", pa.string(), False, "the dataset's name: its file name, or generated, or the source's (mnist)"),
    f(
        "source",
        pa.string(),
        False,
        "measured (this lane) | imported (another harness's files) | reference "
        "(figures measured elsewhere, as their source states them)",
    ),
    f("source_note", pa.string(), doc="where an imported or reference row comes from"),
    f("backend", pa.string()),
    f("device", pa.string(), doc="cpu | trn1 (one NeuronCore) | apple_m5 ..."),
    f("dataset_uri", pa.string()),
    f("dataset_sha256", pa.string()),
    f("image_shape", pa.string(), doc="H x W x C"),
    f("num_classes", pa.int32()),
    f("train_samples", pa.int64()),
    f("test_samples", pa.int64()),
    f("params", pa.int64(), doc="the model's parameters"),
    f("epochs", pa.int32()),
    f("batch_size", pa.int32()),
    f("learning_rate", pa.float64()),
    f("steps", pa.int32(), doc="optimizer steps run"),
    f("warmup_steps", pa.int32(), doc="first steps kept apart from the steady step time"),
    f("first_step_s", pa.float64(), doc="wall seconds of the first step (XLA's compile on neuron)"),
    f("steady_step_s", pa.float64(), doc="median wall seconds of the steps after the kept-apart ones"),
    f("steady_steps", pa.int32()),
    f("train_wall_s", pa.float64(), doc="wall seconds of the model's whole training, evaluations included"),
    f("reference_acc_low", pa.float64(), doc="reference rows: the lowest test accuracy the source states (0-1)"),
    f("reference_acc_high", pa.float64(), doc="reference rows: the highest test accuracy the source states (0-1)"),
    f("config_json", pa.string(), doc="the run's settings (optimizer, shapes, seed)"),
    f("ts", TS),
    doc="One row per model trained from scratch (the from_scratch lane), imported run or reference figure.",
)

SCRATCH_EPOCHS = table(
    f("model", pa.string(), False),
    f("dataset", pa.string(), False),
    f("source", pa.string(), False, "measured | imported (as scratch_runs)"),
    f("device", pa.string()),
    f("epoch", pa.int32(), False, "1-based"),
    f("train_loss", pa.float64(), doc="mean cross-entropy over the epoch's steps"),
    f("correct", pa.int64(), doc="test images classified correctly after the epoch"),
    f("test_samples", pa.int64(), doc="test images scored"),
    f("epoch_s", pa.float64(), doc="wall seconds of the epoch, its evaluation included"),
    f("train_steps", pa.int32()),
    f("steady_step_s", pa.float64(), doc="median step seconds of the epoch's steps after the kept-apart ones"),
    f("ts", TS),
    doc="One row per model and epoch trained from scratch.",
)

TRAINING_TABLES = {
    "train_steps": TRAIN_STEPS,
    "train_runs": TRAIN_RUNS,
    "compiles": COMPILES,
    "artifacts": ARTIFACTS,
    "train_saves": TRAIN_SAVES,
    "scratch_runs": SCRATCH_RUNS,
    "scratch_epochs": SCRATCH_EPOCHS,
}
