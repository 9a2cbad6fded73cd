"""The CPU server for real: a tiny model booted through the launcher, streamed from, and always stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import psutil
import pytest

from agents.serving.cpu import CpuLauncher
from agents.serving.failures import BootFailureKind
from agents.serving.launcher import ServedModel, ServerBootError, ServerProcess
from pipeline.servers import ServerConfig

pytestmark = pytest.mark.slow
CONFIG = ServerConfig("A", max_model_len=128, max_num_seqs=2)


@pytest.fixture(scope="module")
def tiny_llama(shared_cache) -> Path:
    from agents.training.tiny_models import ensure_tiny_model

    return ensure_tiny_model("llama", shared_cache)


@pytest.fixture(scope="module")
def server(tiny_llama, tmp_path_factory):
    launcher = CpuLauncher(vllm_cpu_python="")
    proc = ServerProcess(
        launcher,
        ServedModel("tiny-llama", tiny_llama),
        CONFIG,
        tmp_path_factory.mktemp("logs") / "server.log",
        health_timeout_s=120,
    )
    with proc:
        yield proc
    assert not proc.alive()


def _events(resp: httpx.Response) -> list[dict]:
    out = []
    for line in resp.iter_lines():
        if line.startswith("data: ") and line != "data: [DONE]":
            out.append(json.loads(line[6:]))
    return out


def test_boot_row_and_health(server):
    row = server.compile_row
    assert row["what"] == "serving_config" and row["succeeded"] is True and row["cache"] == "none"
    assert row["wall_s"] > 0 and row["backend"] == "cpu" and row["error"] is None
    assert httpx.get(server.base_url + "/health").status_code == 200


def test_one_event_per_token_with_pinned_length_and_usage(server):
    body = {
        "model": "tiny-llama",
        "prompt": "Write a poem about the sea.",
        "max_tokens": 12,
        "min_tokens": 12,
        "ignore_eos": True,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    with httpx.stream("POST", server.base_url + "/v1/completions", json=body, timeout=60) as resp:
        assert resp.status_code == 200
        events = _events(resp)
    content = [e for e in events if e["choices"]]
    assert len(content) == 12
    assert [e["usage"]["completion_tokens"] for e in content] == list(range(1, 13))
    assert content[-1]["choices"][0]["finish_reason"] == "length"
    assert events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] == 12


def test_greedy_is_deterministic_and_logprobs_are_returned(server):
    body = {
        "model": "tiny-llama",
        "messages": [{"role": "user", "content": "Name a colour."}],
        "max_tokens": 8,
        "temperature": 0,
        "seed": 0,
        "logprobs": True,
    }
    a = httpx.post(server.base_url + "/v1/chat/completions", json=body, timeout=60).json()
    b = httpx.post(server.base_url + "/v1/chat/completions", json=body, timeout=60).json()
    assert a["choices"][0]["message"]["content"] == b["choices"][0]["message"]["content"]
    lps = [c["logprob"] for c in a["choices"][0]["logprobs"]["content"]]
    assert len(lps) == a["usage"]["completion_tokens"] and all(lp <= 0 for lp in lps)


def test_metrics_and_context_refusal(server):
    text = httpx.get(server.metrics_url).text
    assert "vllm:num_requests_running" in text and "vllm:kv_cache_usage_perc" in text
    r = httpx.post(server.base_url + "/v1/completions", json={"prompt": "hi", "max_tokens": 500})
    assert r.status_code == 400 and "maximum context length is 128" in r.json()["error"]["message"]


def test_stop_strings_end_the_text_before_them_streamed_or_not(server):
    """vLLM's ``stop``: the text ends before the first stop string and the choice finishes "stop" (lm-eval's
    generation tasks stop at their ``until`` strings through it)."""
    body = {
        "model": "tiny-llama",
        "prompt": "Write a poem about the sea.",
        "max_tokens": 16,
        "ignore_eos": True,
        "temperature": 0,
    }
    full = httpx.post(server.base_url + "/v1/completions", json=body, timeout=60).json()["choices"][0]["text"]
    k = len(full) // 2
    stop = full[k : k + 3]
    expected = full[: full.find(stop)]
    got = httpx.post(
        server.base_url + "/v1/completions", json={**body, "stop": [stop, "never-there"]}, timeout=60
    ).json()["choices"][0]
    assert (got["text"], got["finish_reason"]) == (expected, "stop")
    with httpx.stream(
        "POST", server.base_url + "/v1/completions", json={**body, "stop": stop, "stream": True}, timeout=60
    ) as resp:
        chunks = [e["choices"][0] for e in _events(resp) if e["choices"]]
    assert "".join(c["text"] for c in chunks) == expected and chunks[-1]["finish_reason"] == "stop"


def test_echo_is_refused_with_the_reason(server):
    r = httpx.post(
        server.base_url + "/v1/completions", json={"prompt": "hi", "max_tokens": 1, "echo": True, "logprobs": 1}
    )
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("echo is not supported")


def test_boot_failure_is_classified_and_leaves_no_process(tmp_path):
    bad = tmp_path / "not-a-model"
    bad.mkdir()
    (bad / "config.json").write_text(json.dumps({"model_type": "no-such-architecture"}))
    proc = ServerProcess(
        CpuLauncher(vllm_cpu_python=""), ServedModel("bad", bad), CONFIG, tmp_path / "s.log", health_timeout_s=120
    )
    with pytest.raises(ServerBootError) as exc:
        proc.boot()
    assert exc.value.compile_row["succeeded"] is False
    assert exc.value.failure.kind in (BootFailureKind.UNSUPPORTED_ARCHITECTURE, BootFailureKind.EXITED)
    assert exc.value.failure.line in (tmp_path / "s.log").read_text()
    assert not proc.alive()


def test_the_cuda_launchers_neuronpipe_server_serves_the_same_protocol(tiny_llama, tmp_path):
    """The cuda backend's neuronpipe server is this server with ``--device``: booted through CudaLauncher on the
    CPU (no GPU here) it streams one event per token like the CPU launcher's."""
    from agents.serving.cuda import CudaLauncher

    launcher = CudaLauncher(tmp_path, server="neuronpipe", device="cpu")
    with ServerProcess(
        launcher, ServedModel("tiny-llama", tiny_llama), CONFIG, tmp_path / "s.log", health_timeout_s=120
    ) as proc:
        assert proc.compile_row["backend"] == "cuda" and proc.compile_row["cache"] == "none"
        body = {
            "model": "tiny-llama",
            "prompt": "Hello",
            "max_tokens": 5,
            "min_tokens": 5,
            "ignore_eos": True,
            "temperature": 0,
            "stream": True,
        }
        with httpx.stream("POST", proc.base_url + "/v1/completions", json=body, timeout=60) as r:
            assert len([e for e in _events(r) if e["choices"]]) == 5
    assert not proc.alive()


