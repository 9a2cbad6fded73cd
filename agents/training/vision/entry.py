"""The from_scratch lane's training in a process of its own: on a Trainium box under the DLAMI venv's interpreter
(torch-neuronx's XLA lives there, not in the harness venv), as
``python -m agents.training.vision.entry --spec SPEC --out OUT``.

SPEC (JSON): ``backend``, ``dataset`` (a local ``.npz`` path) and ``config`` (the lane's config fields). OUT gets one
JSON line per model trained, :class:`agents.training.vision.loop.ScratchResult` as a dict, written as each model
finishes, so a crash keeps the models before it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from types import SimpleNamespace


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--spec", required=True)
    parser.add_argument("--out", required=True)
    ns = parser.parse_args(argv)
    with open(ns.spec, encoding="utf-8") as fh:
        spec = json.load(fh)

    from agents.training.vision.dataset import load
    from agents.training.vision.loop import device_for, train_one

    cfg = SimpleNamespace(**spec["config"])
    data = load(spec["dataset"])
    device = device_for(spec["backend"])
    for arch in cfg.models:
        result = train_one(arch, data, cfg, device, lambda done, total: None)
        with open(ns.out, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(dataclasses.asdict(result)) + "\n")


if __name__ == "__main__":
    main()
