"""comparison.json ``accuracy``: the accuracy lane's results per task and the paired verdicts, and the accuracy rows
of a comparison (``compare`` between runs, and between two server configs of one run).

Every number is a view's (43_report_accuracy.sql, docs/reference/metrics.md "Accuracy"): accuracy per task with its
Wilson interval (``report_accuracy``), and per pair of evaluations on the same documents the delta B − A with
Newcombe's paired interval and the exact McNemar p (``accuracy_pair_tests``). What Python adds is what the SQL cannot
hold: the Holm adjustment, because a comparison's family also holds its run-level tests (computed here, in
:mod:`analytics.report.run_level`), and the verdict rule (:func:`verdict`) on the adjusted p.

Families (each adjusted once, together):

* a variant against its baseline in a run: the accuracy tests of every model, variant and task, together with the
  serving comparison's run-level tests (:func:`analytics.report.compare.config_deltas`); with no serving comparison
  of the two configs (no headline point of one of them) the accuracy tests alone;
* base against fine-tune on one server config of a run: every model and task;
* run B against run A (``compare``): the accuracy rows together with the comparison's run-level tests.

Data stage: imports no render module.
"""
from __future__ import annotations

from typing import Any, Iterable

from analytics.report.rows import clean, rows
from analytics.report.run_level import ALPHA

TASKS_VIEW = "report_accuracy"
PAIRS_VIEW = "report_accuracy_pairs"
TESTS_VIEW = "accuracy_pair_tests"
VERDICTS = ("better", "worse", "within noise", "untested")
METHOD = {
    "accuracy": "correct / scored samples, per task (never averaged across tasks); a failed sample (its request "
                "failed) is excluded and counted",
    "interval": "Wilson score interval, 95 % (z = 1.959963984540054)",
    "paired_interval": "Newcombe (1998) method 10: hybrid score interval for a paired difference of proportions, "
                       "from each side's Wilson bounds and the outcomes' correlation (phi with the n/2 correction)",
    "test": "exact McNemar: two-sided binomial test of the discordant pairs b (A right, B wrong) and c (A wrong, B "
            "right) against 1/2; p = 1 when b + c = 0",
    "correction": "holm",
    "alpha": ALPHA,
    "verdict_rule": "better / worse (by the sign of acc B − acc A) when the Holm-adjusted McNemar p < alpha and the "
                    "95 % interval of the delta excludes 0 on its side; within noise otherwise; untested without a "
                    "paired sample",
    "exactness": "share of paired samples whose outputs are identical (equal prediction_hash), shown where the "
                 "variant is expected to be lossless under greedy decoding (speculative decoding, prefix caching "
                 "or an A/A copy, nothing else changed: accuracy_config_baselines); flagged below 100 %",
}


def verdict(delta: float | None, low: float | None, high: float | None, p_holm: float | None,
            alpha: float = ALPHA) -> str:
    """``better`` / ``worse`` / ``within noise`` / ``untested`` (the rule in :data:`METHOD`)."""
    if None in (delta, low, high, p_holm):
        return "untested"
    if p_holm < alpha and delta != 0 and (low > 0 if delta > 0 else high < 0):
        return "better" if delta > 0 else "worse"
    return "within noise"


def is_regression(row: dict[str, Any], fail_pct: float) -> bool:
    """A ``worse`` accuracy whose relative drop |pct| = 100·|delta|/acc A reaches the fail threshold (compare's
    rule for a ``slower`` latency, docs/explanation/compare.md)."""
    pct = row.get("pct")
    return row.get("verdict") == "worse" and pct is not None and abs(pct) >= fail_pct


