"""nvidia-smi's GPU inventory and header parsed for the preflight gate: real formats in, garbage out as a reason; and
the energy view's columns documented in docs/reference/metrics.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agents.preflight_gpu import at_least
from agents.telemetry.nvidia import (
    Gpu,
    NvidiaSmiOutputError,
    inventory_command,
    parse_cuda_version,
    parse_driver_version,
    parse_gpu_inventory,
    version_tuple,
)

HEADER = (
    "+-----------------------------------------------------------------------------------------+\n"
    "| NVIDIA-SMI 570.86.15              Driver Version: 570.86.15      CUDA Version: 12.8     |\n"
)
DASH_Q = (
    "==============NVSMI LOG==============\n\n"
    "Timestamp                                 : Tue Jul  1 12:00:00 2026\n"
    "Driver Version                            : 535.104.05\nCUDA Version                              : 12.2\n"
)


def test_the_inventory_command_is_the_one_the_gate_documents():
    assert inventory_command() == [
        "nvidia-smi",
        "--query-gpu=index,name,driver_version,memory.total",
        "--format=csv,noheader,nounits",
    ]


def test_inventory_lines_parse_in_index_order_with_na_memory_null():
    text = "1, NVIDIA H100 80GB HBM3, 570.86.15, 81559\n0, NVIDIA H100 80GB HBM3, 570.86.15, [N/A]\n\n"
    assert parse_gpu_inventory(text) == [
        Gpu(0, "NVIDIA H100 80GB HBM3", "570.86.15", None),
        Gpu(1, "NVIDIA H100 80GB HBM3", "570.86.15", 81559.0),
    ]
    assert parse_gpu_inventory("") == [] and parse_gpu_inventory("\n") == []


def test_a_name_with_a_comma_stays_whole():
    assert (
        parse_gpu_inventory("0, NVIDIA A100-SXM4-40GB, rev 2, 550.54.15, 40960")[0].name
        == "NVIDIA A100-SXM4-40GB, rev 2"
    )


@pytest.mark.parametrize(
    "text",
    [
        "Failed to initialize NVML: Driver/library version mismatch",
        "No devices were found",
        "0, NVIDIA A10G, latest, 23028",
        "x, NVIDIA A10G, 570.1, 1",
    ],
)
def test_anything_else_is_an_error_quoting_it(text):
    with pytest.raises(NvidiaSmiOutputError, match=re.escape(text[:30])):
        parse_gpu_inventory(text)


def test_the_cuda_version_comes_from_the_header_or_dash_q_and_na_is_none():
    assert parse_cuda_version(HEADER) == "12.8"
    assert parse_cuda_version(DASH_Q) == "12.2" and parse_driver_version(DASH_Q) == "535.104.05"
    assert parse_driver_version(HEADER) == "570.86.15"
    assert parse_cuda_version("| NVIDIA-SMI 450.80.02  Driver Version: 450.80.02  CUDA Version: N/A |") is None
    assert parse_cuda_version("") is None and parse_cuda_version("command not found") is None


def test_versions_compare_numerically():
    assert version_tuple("570.86.15") == (570, 86, 15)
    assert at_least("535.104.05", "535") and at_least("570.86.15", "535") and not at_least("530.30.02", "535")
    assert at_least("12", "12.0") and at_least("12.10", "12.9") and not at_least("11.8", "12.0")
    with pytest.raises(NvidiaSmiOutputError):
        version_tuple("12.x")


def test_point_energys_columns_are_documented_and_the_view_links_its_sql(monkeypatch):
    import tests.unit.test_metrics_doc as doc  # the metrics page's own reading of views and doc

    monkeypatch.setattr(doc, "METRIC_FILES", (*doc.METRIC_FILES, "42_report_energy.sql"))
    fname, cols = doc.metric_views()["point_energy"]
    assert fname == "42_report_energy.sql"
    assert [c for c in cols if c not in doc.documented()] == []
    assert "[`point_energy`](../../analytics/views/sql/42_report_energy.sql)" in Path(doc.DOC).read_text()


# ---- what a real GPU printed (tests/fixtures/nvidia_smi: an H200, captured by benchmarks/cuda_device_check.sh) ----
REAL = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia_smi"


def test_a_real_h200s_outputs_parse_as_the_gate_and_the_sensor_read_them():
    from agents.telemetry.nvidia import parse_nvidia_smi_csv

    header = (REAL / "h200-header.txt").read_text()
    assert parse_cuda_version(header) == "13.0" and parse_driver_version(header) == "580.159.04"
    assert parse_gpu_inventory((REAL / "h200-inventory.csv").read_text()) == [
        Gpu(0, "NVIDIA H200", "580.159.04", 143771.0)
    ]
    assert at_least("580.159.04", "535") and at_least("13.0", "12.0")
    rows = {r["metric"]: r for r in parse_nvidia_smi_csv((REAL / "h200-telemetry.csv").read_text())}
    assert rows["device_mem_total_mib"]["value"] == 143771.0 and rows["accel_util_pct"]["value"] == 0.0
    assert rows["power_w"]["value"] == 81.48 and rows["power_w"]["unit"] == "W" and rows["power_w"]["note"] is None
    assert {r["device"] for r in rows.values()} == {"gpu0"}
