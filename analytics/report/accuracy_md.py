"""REPORT.md's "Accuracy", the accuracy cell of the Decision and Variants tables, and the accuracy rows of a comparison
(REPORT.md's "Runs side by side" and ``neuronpipe compare``), rendered from comparison.json (``accuracy`` and each
deltas entry's ``accuracy``, built by :mod:`analytics.report.accuracy`)."""
from __future__ import annotations

from typing import Any

from analytics.report.accuracy import config_accuracy, verdict_counts
from analytics.report.document import Accuracy, Comparison
from analytics.report.format import fmt, none_line, table

FLAG = "⚠ faster but worse"


def pct(x: Any) -> str:
    """An accuracy as a percentage (``41.2 %``); NULL stays NULL."""
    return "NULL" if x is None else f"{100 * x:.1f} %"


def pp(x: Any, sign: bool = True) -> str:
    """A difference of accuracies in percentage points (``+3.5 pp``)."""
    return "NULL" if x is None else (f"{100 * x:+.1f}" if sign else f"{100 * x:.1f}")


def p_text(p: Any) -> str:
    return "NULL" if p is None else (f"{p:.3g}" if p >= 1e-4 else "<1e-4")


def with_interval(x: Any, low: Any, high: Any) -> str:
    """``41.2 % [33.0, 49.9]``: an accuracy and its Wilson 95 % interval, in %."""
    if x is None:
        return "NULL"
    return f"{pct(x)} [{pp(low, False)}, {pp(high, False)}]"


def delta_text(t: dict[str, Any]) -> str:
    """``+3.5 pp [−1.2, +8.0]``: the accuracy delta B − A and its paired 95 % interval."""
    if t.get("delta") is None:
        return "NULL"
    return f"{pp(t['delta'])} pp [{pp(t.get('delta_ci_low'))}, {pp(t.get('delta_ci_high'))}]"


def exactness_text(t: dict[str, Any]) -> str | None:
    """The identical-output share where the pair is expected lossless (else None: not shown)."""
    if not t.get("lossless_expected"):
        return None
    share = t.get("identical_share")
    if share is None:
        return "no hashes to compare"
    return f"{100 * share:.1f} %" + (" ⚠ below 100 %" if t.get("exactness_flagged") else "")


def verdict_text(t: dict[str, Any]) -> str:
    return str(t.get("verdict")) + (" (regression)" if t.get("regression") else "")


def summary(tests: list[dict[str, Any]], fail_pct: float | None = None) -> str:
    """``accuracy: 1 better, 0 worse, 2 within noise, 0 untested`` (with the regressions where judged)."""
    n = verdict_counts(tests)
    out = (f"accuracy: {n['better']} better, {n['worse']} worse, {n['within noise']} within noise, "
           f"{n['untested']} untested")
    if fail_pct is not None:
        out += f"; {sum(bool(t.get('regression')) for t in tests)} regression(s) beyond {fail_pct:g} %"
    return out


# ---- the Decision's and the Variants' column ---------------------------------------------------------------------
def accuracy_cell(c: Comparison, run_id: Any, lane: Any, model: Any, server_config: Any) -> str:
    """The row's accuracy per task with its interval (each task on its own, never averaged), its verdict against
    what it is paired with, and the flag of a variant faster than its baseline but less accurate."""
    e = config_accuracy(c.accuracy.configs, run_id, lane, model, server_config)
    if e is None:
        return "not evaluated"
    vs = {(v["task"], v["kind"]): v for v in e.get("vs") or []}
    parts = []
    for t in e["tasks"]:
        if t.get("status") not in ("ok", None) and not t.get("n"):
            parts.append(f"{t['task']} {t.get('status')}")
            continue
        text = f"{t['task']} {with_interval(t.get('accuracy'), t.get('accuracy_ci_low'), t.get('accuracy_ci_high'))}"
        v = vs.get((t["task"], "configs")) or vs.get((t["task"], "finetune"))
        if v is not None and v.get("verdict") in ("better", "worse"):
            text += f" ({v['verdict']} than {v['against']})"
        parts.append(text)
    cell = "; ".join(parts)
    if e.get("faster_but_worse"):
        cell += f" {FLAG}"
    return cell


