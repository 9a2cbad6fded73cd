"""What a point's roofline needs of the model it measured, read on the box from the files it served.

The checkpoint's own ``config.json`` gives the shape (layers, heads, KV heads, head dim, hidden size, vocabulary,
tied embeddings) and the safetensors headers give the exact parameter count (the 8-byte length and the JSON
header of each file: no tensor is loaded); the server config gives the served dtype, KV dtype, quantization,
tensor parallelism and ``max_num_seqs``. Stored on every point as ``sweep_points.served_json``; the views turn it
into bounds (``pipeline.roofline``). A checkpoint whose files cannot be read has no facts (NULL): the bound is
then NULL with its reason, never a guess.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import struct
from pathlib import Path
from typing import Any

from pipeline.servers import ServerConfig

log = logging.getLogger(__name__)

HEADER_CAP_BYTES = 100 * 2**20  # a safetensors header larger than this is not one


def safetensors_params(model_dir: Path) -> int | None:
    """Parameters in the checkpoint's safetensors files (their headers' shapes), or None without such files or
    with a header that does not parse."""
    files = sorted(Path(model_dir).glob("*.safetensors"))
    if not files:
        return None
    total = 0
    for path in files:
        try:
            with path.open("rb") as fh:
                (size,) = struct.unpack("<Q", fh.read(8))
                if size > HEADER_CAP_BYTES:
                    return None
                header = json.loads(fh.read(size))
        except (OSError, struct.error, ValueError) as exc:
            log.warning("%s: safetensors header unreadable (%s): no parameter count", path.name, exc)
            return None
        for name, entry in header.items():
            # a quantized weight's scale (NAME.weight_scale, vLLM's and the int8 checkpoint's name) is no parameter
            if name != "__metadata__" and isinstance(entry, dict) and not name.endswith(".weight_scale"):
                total += math.prod(int(d) for d in entry.get("shape", []))
    return total


def served_facts(model_dir: Path, config: ServerConfig, backend: str) -> dict[str, Any] | None:
    """``sweep_points.served_json`` of a point served from ``model_dir`` with ``config`` on ``backend``."""
    from pipeline.model_catalogue import facts_from_config
    from pipeline.roofline import served_as

    try:
        raw = json.loads((Path(model_dir) / "config.json").read_text())
        facts = facts_from_config(raw)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("%s: no model facts for the roofline (%s: %s)", model_dir, type(exc).__name__, exc)
        return None
    counted = safetensors_params(Path(model_dir))
    if counted:
        facts = dataclasses.replace(facts, params=counted)
    model = served_as(facts, config, backend)
    return {
        **model.to_json(),
        "params": facts.params,
        "params_source": "safetensors headers" if counted else "config.json arithmetic",
        "max_num_seqs": config.max_num_seqs,
        "max_model_len": config.max_model_len,
    }
