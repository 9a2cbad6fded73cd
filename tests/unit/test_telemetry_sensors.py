"""neuron-monitor JSON, nvidia-smi CSV and Prometheus text parsed into telemetry rows (NULL where absent)."""

from __future__ import annotations

import json

import pytest

from agents.telemetry.neuron_monitor import POWER_NOTE, NeuronMonitorSensor, parse_report
from agents.telemetry.nvidia import NvidiaSmiSensor, parse_nvidia_smi_csv, query_command
from agents.telemetry.prometheus import PrometheusSensor, parse_prometheus_text, rows_from_metrics

# A report in neuron-monitor's shape (trimmed): one runtime (vLLM, TP=2) on an inf2.xlarge.
NEURON_MONITOR_REPORT = json.loads("""
{
  "neuron_runtime_data": [
    {
      "pid": 41234,
      "address": "",
      "neuron_runtime_tag": "41234",
      "error": "",
      "report": {
        "neuroncore_counters": {
          "period": 1.000214,
          "neuroncores_in_use": {
            "0": {"neuroncore_utilization": 87.25, "flops": 412000000000, "throttling_reasons": {}},
            "1": {"neuroncore_utilization": 85.5, "flops": 405000000000, "throttling_reasons": {}}
          },
          "error": ""
        },
        "memory_used": {
          "period": 1.000198,
          "neuron_runtime_used_bytes": {
            "host": 1073741824,
            "neuron_device": 21474836480,
            "usage_breakdown": {
              "host": {"application_memory": 1000000000, "constants": 0, "dma_buffers": 73741824, "tensors": 0},
              "neuroncore_memory_usage": {
                "0": {"constants": 200000, "model_code": 300000000, "model_shared_scratchpad": 0,
                      "runtime_memory": 50000000, "tensors": 10387218432},
                "1": {"constants": 200000, "model_code": 300000000, "model_shared_scratchpad": 0,
                      "runtime_memory": 50000000, "tensors": 10387218432}
              }
            }
          },
          "error": ""
        },
        "neuron_runtime_vcpu_usage": {"period": 1.0, "vcpu_usage": {"user": 12.5, "system": 2.5}, "error": ""},
        "execution_stats": {"period": 1.0, "error_summary": {"generic": 0, "numerical": 0, "transient": 0,
                            "model": 0, "runtime": 0, "hardware": 0},
                            "execution_summary": {"completed": 310, "completed_with_err": 0,
                            "completed_with_num_err": 0, "timed_out": 0, "incorrect_input": 0,
                            "failed_to_queue": 0}, "error": ""}
      }
    }
  ],
  "system_data": {
    "memory_info": {"period": 1.0, "memory_total_bytes": 16106127360, "memory_used_bytes": 9663676416,
                    "swap_total_bytes": 0, "swap_used_bytes": 0, "error": ""},
    "vcpu_usage": {"period": 1.0, "average_usage": {"user": 30.1, "nice": 0, "system": 3.2, "idle": 66.7,
                   "io_wait": 0, "irq": 0, "soft_irq": 0}, "error": ""}
  },
  "instance_info": {"instance_name": "", "instance_id": "i-0abc", "instance_type": "inf2.xlarge",
                    "instance_availability_zone": "us-east-2a", "error": ""},
  "neuron_hardware_info": {"neuron_device_type": "inferentia2", "neuron_device_count": 1,
                           "neuroncore_per_device_count": 2, "error": ""}
}
""")


def _by(rows, metric, device=None):
    return [r for r in rows if r["metric"] == metric and (device is None or r["device"] == device)]


def test_neuron_monitor_report_gives_core_utilisation_and_device_memory():
    rows = parse_report(NEURON_MONITOR_REPORT)
    assert _by(rows, "accel_util_pct", "nc0")[0]["value"] == 87.25
    assert _by(rows, "accel_util_pct", "nc1")[0]["value"] == 85.5
    assert _by(rows, "device_mem_used_mib")[0]["value"] == 20480.0
    assert _by(rows, "neuron_runtime_host_mem_mib")[0]["value"] == 1024.0
    assert _by(rows, "system_mem_used_mib")[0]["value"] == pytest.approx(9216.0)
    power = _by(rows, "power_w")[0]
    assert power["value"] is None and power["note"] == POWER_NOTE
    assert {r["source"] for r in rows} == {"neuron_monitor"}


