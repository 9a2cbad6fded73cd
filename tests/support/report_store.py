"""A store with every part of the report filled, for REPORT.html's tests and benchmarks/html_report.py: two synthetic
runs side by side (the second's TTFT 30 % higher: run-vs-run deltas), each with two server configs (one a declared
variant of the other: the A/B table), training, compiles, a sustained loop and a failed lane (an exclusion); in the
first run a capacity search (the knee) and the same model on a second instance type (the Decision across hardware).
Seconds to write; numbers are synthetic shapes, not measurements (tests/support/synthetic.py)."""

from __future__ import annotations

from pathlib import Path

from analytics.store import LocalStore
from tests.support.matrix import commit_cell, commit_lane
from tests.support.synthetic import SyntheticRun, write_synthetic_run

RUNS = ("html-a", "html-b")
MODEL = "tiny-llama"
CONFIGS = ("tp2-bs8", "tp2-bs32")
CONCURRENCIES = (1, 2, 4, 8, 16)
# offered rates of the capacity search (req/s) and whether each meets the SLO: the knee lies between 1.5 and 2
SEARCH = ((0.5, True), (1.0, True), (1.5, True), (2.0, False), (3.0, False))
# the roofline's facts of the cells' points (an 8B-class model at tensor parallel 1 in bf16: synthetic, not a
# measurement; the bound is what the page and REPORT.md set each point beside)
SERVED = {
    "matmul_params": 7_500_000_000,
    "weight_bytes_per_param": 2.0,
    "kv_bytes_per_token": 131072,
    "tensor_parallel": 1,
    "dtype": "bf16",
    "max_num_seqs": 32,
}


def write_report_store(root: str | Path, requests_per_point: int = 40, runs: tuple[str, ...] = RUNS) -> LocalStore:
    """Commit the runs into a local store at ``root``; return it."""
    store = LocalStore(Path(root))
    for i, run_id in enumerate(runs):
        write_synthetic_run(
            store,
            SyntheticRun(
                run_id=run_id,
                seed=i + 1,
                model=MODEL,
                server_configs=CONFIGS,
                concurrencies=CONCURRENCIES,
                requests_per_point=requests_per_point,
                ttft_factor=1.0 + 0.3 * i,
                variants=((CONFIGS[1], CONFIGS[0]),),
            ),
        )
    first = runs[0]
    commit_lane(
        store,
        first,
        "capacity",
        "inf2.xlarge",
        CONFIGS[0],
        MODEL,
        [(f"rate-{rate:g}", 4, rate, 1.0 if ok else 50.0) for rate, ok in SEARCH],
    )
    for cell, itype in (("c01", "inf2.xlarge"), ("c02", "g6.xlarge"), ("c03", "g5.12xlarge")):
        commit_cell(store, first, cell, itype, CONFIGS[0], 1.0, model=MODEL, served=SERVED)
    commit_kernels(store, first)
    commit_scratch(store, first)
    return store


def commit_scratch(store: LocalStore, run_id: str) -> None:
    """The from_scratch lane's rows for two models over two epochs (synthetic counts: the CNN ahead of the MLP)."""
    writer = store.begin_attempt(run_id, "from_scratch")
    base = {"dataset": "generated", "source": "measured", "device": "cpu", "backend": "cpu"}
    runs, epochs = [], []
    for model, correct in (("mlp", (210, 300)), ("cnn", (260, 350))):
        runs.append(
            {
                **base,
                "model": model,
                "num_classes": 10,
                "train_samples": 1280,
                "test_samples": 400,
                "params": 20_000,
                "epochs": 2,
                "batch_size": 64,
                "steps": 40,
                "warmup_steps": 2,
                "first_step_s": 0.2,
                "steady_step_s": 0.01,
                "steady_steps": 38,
                "train_wall_s": 1.5,
            }
        )
        for epoch, n in enumerate(correct, 1):
            epochs.append(
                {
                    **{k: v for k, v in base.items() if k != "backend"},
                    "model": model,
                    "epoch": epoch,
                    "train_loss": 2.0 / epoch,
                    "correct": n,
                    "test_samples": 400,
                    "epoch_s": 0.7,
                    "train_steps": 20,
                    "steady_step_s": 0.01,
                }
            )
    writer.add_rows("scratch_runs", runs)
    writer.add_rows("scratch_epochs", epochs)
    writer.commit("succeeded")


def commit_kernels(store: LocalStore, run_id: str) -> None:
    """The nki lane's rows for one kernel at one shape: simulated, compiled, matched on the device, and timed against
    its torch reference (synthetic latencies: the kernel's 100-139 µs, the reference's twice that)."""
    base = {
        "kernel": "row_softmax",
        "kernel_function": "row_softmax",
        "kernel_file": "row_softmax.py",
        "shape_index": 0,
        "shape": "128x512",
        "dtypes": "float32",
        "backend": "neuron",
    }
    tol = {"tol_max_abs": 1e-5, "tol_max_rel": 1e-4, "reference": "numpy:reference"}
    writer = store.begin_attempt(run_id, "nki")
    writer.add_rows(
        "kernel_checks",
        [
            {
                **base,
                **tol,
                "stage": "simulate",
                "outcome": "ok",
                "elements": 65536,
                "max_abs_err": 6e-8,
                "max_rel_err": 2e-6,
                "outside_tolerance": 0,
                "wall_s": 1.0,
            },
            {**base, **tol, "stage": "compile", "outcome": "ok", "wall_s": 41.0},
            {
                **base,
                **tol,
                "stage": "device",
                "outcome": "ok",
                "elements": 65536,
                "max_abs_err": 1e-7,
                "max_rel_err": 3e-6,
                "outside_tolerance": 0,
            },
        ],
    )
    writer.add_rows(
        "kernel_timings",
        [
            {**base, "implementation": "kernel", "op": "row_softmax", "latencies_us": [100.0 + i for i in range(40)]},
            {
                **base,
                "implementation": "reference",
                "op": "torch:softmax",
                "latencies_us": [200.0 + 2 * i for i in range(40)],
            },
        ],
    )
    writer.commit("succeeded")
