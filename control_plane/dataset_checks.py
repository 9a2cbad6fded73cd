"""The from_scratch lane's dataset and the rag lane's corpus and probes, checked at plan time where the plan can read
them.

A local run's ``.npz`` path is this machine's file: it is read with the lane's own reader
(``agents.training.vision.dataset.check_file``, numpy only) and a malformed one refuses the plan with one line
naming the file and the field. An ``s3://`` URI, or a path on a box, is checked on the box, where a bad file fails
the lane with the same line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from control_plane.lane_configs import LaneConfigInvalidError, built_config
from pipeline.lanes import LaneSpec

LANE = "from_scratch"


def check_scratch_dataset(
    configs: Mapping[str, Mapping[str, Any] | None], specs: Mapping[str, LaneSpec], profile: str, *, local: bool
) -> None:
    if LANE not in configs or not local:
        return
    built = built_config(specs[LANE], profile, configs[LANE], "dataset")
    if built is None or not built.dataset or str(built.dataset).startswith("s3://"):
        return
    try:
        from agents.training.vision.dataset import check_file
    except ImportError:  # no numpy here: the lane checks the file when it runs
        return
    problem = check_file(built.dataset)
    if problem:
        raise LaneConfigInvalidError(f"{LANE}.dataset: {problem}")


def check_rag_files(
    configs: Mapping[str, Mapping[str, Any] | None], specs: Mapping[str, LaneSpec], profile: str, *, local: bool
) -> None:
    """A local run's rag corpus or probes file that is missing or empty: one ``rag.field: path: reason`` line."""
    if "rag" not in configs or not local:
        return
    built = built_config(specs["rag"], profile, configs["rag"], "corpus")
    if built is None:
        return
    from pipeline.lane_configs.rag import file_problems

    problems = file_problems(built)
    if problems:
        raise LaneConfigInvalidError("\n".join(f"rag.{p}" for p in problems))
