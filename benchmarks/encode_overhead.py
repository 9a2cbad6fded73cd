"""The encode lane's client overhead per item: what its timed call adds around the model's own forward, and the input
preparation it does before the timer starts.

* **call overhead** — one timed call of the lane (``EncoderTask.forward`` through ``PlacedGraph.call``: the shape
  check, numpy → torch, ``inference_mode``, the output back to numpy) against the same module called directly on
  tensors that already exist, for a module whose forward costs next to nothing (a 16 → 4 linear layer) so the
  difference is the harness's: (call − direct) / batch, per batch size, median of many calls;
* **input preparation** — ``EncoderTask.encode`` per item for each tiny modality (the Whisper log-mel, image
  normalisation, word-hash tokenisation of texts and pairs): outside the timed call, so client-side work a real
  pipeline pays on top of the latency the lane reports.

Every figure is measured here, on the CPU; the load average is printed before and after (other work on the machine
changes both). Run: ``python benchmarks/encode_overhead.py [--quick]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

BATCHES = (1, 8, 32)


def _median_s(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def call_overhead(n: int) -> list[tuple[int, float, float, float]]:
    """(batch, direct µs, lane call µs, overhead µs per item) per batch size."""
    import torch

    from agents.encoders.models import EncoderTask
    from agents.encoders.placement import place

    torch.manual_seed(0)
    layer = torch.nn.Linear(16, 4).eval()
    out = []
    for b in BATCHES:
        x = np.random.default_rng(0).standard_normal((b, 16)).astype(np.float32)
        task = EncoderTask(
            "bench",
            "bench",
            "text_embedding",
            16,
            {"encoder": layer},
            lambda bb: {"encoder": [np.zeros((bb, 16), np.float32)]},
            lambda items: [np.asarray(items, np.float32)],
            lambda calls, batch: calls["encoder"](batch[0])[0],
        )
        graph = place(layer, [x], backend="cpu", key="bench")
        calls = {"encoder": graph.call}
        xt = torch.from_numpy(x)

        def direct(xt=xt) -> None:
            with torch.inference_mode():
                layer(xt)

        def lane_call(task=task, calls=calls, x=x) -> None:
            task.forward(calls, [x])

        for _ in range(50):  # warm both paths
            direct()
            lane_call()
        d = _median_s(direct, n)
        c = _median_s(lane_call, n)
        out.append((b, d * 1e6, c * 1e6, (c - d) * 1e6 / b))
    return out


def preparation(items: int) -> list[tuple[str, float]]:
    """(workload, µs per item of EncoderTask.encode) for the tiny profile's workloads."""
    from agents.encoders.measure import raw_items
    from agents.encoders.models import build_task
    from pipeline.encoders import EncodeWorkload
    from pipeline.lane_configs.encode import TINY_WORKLOADS

    out = []
    for spec in TINY_WORKLOADS:
        w = EncodeWorkload.model_validate({**spec, "items": items})
        task = build_task(w, w.shapes[0], 0)
        raw = raw_items(w, w.shapes[0], 0, None)
        task.encode(raw)  # warm
        s = _median_s(lambda raw=raw, task=task: task.encode(raw), 5)
        out.append((f"{w.name} ({w.modality}, {w.shapes[0]} {w.model})", s * 1e6 / items))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer calls (a smoke run of the benchmark)")
    args = ap.parse_args()
    n, items = (200, 16) if args.quick else (2000, 64)
    import torch

    torch.set_num_threads(1)  # as the lane runs on the cpu backend (its cpu_threads default)
    print(f"load average before: {os.getloadavg()}")
    print(f"call overhead (median of {n} calls; a 16->4 linear layer on the CPU)")
    print(f"{'batch':>6} {'direct µs':>10} {'lane call µs':>13} {'overhead µs/item':>17}")
    for b, d, c, per in call_overhead(n):
        print(f"{b:>6} {d:>10.1f} {c:>13.1f} {per:>17.1f}")
    print(f"input preparation per item (median of 5 passes over {items} items)")
    for name, us in preparation(items):
        print(f"  {name}: {us:.1f} µs/item")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
