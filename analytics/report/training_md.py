"""REPORT.md's training additions: the checkpoint saves under the Training section, and the From-scratch training
section (shown only when a run holds such rows). Render stage: every number is a view's, read from comparison.json.
"""
from __future__ import annotations

from typing import Any

from analytics.report.document import Comparison
from analytics.report.format import table


def _pct(x: Any) -> str:
    return "NULL" if x is None else f"{100.0 * x:.1f} %"


def checkpoint_saves(c: Comparison) -> list[str]:
    rows = c.training.saves
    if not rows:
        return []
    lines = ["### Checkpoint saves", "",
             "Mid-run checkpoints (sft's `save_every_steps`), each timed around the trainer's own save call: the "
             "weights, and for `full_state` the optimizer, scheduler and RNG state too. Share of the run = summed "
             "save seconds / the training loop's wall time.", ""]
    shown = [{**r, "share": _pct(r.get("save_share"))} for r in rows]
    return lines + table(shown, [("run_id", "run"), ("lane", "lane"), ("model", "model"), ("saves", "saves"),
                                 ("kinds", "kind"), ("median_save_s", "median save s"),
                                 ("max_save_s", "max save s"), ("mb_per_save", "MB per save"),
                                 ("total_save_s", "total save s"), ("train_loop_s", "loop wall s"),
                                 ("share", "share of the run")])


def _acc(r: dict[str, Any]) -> str:
    if r.get("accuracy") is None:
        return "NULL"
    return f"{100 * r['accuracy']:.1f} % [{100 * r['accuracy_ci_low']:.1f}, {100 * r['accuracy_ci_high']:.1f}]"


def _range(r: dict[str, Any]) -> str:
    lo, hi = r.get("reference_acc_low"), r.get("reference_acc_high")
    if lo is None and hi is None:
        return ""
    return f"{100 * lo:.0f} %" if lo == hi else f"{100 * lo:.0f}–{100 * hi:.0f} %"


def s_from_scratch(c: Comparison) -> list[str]:
    rows = c.from_scratch.runs
    if not rows:
        return []
    lines = ["## From-scratch training", "",
             "Small vision models trained from scratch. Test accuracy after the last epoch with its Wilson 95 % "
             "interval; chance = 1 / classes. The first steps are kept apart from the steady step time (the first "
             "holds XLA's compile on neuron): steady = the median of the rest, samples/s = batch / steady step. "
             "`imported` rows are another harness's measurements, `reference` rows figures measured elsewhere as "
             "their source states them (an accuracy range, nothing re-measured).", ""]
    measured = [{**r, "acc": _acc(r), "chance": _pct(r.get("chance_accuracy")), "best": _pct(r.get("best_accuracy"))}
                for r in rows if r.get("source") != "reference"]
    lines += table(measured, [("run_id", "run"), ("dataset", "dataset"), ("source", "source"), ("device", "device"),
                              ("model", "model"), ("params", "params"), ("image_shape", "image"),
                              ("train_samples", "train"), ("test_samples", "test"), ("epochs", "epochs"),
                              ("acc", "test acc [95 % CI]"), ("best", "best"), ("chance", "chance"),
                              ("first_step_s", "first step s"), ("steady_step_s", "steady step s"),
                              ("samples_per_s", "samples/s"), ("train_wall_s", "wall s")])
    refs = [{**r, "range": _range(r)} for r in rows if r.get("source") == "reference"]
    if refs:
        lines += ["Reference figures (measured elsewhere):", ""]
        lines += table(refs, [("dataset", "dataset"), ("device", "device"), ("model", "model"),
                              ("range", "test acc (stated)"), ("source_note", "source")])
    if c.from_scratch.epochs:
        lines += ["Per epoch:", ""]
        lines += table([{**e, "acc": _acc(e)} for e in c.from_scratch.epochs],
                       [("run_id", "run"), ("dataset", "dataset"), ("source", "source"), ("model", "model"),
                        ("epoch", "epoch"), ("train_loss", "train loss"), ("acc", "test acc [95 % CI]"),
                        ("steady_step_s", "steady step s"), ("samples_per_s", "samples/s"), ("epoch_s", "epoch s")])
    return lines
