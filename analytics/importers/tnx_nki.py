"""torchneuronx ``trn1/results/extras/nki_*`` (its NKI row-softmax kernel) → the ``nki`` lane's ``kernel_checks``.

* ``nki_sim.json`` (+ ``nki_sim.log``) → the ``simulate`` row: ``nki.simulate`` against its numpy reference on a
  seeded input of the recorded shape, the max abs error as recorded; its gate was ``max_err < 1e-5`` (its script), so
  ``tol_max_abs`` 1e-5, no relative tolerance (NULL), and ``outside_tolerance`` 0 where it recorded ``correct``.
  The input dtype is not in the receipt: NULL.
* ``nki_device.json`` (+ ``nki_device.log``, ``nki_device.telemetry.csv``) → the ``compile`` row: a failed device
  attempt (``status`` ``device_failed``); its error is the compiler's own line from the log (the JSON's ``reason`` is
  cut at 400 characters, before it), classified (``pipeline.kernel_errors``); the compile's wall time is not recorded
  (NULL). The telemetry CSV lands in ``telemetry``.

No ``device`` row and no timings: the device run never got past the compile.
"""

from __future__ import annotations

import math
from typing import Any

from analytics.importers.common import LaneImport, load_json, num, parse_time, telemetry_table
from analytics.importers.source import Tree
from pipeline.kernel_errors import classify, compiler_line, error_code

EXTRAS = "trn1/results/extras/"
SIM, DEVICE = EXTRAS + "nki_sim.json", EXTRAS + "nki_device.json"
KERNEL = "row_softmax"
KERNEL_FILE = "extras/nki_softmax.py"  # the source's kernel script, relative to its repository
SIM_GATE_MAX_ABS = 1e-5  # its script: correct = max_err < 1e-5
VERSION_NOTE = "nki 0.5.0"  # its device receipt: "nki 0.5.0 API attempted per on-box inventory"


def _shape(d: dict[str, Any]) -> tuple[str | None, int | None]:
    shape = d.get("shape")
    if isinstance(shape, list) and shape and all(isinstance(x, int) for x in shape):
        return "x".join(str(x) for x in shape), math.prod(shape)
    return None, None


def nki_lane(tree: Tree, files: list[str]) -> LaneImport | None:
    """The nki lane from the source's receipts (None: it has none)."""
    if SIM not in files and DEVICE not in files:
        return None
    li = LaneImport("nki", "trn1")
    base = {"kernel": KERNEL, "kernel_function": KERNEL, "kernel_file": KERNEL_FILE, "shape_index": 0}
    version = None
    if DEVICE in files:
        device = load_json(tree, DEVICE)
        if VERSION_NOTE in str(device.get("nki_note") or ""):
            version = VERSION_NOTE.split()[1]
    if SIM in files:
        d = load_json(tree, SIM)
        shape, elements = _shape(d)
        correct = d.get("correct")
        li.add(
            "kernel_checks",
            {
                **base,
                "shape": shape,
                "stage": "simulate",
                "outcome": "ok",
                "reference": "numpy:numpy_reference",
                "elements": elements,
                "max_abs_err": num(d.get("max_abs_err_vs_numpy")),
                "outside_tolerance": 0 if correct is True else None,
                "tol_max_abs": SIM_GATE_MAX_ABS,
                "wall_s": num(d.get("simulate_wall_s")),
                "seed": d.get("seed"),
                "nki_version": version,
                "backend": "neuron",
                "ts": parse_time(d.get("captured")),
            },
        )
        li.paths += [SIM] + [p for p in (EXTRAS + "nki_sim.log",) if p in files]
        li.ended_at = max(filter(None, [li.ended_at, parse_time(d.get("captured"))]), default=None)
    if DEVICE in files:
        d = load_json(tree, DEVICE)
        captured = parse_time(d.get("captured"))
        log_path = EXTRAS + "nki_device.log"
        log = tree.text(log_path) if log_path in files else ""
        reason = str(d.get("reason") or "")
        failed = str(d.get("status") or "").endswith("_failed")
        error = (compiler_line(log) or compiler_line(reason) or reason or str(d.get("status"))) if failed else None
        li.add(
            "kernel_checks",
            {
                **base,
                "shape": None,  # the device receipt records none (the simulate row's is the script's one tile)
                "stage": "compile",
                "outcome": "error" if failed else "ok",
                "error": error,
                "error_class": classify(f"{reason}\n{error}") if failed else None,
                "error_code": error_code(error) if failed else None,
                "error_type": reason.split("(", 1)[0] or None if failed else None,
                "seed": None,
                "nki_version": version,
                "backend": "neuron",
                "ts": captured,
            },
        )
        li.paths += [DEVICE] + [p for p in (log_path,) if p in files]
        csv_path = EXTRAS + "nki_device.telemetry.csv"
        if csv_path in files:
            li.add_table("telemetry", telemetry_table(tree, csv_path, captured))
            li.paths.append(csv_path)
        li.ended_at = max(filter(None, [li.ended_at, captured]), default=None)
    return li