def tested(tests: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tests that enter a Holm family: those with a McNemar p (a pair with no scored document has none)."""
    return [t for t in tests if t.get("mcnemar_p") is not None]


def decide(tests: Iterable[dict[str, Any]], fail_pct: float | None = None) -> None:
    """Each test's pct, verdict (on its ``p_holm``) and, with ``fail_pct``, whether it is a regression."""
    for t in tests:
        a, d = t.get("acc_a"), t.get("delta")
        t["pct"] = 100.0 * d / a if a and d is not None else None
        t["verdict"] = verdict(d, t.get("delta_ci_low"), t.get("delta_ci_high"), t.get("p_holm"))
        if fail_pct is not None:
            t["regression"] = is_regression(t, fail_pct)


def holm_alone(tests: list[dict[str, Any]], family: str) -> None:
    """Holm over ``tests`` alone (a family without run-level tests): sets p_holm, holm_tests, holm_family."""
    from analytics.report.stats import holm

    mine = tested(tests)
    for t, p in zip(mine, holm([t["mcnemar_p"] for t in mine])):
        t["p_holm"] = p
    for t in tests:
        t.setdefault("p_holm", None)
        t["holm_tests"], t["holm_family"] = len(mine), family


def _present(con: Any) -> set[str]:
    return {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}


# ---- comparisons: two configs of one run, two runs -----------------------------------------------------------------
def config_tests(con: Any, runs: list[str], config_a: str, config_b: str) -> list[dict[str, Any]]:
    """The accuracy pair tests of server config B against A in ``runs`` (each run's own pairs; B may be a
    multi-tenant variant's ``NAME.alone``, whose evaluations are NAME's)."""
    if con is None or TESTS_VIEW not in _present(con):
        return []
    return rows(con, f"""SELECT * FROM {TESTS_VIEW} WHERE kind = 'configs' AND list_contains(?, run_id_a)
                         AND config_a = ? AND (config_b = ? OR config_b = regexp_replace(?, '\\.alone$', ''))
                         ORDER BY run_id_a, lane_a, model, variant_a, task, eval_id_a, eval_id_b""",
                [sorted(runs), config_a, config_b, config_b])


def row_key(r: dict[str, Any]) -> str:
    """``accuracy · LANE MODEL MODEL_VARIANT CONFIG · TASK``: an accuracy row's key in a comparison (a metric's)."""
    return f"accuracy · {r.get('lane')} {r.get('model')} {r.get('model_variant')} {r.get('server_config')} · " \
           f"{r.get('task')}"


_SETTINGS = ("task_source", "metric", "output_type", "num_fewshot")


def _why_unpaired(a: dict[str, Any], b: dict[str, Any]) -> str:
    differ = [f"{k} {a.get(k)!r} vs {b.get(k)!r}" for k in _SETTINGS if a.get(k) != b.get(k)]
    if differ:
        return "not paired: the evaluations differ in " + ", ".join(differ)
    if "refused" in (a.get("status"), b.get("status")):
        return "not paired: refused on one side (" + str((a if a.get("status") == "refused" else b).get("reason")) + ")"
    return "not paired: no document evaluated on both sides"


def run_tests(con: Any, runs_a: list[str], runs_b: list[str]) -> dict[str, Any]:
    """{"rows", "only_baseline", "only_run", "note"}: each evaluation key of run B against run A (a, b: each
    run's accuracy over its own documents; the paired test over the documents both evaluated)."""
    out: dict[str, Any] = {"rows": [], "only_baseline": [], "only_run": [], "note": None}
    if con is None or TASKS_VIEW not in _present(con):
        return out
    evals = rows(con, f"SELECT * FROM {TASKS_VIEW} WHERE list_contains(?, run_id) ORDER BY ALL",
                 [sorted({*runs_a, *runs_b})])
    if not evals:
        return out
    if len(runs_a) != 1 or len(runs_b) != 1:
        out["note"] = ("accuracy is compared one run against one run (the paired test holds each document fixed); "
                       f"this comparison has {len(runs_a)} v {len(runs_b)} runs: compare the runs pairwise")
        return out
    ka = {row_key(e): e for e in evals if e["run_id"] == runs_a[0]}
    kb = {row_key(e): e for e in evals if e["run_id"] == runs_b[0]}
    pairs = {(t["eval_id_a"], t["eval_id_b"]): t for t in rows(
        con, f"SELECT * FROM {TESTS_VIEW} WHERE kind = 'runs' AND run_id_a = ? AND run_id_b = ?",
        [runs_a[0], runs_b[0]])}
    for key in sorted(set(ka) & set(kb)):
        a, b = ka[key], kb[key]
        row: dict[str, Any] = {"metric": key, "task_metric": a.get("metric"),
                               **{k: a.get(k) for k in ("lane", "model", "model_variant", "server_config",
                                                        "task")}}
        for side, e in (("a", a), ("b", b)):
            row.update({f"accuracy_{side}": e.get("accuracy"), f"accuracy_{side}_ci_low": e.get("accuracy_ci_low"),
                        f"accuracy_{side}_ci_high": e.get("accuracy_ci_high"), f"n_{side}": e.get("n"),
                        f"failed_{side}": e.get("failed"), f"status_{side}": e.get("status")})
        t = pairs.get((a["eval_id"], b["eval_id"]))
        row.update({k: v for k, v in (t or {}).items() if k not in row})
        row.setdefault("mcnemar_p", None)
        row["note"] = None if t else _why_unpaired(a, b)
        out["rows"].append(row)
    out["only_baseline"], out["only_run"] = sorted(set(ka) - set(kb)), sorted(set(kb) - set(ka))
    return out


def verdict_counts(tests: Iterable[dict[str, Any]]) -> dict[str, int]:
    tests = list(tests)
    return {v: sum(t.get("verdict") == v for t in tests) for v in VERDICTS}


# ---- the report's section ------------------------------------------------------------------------------------------
def pair_id(t: dict[str, Any]) -> tuple:
    return (t.get("run_id_a"), t.get("lane_a"), t.get("eval_id_a"), t.get("run_id_b"), t.get("lane_b"),
            t.get("eval_id_b"))


def cell_of(lane: Any) -> str | None:
    """A matrix cell's lanes commit as ``<lane>@<cell>``: the cell, or None for a lane outside a matrix."""
    return str(lane).split("@", 1)[1] if lane and "@" in str(lane) else None


def _joint_tests(c: dict[str, Any]) -> dict[tuple, tuple[dict[str, Any], dict[str, Any]]]:
    """{pair id: (its test as the variant comparison adjusted it, the comparison entry)}."""
    out = {}
    for e in (c.get("variants") or {}).get("comparisons") or []:
        for t in (e.get("deltas") or {}).get("accuracy") or []:
            out[pair_id(t)] = (t, e)
    return out


def _pairs(con: Any, c: dict[str, Any]) -> list[dict[str, Any]]:
    """report_accuracy_pairs with p_holm, holm_tests, holm_family and the verdict of each row's family."""
    pairs = rows(con, f"""SELECT * FROM {PAIRS_VIEW} ORDER BY run_id_a, kind DESC, config_a NULLS FIRST,
                          config_b NULLS FIRST, lane_a, model, variant_a, task, eval_id_a, eval_id_b""")
    joint = _joint_tests(c)
    alone: dict[tuple, list[dict[str, Any]]] = {}
    for p in pairs:
        hit = joint.get(pair_id(p)) if p["kind"] == "configs" else None
        if hit is not None:  # adjusted with the serving comparison's run-level tests (compare.config_deltas)
            t, _ = hit
            p.update(p_holm=t.get("p_holm"), holm_tests=t.get("holm_tests"), holm_family=t.get("holm_family"))
        elif p["kind"] == "finetune":
            alone.setdefault(("finetune", p["run_id_a"], p["config_a"]), []).append(p)
        else:
            alone.setdefault(("configs", p["run_id_a"], p["config_a"], p["config_b"]), []).append(p)
    for key, tests in alone.items():
        n = len(tested(tests))
        family = (f"{key[1]}: finetune vs base on {key[2]} ({n} accuracy test(s))" if key[0] == "finetune" else
                  f"{key[1]}: {key[3]} vs {key[2]} ({n} accuracy test(s); no serving comparison of these configs)")
        holm_alone(tests, family)
    decide(pairs)
    return pairs


def _faster(c: dict[str, Any]) -> dict[tuple[str, str, str], list[str]]:
    """{(run, baseline, variant config): the serving metrics the variant is `faster` on}."""
    out: dict[tuple[str, str, str], list[str]] = {}
    for e in (c.get("variants") or {}).get("comparisons") or []:
        if e.get("isolation"):
            continue
        fast = [r["metric"].rsplit(" · ", 1)[-1] for r in (e.get("deltas") or {}).get("rows") or []
                if r.get("verdict") == "faster"]
        variant = str(e["variant"]).removesuffix(".alone")
        out[(e["run_id"], e["baseline"], variant)] = sorted(set(fast))
    return out


def _configs(evaluations: list[dict[str, Any]], pairs: list[dict[str, Any]],
             faster: dict[tuple[str, str, str], list[str]]) -> list[dict[str, Any]]:
    """Per (run, lane, model, variant, server config): its accuracy per task and its verdicts against what it is
    paired with (its baseline config; the base model for a fine-tune), and whether it is faster but worse."""
    out: dict[tuple, dict[str, Any]] = {}
    for e in evaluations:
        key = (e["run_id"], e["lane"], e["model"], e["model_variant"], e["server_config"])
        entry = out.setdefault(key, {"run_id": e["run_id"], "lane": e["lane"], "cell": cell_of(e["lane"]),
                                     "model": e["model"], "variant": e["model_variant"],
                                     "server_config": e["server_config"], "tasks": [], "vs": [],
                                     "faster_metrics": [], "worse_tasks": [], "faster_but_worse": False})
        entry["tasks"].append({k: e.get(k) for k in ("task", "metric", "status", "reason", "n", "correct", "failed",
                                                     "accuracy", "accuracy_ci_low", "accuracy_ci_high")})
    for p in pairs:
        entry = out.get((p["run_id_b"], p["lane_b"], p["model"], p["variant_b"], p["config_b"]))
        if entry is None:
            continue
        against = p["config_a"] if p["kind"] == "configs" else "base"
        entry["vs"].append({"task": p["task"], "kind": p["kind"], "against": against, "delta": p["delta"],
                            "delta_ci_low": p["delta_ci_low"], "delta_ci_high": p["delta_ci_high"],
                            "p_holm": p["p_holm"], "verdict": p["verdict"],
                            "identical_share": p["identical_share"] if p.get("lossless_expected") else None,
                            "exactness_flagged": p.get("exactness_flagged")})
        if p["kind"] == "configs" and p["verdict"] == "worse":
            fast = faster.get((p["run_id_b"], p["config_a"], str(p["config_b"])), [])
            entry["faster_metrics"] = sorted(set(entry["faster_metrics"]) | set(fast))
            entry["worse_tasks"] = sorted(set(entry["worse_tasks"]) | {p["task"]})
            entry["baseline"] = p["config_a"]
    for entry in out.values():
        entry["faster_but_worse"] = bool(entry["faster_metrics"] and entry["worse_tasks"])
    return [out[k] for k in sorted(out, key=lambda k: tuple(str(x) for x in k))]


def config_accuracy(configs: list[dict[str, Any]], run_id: Any, lane: Any, model: Any, server_config: Any) -> (
        dict[str, Any] | None):
    """The entry of the accuracy section's ``configs`` for a Decision or Variants row: same run, model and server
    config, the same matrix cell, and the fine-tune where the row is the finetune_serve lane's (else the base
    model)."""
    variant = "finetune" if str(lane or "").split("@")[0] == "finetune_serve" else "base"
    cell = cell_of(lane)
    for e in configs:
        if (e["run_id"], e["model"], e["server_config"], e["variant"], e["cell"]) == \
                (run_id, model, server_config, variant, cell):
            return e
    return None


def accuracy_section(con: Any, c: dict[str, Any], present: set[str]) -> dict[str, Any]:
    """comparison.json ``accuracy`` (built after ``variants``, whose comparisons adjust their accuracy tests)."""
    empty = {"available": False, "method": METHOD, "evaluations": [], "not_ok": [], "pairs": [], "configs": [],
             "flags": []}
    if TASKS_VIEW not in present:
        return empty
    evaluations = rows(con, f"""SELECT * FROM {TASKS_VIEW}
                                ORDER BY run_id, lane, model, variant, server_config NULLS FIRST, task, eval_id""")
    if not evaluations:
        return empty
    pairs = _pairs(con, c) if PAIRS_VIEW in present else []
    configs = _configs(evaluations, pairs, _faster(c))
    flags = [{k: e.get(k) for k in ("run_id", "lane", "model", "variant", "server_config", "baseline",
                                    "faster_metrics", "worse_tasks")} for e in configs if e["faster_but_worse"]]
    return clean({**empty, "available": True, "evaluations": evaluations, "pairs": pairs, "configs": configs,
                  "flags": flags,
                  "not_ok": [{k: e.get(k) for k in ("run_id", "lane", "model", "variant", "server_config", "task",
                                                     "status", "reason", "samples", "failed")}
                             for e in evaluations if e.get("status") not in ("ok", None)]})