def test_a_gpu_this_machine_does_not_have_fails_the_boot_with_one_line(tiny_llama, tmp_path):
    from agents.serving.cuda import CudaLauncher

    proc = ServerProcess(
        CudaLauncher(tmp_path, server="neuronpipe"),
        ServedModel("tiny-llama", tiny_llama),
        CONFIG,
        tmp_path / "s.log",
        health_timeout_s=120,
    )
    with pytest.raises(ServerBootError) as exc:
        proc.boot()
    assert exc.value.failure.kind == BootFailureKind.EXITED
    assert exc.value.failure.message().endswith(
        "error: --device 'cuda': this torch (2.13.0+cpu, CUDA none) sees no "
        "CUDA GPU (a CPU build of torch, or no driver: nvidia-smi says which)"
    )
    assert not proc.alive()


def test_server_dies_with_a_sigkilled_parent(tiny_llama, tmp_path):
    """The lane process SIGKILLed mid-sweep: the server it started must not survive it."""
    script = tmp_path / "parent.py"
    script.write_text(
        textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from pipeline.servers import ServerConfig
        from agents.serving.cpu import CpuLauncher
        from agents.serving.launcher import ServedModel, ServerProcess
        p = ServerProcess(CpuLauncher(vllm_cpu_python=""), ServedModel("m", Path({str(tiny_llama)!r})),
                          ServerConfig("A", 128, 2), Path({str(tmp_path / "k.log")!r}), health_timeout_s=120)
        p.boot()
        print(p.proc.pid, flush=True)
        time.sleep(600)
    """)
    )
    parent = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    try:
        server_pid = int(parent.stdout.readline())
        assert psutil.pid_exists(server_pid)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and psutil.pid_exists(server_pid):
            try:
                if psutil.Process(server_pid).status() == psutil.STATUS_ZOMBIE:
                    break
            except psutil.NoSuchProcess:
                break
            time.sleep(0.2)
        alive = psutil.pid_exists(server_pid) and psutil.Process(server_pid).status() != psutil.STATUS_ZOMBIE
        assert not alive
    finally:
        if parent.poll() is None:
            parent.kill()
