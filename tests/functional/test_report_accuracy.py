"""The accuracy lane's results in the report, on a small committed store (no server, no model): the Accuracy section
(per task with Wilson intervals, failed samples counted, a refused task with its reason), the paired verdicts (a
clearly better fine-tune is `better`, an identical one `within noise`, a speculative variant that answers worse is
`worse` with its exactness flagged, one that answers alike is 100 % exact), the Decision's and Variants' accuracy
column with the faster-but-worse flag, and `compare`'s accuracy deltas and exit code."""

from __future__ import annotations

import json

import pytest

from analytics.report.comparison import build_comparison, dumps
from analytics.report.document import Comparison
from analytics.report.markdown import render
from analytics.report.sides import exit_code
from analytics.store import LocalStore
from analytics.views import connect
from control_plane.cli import main
from tests.support.accuracy import Evaluation, commit_accuracy, commit_variant_sweep

SPECULATIVE = {"speculative": {"method": "ngram", "num_speculative_tokens": 4}}
N = 60
BASE = tuple(i < 30 for i in range(N))  # 30 / 60
FINETUNE = tuple(True if i < 50 else (None if i >= 58 else False) for i in range(N))  # 20 more right, 2 failed
WORSE = tuple(i < 10 for i in range(N))  # 10 / 60: 20 right answers lost
ARC = tuple(i % 3 == 0 for i in range(N))  # 20 / 60 everywhere


def _report(store: LocalStore, runs: list[str]) -> tuple[dict, str]:
    con = connect(store, run_ids=runs)
    try:
        c = json.loads(dumps(build_comparison(con, runs)))
    finally:
        con.close()
    return c, render(Comparison.model_validate(c))


def _section(md: str, heading: str) -> str:
    return md.split(heading, 1)[1].split("\n## ", 1)[0]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    s = LocalStore(tmp_path_factory.mktemp("acc") / "results")
    # S: speculative decoding on A, three times faster to the first token
    commit_variant_sweep(s, "r1", {"A": (None, {}, 1.0), "S": ("A", SPECULATIVE, 0.3)}, repeats=6)
    commit_accuracy(
        s,
        "r1",
        [
            Evaluation("gsm8k", BASE),
            Evaluation("gsm8k", FINETUNE, variant="finetune"),
            Evaluation("arc", ARC),
            Evaluation("arc", ARC, variant="finetune"),
            # the lane names a variant's evaluation of the base model after its config (variant = server_config)
            Evaluation(
                "gsm8k", WORSE, variant="S", server_config="S", outputs=tuple(f"spec-{i}" for i in range(N))
            ),  # every output differs from A's
            Evaluation("arc", ARC, server_config="S"),  # A's outputs exactly (variant "base": also paired)
            Evaluation(
                "hellaswag",
                (),
                status="refused",
                reason="multiple_choice needs prompt logprobs; the server returns none",
            ),
        ],
    )
    # r2: the same base model evaluated again, gsm8k worse (12 / 60), arc the same
    commit_accuracy(s, "r2", [Evaluation("gsm8k", tuple(i < 12 for i in range(N))), Evaluation("arc", ARC)])
    # r0: serving only (no accuracy rows)
    commit_variant_sweep(s, "r0", {"A": (None, {}, 1.0)}, repeats=1)
    return s


@pytest.fixture(scope="module")
def report(store):
    """One build for the whole module (each takes seconds): r1's sections, and r2 against r1 in ``deltas``."""
    return _report(store, ["r1", "r2"])


def test_accuracy_section_lists_each_task_with_its_wilson_interval_and_the_refused_task(report):
    c, md = report
    a = c["accuracy"]
    assert a["available"] and a["method"]["correction"] == "holm"
    by = {(e["variant"], e["server_config"], e["task"]): e for e in a["evaluations"] if e["run_id"] == "r1"}
    gsm = by[("base", "A", "gsm8k")]
    assert (gsm["n"], gsm["correct"], gsm["accuracy"]) == (60, 30, 0.5)
    ft = by[("finetune", "A", "gsm8k")]
    assert (ft["samples"], ft["n"], ft["failed"], ft["correct"]) == (60, 58, 2, 50)
    section = _section(md, "## Accuracy")
    # Wilson 30/60: 0.5 ± z·√(15 + z²/4)/(60 + z²) -> [37.7, 62.3]
    assert "| r1 | accuracy | tiny-llama | base | A | gsm8k | exact_match | 60 | 50.0 % [37.7, 62.3] | 0 |" in section
    assert by[("S", "S", "gsm8k")]["model_variant"] == "base"
    assert "| 58 | 86.2 % [75.1, 92.8] | 2 |" in section  # 50 / 58 scored, the 2 failed counted apart
    assert "`hellaswag`: **refused** — multiple_choice needs prompt logprobs; the server returns none" in section
    [refused] = a["not_ok"]
    assert refused["task"] == "hellaswag" and refused["status"] == "refused"


