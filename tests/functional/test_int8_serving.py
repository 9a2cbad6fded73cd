"""The int8 variant served for real on the CPU: the serving session prepares its checkpoint before the boot (a
``quantizations`` row: wall seconds, bytes before and after, where it went), the neuronpipe server boots from it with
int8 layers and answers; the next boot finds the checkpoint already prepared."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from agents.serving.cpu import CpuLauncher
from agents.serving.launcher import ServedModel
from agents.serving.quantized import prepare
from agents.serving.session import serve
from pipeline.servers import resolve_server_configs

pytestmark = pytest.mark.slow


class _Ctx:
    """What serve() and the preparation use of a LaneContext: the backend, a work directory, the rows written."""

    backend = "cpu"
    telemetry = None

    def __init__(self, root: Path):
        self.workdir, self.log_dir = root / "work", root / "logs"
        self.log_dir.mkdir(parents=True)
        self.rows: dict[str, list[dict]] = {}

    def lane_dir(self, name: str) -> Path:
        p = self.workdir / name
        p.mkdir(parents=True, exist_ok=True)
        return p

    def write(self, table: str, rows: list[dict], keep_on_failure: bool = False) -> None:
        self.rows.setdefault(table, []).extend(rows)


def test_the_int8_variant_is_prepared_then_served(shared_cache, tmp_path):
    from agents.training.tiny_models import ensure_tiny_model

    source = ensure_tiny_model("llama", shared_cache)
    (cfg,) = resolve_server_configs(
        {"A-int8": {"base": "A", "quantization": "int8_weight_only", "max_num_seqs": 2}}, "tiny", "cpu"
    )
    ctx = _Ctx(tmp_path)
    model = ServedModel("tiny-llama", source)
    with serve(ctx, CpuLauncher(server="neuronpipe"), model, cfg, health_timeout_s=120) as server:
        r = httpx.post(
            f"{server.base_url}/v1/completions",
            json={"model": "tiny-llama", "prompt": "The sea is", "max_tokens": 4, "temperature": 0, "ignore_eos": True},
            timeout=60,
        )
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 4
    [row] = ctx.rows["quantizations"]
    assert row["succeeded"] and not row["reused"] and row["method"] == "int8_weight_only"
    assert row["prepared_by"] == "neuronpipe" and row["quantized_modules"] == 14 and row["wall_s"] > 0
    assert 0 < row["bytes"] < row["source_bytes"] and Path(row["path"]).is_dir()
    assert row["source_path"] == str(source)
    [boot] = ctx.rows["compiles"]
    assert boot["succeeded"] and boot["config"] == "A-int8"
    log = next(ctx.log_dir.glob("server-*A-int8*.log")).read_text()
    assert "weights int8_weight_only" in log  # the server loaded the prepared checkpoint with int8 layers
    served = prepare(ctx, CpuLauncher(server="neuronpipe"), model, cfg)  # what the next boot does first
    assert served.path == Path(row["path"]) and served.name == "tiny-llama"
    again = ctx.rows["quantizations"][1]
    assert again["reused"] and again["wall_s"] is None and again["bytes"] == row["bytes"]
