"""Suite-wide settings: no hub downloads, fake AWS credentials, test lanes on the registry, Ctrl-C as a terminal
sends it."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MPLBACKEND", "Agg")
# A suite started as a background job of a shell without job control (`make test &` in a script, `nohup`) inherits
# SIGINT ignored, and every process it starts inherits that too: a Ctrl-C test's child would then sleep through
# its SIGINT (the CLI keeps an inherited ignore on purpose, as nohup asks). The tests that send SIGINT test what
# a terminal's Ctrl-C does, so the suite's processes, and through them their children, take SIGINT as Python does
# by default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# Never reach a real account from tests.
for _k, _v in {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-west-2",
    "AWS_REGION": "us-west-2",
}.items():
    os.environ[_k] = _v

TEST_LANES = ",".join(f"t_{n}=tests.fixtures.lane_{n}" for n in ("ok", "boom", "skip", "hang"))


@pytest.fixture
def test_lanes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registers the fixture lanes t_ok, t_boom, t_skip, t_hang (also for child processes)."""
    monkeypatch.setenv("NEURONPIPE_EXTRA_LANES", TEST_LANES)
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One model/tokenizer cache for the whole session (tiny models are built once)."""
    path = Path(os.environ.get("NEURONPIPE_TEST_CACHE", tmp_path_factory.mktemp("neuronpipe-cache")))
    os.environ["NEURONPIPE_CACHE"] = str(path)
    return path


# The heaviest test files first (longest-processing-time-first: with two workers the suite's wall time is set by
# its tail, and xdist's default order, files with the most tests first, left the ~6-minute e2e file to the end).
# Measured on the CI shape (2 cores, `--durations`); a stale entry only costs scheduling, never correctness.
# `make test` passes --no-loadscope-reorder so xdist keeps this order.
HEAVY_FIRST = (
    "tests/e2e/test_local_pipeline.py",
    "tests/rehearsal/test_fault_matrix.py",
    "tests/rehearsal/test_fleet_faults.py",
    "tests/rehearsal/test_rehearsal_e2e.py",
    "tests/rehearsal/test_rehearsal_preflight_cache.py",
    "tests/functional/test_train_limits_local.py",
    "tests/functional/test_variants_local.py",
    "tests/functional/test_lora_serving.py",
    "tests/rehearsal/test_rehearsal_iam.py",
    "tests/functional/test_limits_local.py",
    "tests/functional/test_capacity_lane_resume.py",
    "tests/functional/test_any_model_local.py",
    "tests/functional/test_workloads_local.py",
    "tests/functional/test_accuracy_lane.py",
    "tests/functional/test_report_accuracy.py",
    "tests/browser/test_report_page.py",
    "tests/functional/test_training_lanes.py",
    "tests/functional/test_lanes_serving_store.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {path: i for i, path in enumerate(HEAVY_FIRST)}

    def key(item: pytest.Item) -> int:
        path = item.nodeid.split("::", 1)[0]
        if path in rank:
            return rank[path]
        return len(rank) + (0 if item.get_closest_marker("slow") else 1)

    items.sort(key=key)  # stable: within a file, and among the rest, collection order stays