def test_paired_verdicts_better_within_noise_worse_and_exactness_where_lossless(report):
    c, md = report
    pairs = {(p["kind"], p["config_b"], p["variant_b"], p["task"]): p for p in c["accuracy"]["pairs"]}
    assert {p["run_id_a"] for p in c["accuracy"]["pairs"]} == {"r1"}  # r2 has no pair within it
    better = pairs[("finetune", "A", "finetune", "gsm8k")]
    assert (better["n"], better["b"], better["c"], better["excluded_failed"]) == (58, 0, 20, 2)
    assert better["verdict"] == "better" and better["delta_ci_low"] > 0 and better["p_holm"] < 0.05
    same = pairs[("finetune", "A", "finetune", "arc")]
    assert (same["b"], same["c"], same["mcnemar_p"], same["verdict"]) == (0, 0, 1.0, "within noise")
    assert not same["lossless_expected"]  # a fine-tune is not expected to answer alike
    worse = pairs[("configs", "S", "base", "gsm8k")]
    assert worse["verdict"] == "worse" and worse["baseline"] == "A" and worse["lossless_expected"]
    assert worse["identical_share"] == 0.0 and worse["exactness_flagged"]
    # the variant's accuracy tests share the Holm family of its serving comparison's run-level tests
    assert "run-level test(s) and 2 accuracy test(s)" in worse["holm_family"]
    assert worse["holm_tests"] > 2 and worse["p_holm"] >= worse["mcnemar_p"]
    exact = pairs[("configs", "S", "base", "arc")]
    assert exact["identical_share"] == 1.0 and not exact["exactness_flagged"] and exact["verdict"] == "within noise"
    section = _section(md, "### Paired verdicts")
    assert "| r1 | finetune vs base on `A` | tiny-llama | finetune | gsm8k | 58 | 2 failed |" in section
    assert "| better |" in section and "| within noise |" in section and "| worse |" in section
    assert "0.0 % ⚠ below 100 %" in section and "| 100.0 % |" in section


def test_a_faster_but_worse_variant_is_flagged_in_variants_and_decision(report):
    c, md = report
    [flag] = c["accuracy"]["flags"]
    assert flag["server_config"] == "S" and flag["baseline"] == "A" and flag["worse_tasks"] == ["gsm8k"]
    assert any("ttft" in m for m in flag["faster_metrics"])
    variants = _section(md, "## Variants")
    [s_row] = [line for line in variants.splitlines() if line.startswith("| r1 | serve_sweep | tiny-llama | S |")]
    assert "gsm8k 16.7 % [9.3, 28.0] (worse than A)" in s_row and "⚠ faster but worse" in s_row
    [a_row] = [line for line in variants.splitlines() if line.startswith("| r1 | serve_sweep | tiny-llama | A |")]
    assert "gsm8k 50.0 % [37.7, 62.3]" in a_row and "hellaswag refused" in a_row and "⚠" not in a_row
    assert "**⚠ faster but worse:** faster on some serving metric above" in variants
    decision = _section(md, "## Decision")
    assert "accuracy per task [95 % CI]" in decision
    [d_row] = [line for line in decision.splitlines() if line.startswith("| r1 | serve_sweep | tiny-llama | S |")]
    assert d_row.rstrip().endswith("⚠ faster but worse |")


def test_compare_between_runs_has_accuracy_deltas_and_a_worse_accuracy_fails_it(report, store, capsys):
    c, md = report
    [entry] = c["deltas"]  # r2 against r1: side_deltas, what `compare r1 r2` prints
    rows = {r["task"]: r for r in entry["accuracy"]}
    gsm = rows["gsm8k"]
    assert (gsm["accuracy_a"], gsm["accuracy_b"], gsm["n"], gsm["b"], gsm["c"]) == (0.5, 0.2, 60, 18, 0)
    assert gsm["delta"] == pytest.approx(-0.3) and gsm["verdict"] == "worse" and gsm["regression"]
    assert rows["arc"]["verdict"] == "within noise" and not rows["arc"]["regression"]
    assert entry["accuracy_tests"] == 2 and "2 accuracy test(s)" in gsm["holm_family"]
    assert any(k.startswith("accuracy · accuracy tiny-llama finetune A") for k in entry["only_baseline"])
    assert exit_code(entry) == 1
    side = _section(md, "## Runs side by side")
    assert "Accuracy per task" in side and "| accuracy · accuracy tiny-llama base A · gsm8k |" in side
    assert main(["compare", "r1", "r2", "--results", str(store.root)]) == 1
    out = capsys.readouterr().out
    assert "accuracy · accuracy tiny-llama base A · gsm8k" in out and "worse (regression)" in out
    assert "accuracy: 0 better, 1 worse, 1 within noise, 0 untested; 1 regression(s) beyond 5 %" in out
    # the same documents the other way round: better, never a regression
    flipped = [dict(r, verdict="better", pct=-r["pct"]) for r in entry["accuracy"] if r["task"] == "gsm8k"]
    assert exit_code({"rows": [], "accuracy": flipped}) == 0


def test_compare_two_configs_includes_the_variants_accuracy(report):
    c, _ = report
    [e] = [e for e in c["variants"]["comparisons"] if e["run_id"] == "r1" and e["variant"] == "S"]
    entry = e["deltas"]  # config_deltas: what `compare r1 --config A --vs S` prints
    acc = {t["task"]: t for t in entry["accuracy"]}
    assert acc["gsm8k"]["verdict"] == "worse" and acc["arc"]["verdict"] == "within noise"
    assert entry["accuracy_tests"] == 2 and exit_code(entry) == 1


def test_a_store_without_accuracy_rows_says_one_line_and_adds_no_column(store):
    c0, md0 = _report(store, ["r0"])
    assert not c0["accuracy"]["available"] and c0["accuracy"]["pairs"] == []
    assert (
        _section(md0, "## Accuracy").strip()
        == "_No accuracy results (the accuracy lane has not committed) in these results._"
    )
    assert "accuracy per task" not in md0