# ---- the Accuracy section ----------------------------------------------------------------------------------------
TASK_COLUMNS = (("run_id", "run"), ("lane", "lane"), ("model", "model"), ("variant", "variant"),
                ("server_config", "config"), ("task", "task"), ("metric", "metric"), ("n", "scored"),
                ("accuracy", "accuracy [95 % CI]"), ("failed", "failed"), ("unscored", "unscored"),
                ("mean_latency_s", "mean latency s"), ("p50_latency_s", "p50 latency s"),
                ("lm_eval_score", "lm-eval score"), ("status", "status"))
PAIR_COLUMNS = (("run_id_a", "run"), ("pair", "B vs A"), ("model", "model"), ("variant_b", "variant"),
                ("task", "task"), ("n", "paired"), ("acc", "acc A → acc B"), ("delta", "Δ B − A [95 % CI]"),
                ("bc", "b / c"), ("mcnemar_p", "McNemar p"), ("p_holm", "Holm p (tests)"), ("verdict", "verdict"))


def _task_cell(r: dict[str, Any], k: str) -> Any:
    if k == "accuracy":
        return with_interval(r.get("accuracy"), r.get("accuracy_ci_low"), r.get("accuracy_ci_high"))
    return r.get(k)


def _pair_name(t: dict[str, Any]) -> str:
    if t["kind"] == "finetune":
        return f"finetune vs base on `{t.get('config_a')}`"
    return f"`{t.get('config_b')}` vs `{t.get('config_a')}`"


def pair_cell(t: dict[str, Any], k: str) -> Any:
    """A paired test's cell (the Accuracy section, the side-by-side and the Variants' lines)."""
    if k == "pair":
        return _pair_name(t)
    if k == "acc":
        return "NULL" if t.get("acc_a") is None else f"{pct(t['acc_a'])} → {pct(t.get('acc_b'))}"
    if k == "delta":
        return delta_text(t)
    if k == "bc":
        return f"{t.get('b')} / {t.get('c')}"
    if k == "mcnemar_p":
        return p_text(t.get("mcnemar_p"))
    if k == "p_holm":
        return "NULL" if t.get("p_holm") is None else f"{p_text(t['p_holm'])} ({t.get('holm_tests')})"
    if k == "verdict":
        return verdict_text(t)
    if k == "exact":
        return exactness_text(t) or "—"
    if k == "excluded":
        parts = [f"{t[x]} {w}" for x, w in (("excluded_failed", "failed"), ("excluded_target", "target differs"))
                 if t.get(x)]
        return ", ".join(parts) or "—"
    return t.get(k)


def s_accuracy(c: Comparison) -> list[str]:
    a = c.accuracy
    lines = ["## Accuracy", ""]
    if not a.available:
        return lines + none_line("accuracy results (the accuracy lane has not committed)")
    m = a.method
    lines += ["Accuracy per task = correct / scored samples, with its Wilson 95 % interval (docs/reference/metrics.md, "
              "Accuracy). A failed sample (its request failed) is excluded from the accuracy and counted; a sample "
              "without a 0/1 outcome is counted as unscored. Each task stands on its own: nothing here averages "
              "across tasks.", ""]
    scored = [r for r in a.evaluations if r.get("samples")]
    lines += table(scored, TASK_COLUMNS, _task_cell) if scored else none_line("scored evaluations")
    if a.not_ok:
        lines += ["Evaluations that did not complete:", ""]
        lines += [f"- `{r['run_id']}` {r.get('model')} {r.get('variant')} `{r.get('server_config')}` "
                  f"`{r['task']}`: **{r['status']}** — {fmt(r.get('reason'))}" for r in a.not_ok] + [""]
    lines += s_pairs(a, m)
    return lines


