"""The roofline's facts of the source's points (``sweep_points.served_json``): what each of its declared server
configs served, for the models the catalogue knows (pipeline.roofline; docs/reference/metrics.md, "Roofline")."""

from __future__ import annotations

import json
from typing import Any

# The source's declared server configs, as (max_model_len, max_num_seqs, tensor parallel): its provisioning table's
# short and long at tensor parallel 2 (both NeuronCores of its one Inferentia2), and its multi-tenant extra's
# servers of one NeuronCore each (2048 x 8); all in bf16 with a bf16 KV cache.
SOURCE_CONFIGS: dict[str, tuple[int, int, int]] = {"short": (2048, 32, 2), "long": (9216, 8, 2), "tenant": (2048, 8, 1)}


def served_json(model_id: Any, config: str, kv_dtype_bytes: int = 2) -> str | None:
    """A source point's ``served_json`` (the roofline's facts), for a catalogued model in a declared config (a
    variant of one names its base; ``kv_dtype_bytes`` 1 for its fp8 KV cache); None for anything else (its bound
    is then NULL, never guessed)."""
    from pipeline.model_catalogue import MODEL_CATALOGUE
    from pipeline.roofline import served_model

    entry = next((e for e in MODEL_CATALOGUE.values() if model_id in (e.name, e.ref)), None)
    if entry is None or entry.facts is None or config not in SOURCE_CONFIGS:
        return None
    max_model_len, max_num_seqs, tensor_parallel = SOURCE_CONFIGS[config]
    model = served_model(entry.facts, dtype="bf16", kv_dtype_bytes=kv_dtype_bytes, tensor_parallel=tensor_parallel)
    facts = {
        **model.to_json(),
        "params": entry.facts.params,
        "params_source": "catalogue",
        "max_num_seqs": max_num_seqs,
        "max_model_len": max_model_len,
    }
    return json.dumps(facts, sort_keys=True)