def test_neuron_monitor_without_a_runtime_is_null_with_a_note():
    report = {**NEURON_MONITOR_REPORT, "neuron_runtime_data": []}
    rows = parse_report(report)
    util = _by(rows, "accel_util_pct")[0]
    assert util["value"] is None and "no Neuron runtime" in util["note"]
    assert _by(rows, "device_mem_used_mib")[0]["value"] is None


def test_neuron_monitor_sensor_absent_binary_and_streamed_lines():
    sensor = NeuronMonitorSensor(binary="definitely-not-neuron-monitor")
    rows = sensor.sample()
    assert all(r["value"] is None for r in rows)
    assert "not on PATH" in _by(rows, "accel_util_pct")[0]["note"]
    sensor.feed("not json\n")
    sensor.feed(json.dumps(NEURON_MONITOR_REPORT) + "\n")
    assert _by(sensor.sample(), "accel_util_pct", "nc0")[0]["value"] == 87.25
    sensor.close()


NVIDIA_CSV = """0, 97, 70211, 143771, 612.45
1, 3, 512, 143771, [N/A]
"""


def test_nvidia_smi_csv_parses_and_na_is_null():
    rows = parse_nvidia_smi_csv(NVIDIA_CSV)
    assert _by(rows, "accel_util_pct", "gpu0")[0]["value"] == 97.0
    assert _by(rows, "device_mem_used_mib", "gpu0")[0]["value"] == 70211.0
    assert _by(rows, "power_w", "gpu0")[0]["value"] == 612.45
    p1 = _by(rows, "power_w", "gpu1")[0]
    assert p1["value"] is None and "[N/A]" in p1["note"]
    assert query_command()[1].startswith("--query-gpu=index,utilization.gpu,memory.used")
    sensor = NvidiaSmiSensor(run=lambda cmd: NVIDIA_CSV)
    assert len(sensor.sample()) == 8


VLLM_METRICS = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="llama"} 3.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="llama"} 5.0
vllm:kv_cache_usage_perc{engine="0",model_name="llama"} 0.42
vllm:num_preemptions_total{engine="0",model_name="llama"} 7.0
vllm:generation_tokens_total{engine="0",model_name="llama"} 1234.0
"""


def test_prometheus_text_maps_vllm_names():
    samples = parse_prometheus_text(VLLM_METRICS)
    rows = {r["metric"]: r for r in rows_from_metrics(samples, "llama/A")}
    assert rows["server_requests_running"]["value"] == 3.0
    assert rows["server_requests_waiting"]["value"] == 5.0
    assert rows["server_kv_cache_usage_pct"]["value"] == pytest.approx(42.0)
    assert rows["server_preemptions_total"]["value"] == 7.0


def test_prometheus_older_names_and_missing_metric_is_null():
    text = 'vllm:gpu_cache_usage_perc{model_name="m"} 0.5\nvllm:num_requests_running{model_name="m"} 1\n'
    rows = {r["metric"]: r for r in rows_from_metrics(parse_prometheus_text(text), None)}
    assert rows["server_kv_cache_usage_pct"]["value"] == 50.0
    assert rows["server_requests_waiting"]["value"] is None
    assert "does not export" in rows["server_requests_waiting"]["note"]


def test_prometheus_sensor_unreachable_is_null_and_detached_is_silent():
    def boom(url):
        raise ConnectionError("refused")

    sensor = PrometheusSensor("http://127.0.0.1:1/metrics", fetch=boom)
    rows = sensor.sample()
    assert len(rows) == 4 and all(r["value"] is None and "refused" in r["note"] for r in rows)
    sensor.detach()
    assert sensor.sample() == []


def test_nvidia_sensor_without_nvidia_smi_is_null(monkeypatch):
    monkeypatch.setattr("agents.telemetry.nvidia.shutil.which", lambda name: None)
    rows = NvidiaSmiSensor().sample()
    assert len(rows) == 4 and all(r["value"] is None and "not on PATH" in r["note"] for r in rows)