def s_pairs(a: Accuracy, m: dict[str, Any]) -> list[str]:
    pairs = a.pairs
    lines = ["### Paired verdicts: base vs fine-tune, variant vs baseline", ""]
    if not pairs:
        return lines + ["_No pair of evaluations on the same documents (base and fine-tune, or a variant and its "
                        "baseline, on one task in one run and lane)._", ""]
    lines += ["On the documents both sides scored (a document failed on either side is excluded and counted): the "
              "delta B − A with Newcombe's paired hybrid-score interval (method 10), the exact McNemar test on the "
              "discordant documents (b: A right, B wrong; c: A wrong, B right), Holm-adjusted with the comparison's "
              f"other tests (a variant's with its serving comparison's run-level tests). {m.get('verdict_rule', '')}."
              " Exact outputs: the share of documents whose outputs are identical, shown where the variant should "
              "be lossless under greedy decoding (speculative decoding, prefix caching or an A/A copy, nothing else "
              "changed), flagged below 100 %.", ""]
    cols = list(PAIR_COLUMNS)
    if any(t.get("excluded_failed") or t.get("excluded_target") for t in pairs):
        cols.insert(6, ("excluded", "excluded"))
    if any(t.get("lossless_expected") for t in pairs):
        cols.append(("exact", "exact outputs"))
    lines += table(pairs, cols, pair_cell)
    families = sorted({str(t.get("holm_family")) for t in pairs if t.get("holm_family")})
    lines += ["Holm families:"] + [f"- {f}" for f in families] + [""]
    for f in a.flags:
        lines += [f"**{FLAG}:** `{f['server_config']}` ({f.get('model')}, {f.get('variant')}, run `{f['run_id']}`) is "
                  f"faster than `{f.get('baseline')}` on {', '.join(f.get('faster_metrics') or [])} but less accurate "
                  f"on {', '.join(f.get('worse_tasks') or [])}.", ""]
    return lines


def variant_lines(tests: list[dict[str, Any]], faster: bool) -> list[str]:
    """A variant comparison's accuracy tests, under its serving rows in the Variants section."""
    if not tests:
        return []
    out = [f"Accuracy on the same documents ({summary(tests)}; Holm-adjusted with the run-level rows above):", ""]
    out += [f"- `{t.get('task')}` ({t.get('model')}, {t.get('variant_b')}): {pair_cell(t, 'acc')}, "
            f"Δ {delta_text(t)}, McNemar p {p_text(t.get('mcnemar_p'))}, Holm p {p_text(t.get('p_holm'))}: "
            f"**{t.get('verdict')}**" + (f"; exact outputs {exactness_text(t)}" if exactness_text(t) else "")
            for t in tests]
    if faster and any(t.get("verdict") == "worse" for t in tests):
        out += ["", f"**{FLAG}:** faster on some serving metric above, less accurate here."]
    return out + [""]


# ---- a comparison's accuracy rows: REPORT.md's side by side and `neuronpipe compare` ------------------------------
DELTA_COLUMNS = (("metric", "accuracy"), ("a", "baseline [95 % CI]"), ("b", "run [95 % CI]"), ("n", "paired"),
                 ("acc", "paired acc A → B"), ("delta", "Δ [95 % CI]"), ("bc", "b / c"), ("mcnemar_p", "McNemar p"),
                 ("p_holm", "Holm p (tests)"), ("verdict", "verdict"))


def delta_row_cell(r: dict[str, Any], k: str) -> Any:
    if k in ("a", "b"):
        return with_interval(r.get(f"accuracy_{k}"), r.get(f"accuracy_{k}_ci_low"), r.get(f"accuracy_{k}_ci_high"))
    if k == "verdict":
        return verdict_text(r) + (f" ({r['note']})" if r.get("note") else "")
    return pair_cell(r, k)


def delta_lines(entry: dict[str, Any], fail_pct: float, markdown: bool = True) -> list[str]:
    """The accuracy rows of a deltas entry: a Markdown table, or plain lines for the CLI."""
    tests = entry.get("accuracy") or []
    note = entry.get("accuracy_note")
    if not tests:
        return ([f"_{note}._", ""] if markdown else [note]) if note else []
    if markdown:
        return table(tests, DELTA_COLUMNS, delta_row_cell) + [summary(tests, fail_pct) + ".", ""]
    width = max(len(t["metric"]) for t in tests)
    out = [f"{'accuracy':<{width}}  {'baseline':>24}  {'run':>24}  {'paired':>6}  {'delta [95% CI]':>26}  "
           f"{'b / c':>9}  {'McNemar p':>9}  {'Holm p':>7}  verdict"]
    out += [f"{t['metric']:<{width}}  {delta_row_cell(t, 'a'):>24}  {delta_row_cell(t, 'b'):>24}  "
            f"{fmt(t.get('n')):>6}  {delta_text(t):>26}  {pair_cell(t, 'bc'):>9}  {p_text(t.get('mcnemar_p')):>9}  "
            f"{p_text(t.get('p_holm')):>7}  {delta_row_cell(t, 'verdict')}" for t in tests]
    return out + ["", summary(tests, fail_pct)]
