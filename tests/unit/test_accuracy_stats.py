"""The accuracy statistics of 43_report_accuracy.sql against independent computations on fixed data: the Wilson
interval (scipy's, and the score equation solved by bisection), the exact McNemar test (scipy's binomial test, and
the binomial tail enumerated with exact integers), Newcombe's paired interval (method 10, written out here from the
paper's formulas, and its coverage enumerated exactly over every 2x2 table), edge cases, and the verdict rule."""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import product

import duckdb
import pytest

from analytics.report.accuracy import decide, holm_alone, verdict
from analytics.schema import conform, empty_table
from analytics.views import derived_sql_files

Z = 1.959963984540054


ACCURACY_FILE = "43_report_accuracy.sql"
READS = ("accuracy_samples", "accuracy_tasks", "compiles")  # the tables the file's views read (nothing derived)


def connect_samples(tables: dict[str, list[dict]]) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the tables the accuracy views read (``tables`` filled, the rest empty) and those
    views alone (the file reads no other file's view: loading it alone checks that too)."""
    con = duckdb.connect(":memory:")
    for name in READS:
        rows = tables.get(name) or []
        data = (
            conform(name, rows, defaults={"run_id": "r", "lane": "accuracy", "attempt": "a1"})
            if rows
            else empty_table(name)
        )
        con.register(f"__{name}", data)
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM __{name}")
    [(_, text)] = derived_sql_files([ACCURACY_FILE])
    con.execute(text)
    return con


def _sample(eval_id: str, variant: str, doc: int, correct: bool | None, output: str = "x") -> dict:
    return {
        "eval_id": eval_id,
        "model": "m",
        "variant": variant,
        "server_config": "A",
        "task": "t",
        "output_type": "generate_until",
        "doc_id": doc,
        "target": f"t{doc}",
        "metric": "exact_match",
        "correct": correct,
        "metric_value": None if correct is None else float(correct),
        "prediction_hash": None if correct is None else output,
        "latency_s": 0.1,
        "error": "boom" if correct is None else None,
    }


def one_eval(x: int, n: int, failed: int = 0) -> dict:
    con = connect_samples(
        {
            "accuracy_samples": [_sample("e", "base", i, i < x) for i in range(n)]
            + [_sample("e", "base", n + i, None) for i in range(failed)]
        }
    )
    cur = con.execute("SELECT * FROM report_accuracy")
    return dict(zip([d[0] for d in cur.description], cur.fetchone()))


def paired(n11: int, b: int, c: int, n00: int) -> dict:
    """accuracy_pair_tests of finetune (B) against base (A) on a 2x2 table: b = A right B wrong, c = A wrong B right."""
    cells = [(True, True)] * n11 + [(True, False)] * b + [(False, True)] * c + [(False, False)] * n00
    rows = [_sample("base", "base", i, ca) for i, (ca, _) in enumerate(cells)]
    rows += [_sample("ft", "finetune", i, cb) for i, (_, cb) in enumerate(cells)]
    con = connect_samples({"accuracy_samples": rows})
    cur = con.execute("SELECT * FROM accuracy_pair_tests WHERE kind = 'finetune'")
    return dict(zip([d[0] for d in cur.description], cur.fetchone()))


# ---- independent computations ----------------------------------------------------------------------------------
def wilson_by_bisection(x: int, n: int) -> tuple[float, float]:
    """The two roots of (x − n·p)² = z²·n·p(1 − p) in [0, 1], found by bisection (no closed form)."""
    f = lambda p: (x - n * p) ** 2 - Z * Z * n * p * (1 - p)  # noqa: E731 - <= 0 inside the interval
    phat = x / n

    def root(lo: float, hi: float) -> float:
        for _ in range(200):
            mid = (lo + hi) / 2
            if (f(mid) <= 0) == (f(hi) <= 0):
                hi = mid
            else:
                lo = mid
        return (lo + hi) / 2

    low = 0.0 if x == 0 else root(0.0, phat)
    high = 1.0 if x == n else root(phat, 1.0)
    return low, high


def mcnemar_by_enumeration(b: int, c: int) -> float:
    m = b + c
    if m == 0:
        return 1.0
    tail = sum(Fraction(math.comb(m, k), 2**m) for k in range(min(b, c) + 1))
    return float(min(Fraction(1), 2 * tail))


def newcombe10(n11: int, b: int, c: int, n00: int) -> tuple[float, float]:
    """Newcombe (1998) method 10 for θ = p₁ − p₂ with p₁ the second evaluation's accuracy (B) and p₂ the
    first's (A): the paper's table a = n11, "first +, second −" = c, "first −, second +" = b, d = n00."""
    a, bb, cc, d = n11, c, b, n00
    n = a + bb + cc + d
    p1, p2 = (a + bb) / n, (a + cc) / n

    def wilson(x: int) -> tuple[float, float]:
        centre, half = (x + Z * Z / 2) / (n + Z * Z), Z * math.sqrt(x * (n - x) / n + Z * Z / 4) / (n + Z * Z)
        return centre - half, centre + half

    (l1, u1), (l2, u2) = wilson(a + bb), wilson(a + cc)
    margins = (a + bb) * (cc + d) * (a + cc) * (bb + d)
    big_a = a * d - bb * cc
    if margins == 0:
        phi = 0.0
    elif big_a > n / 2:
        phi = (big_a - n / 2) / math.sqrt(margins)
    elif big_a >= 0:
        phi = 0.0
    else:
        phi = big_a / math.sqrt(margins)
    theta = p1 - p2
    low = theta - math.sqrt((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2)
    high = theta + math.sqrt((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2)
    return low, high


# ---- Wilson ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("x,n", [(20, 40), (0, 10), (10, 10), (1, 3), (37, 50), (412, 1319), (1, 1)])
def test_wilson_interval_matches_scipy_and_the_score_equation(x, n):
    stats = pytest.importorskip("scipy.stats")
    row = one_eval(x, n)
    assert row["n"] == n and row["correct"] == x and row["accuracy"] == pytest.approx(x / n)
    ci = stats.binomtest(x, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert (row["accuracy_ci_low"], row["accuracy_ci_high"]) == (
        pytest.approx(ci.low, abs=1e-9),
        pytest.approx(ci.high, abs=1e-9),
    )
    lo, hi = wilson_by_bisection(x, n)
    assert (row["accuracy_ci_low"], row["accuracy_ci_high"]) == (
        pytest.approx(lo, abs=1e-9),
        pytest.approx(hi, abs=1e-9),
    )


def test_wilson_edges_all_correct_none_correct_and_no_scored_sample():
    full = one_eval(25, 25)
    assert full["accuracy"] == 1.0 and full["accuracy_ci_high"] == 1.0
    assert full["accuracy_ci_low"] == pytest.approx(25 / (25 + Z * Z))
    none = one_eval(0, 25)
    assert none["accuracy"] == 0.0 and none["accuracy_ci_low"] == 0.0
    assert none["accuracy_ci_high"] == pytest.approx(Z * Z / (25 + Z * Z))
    empty = one_eval(0, 0, failed=3)  # every request failed: no accuracy, no interval, three failures counted
    assert (empty["n"], empty["failed"], empty["samples"]) == (0, 3, 3)
    assert empty["accuracy"] is None and empty["accuracy_ci_low"] is None and empty["accuracy_ci_high"] is None


def test_failed_samples_are_excluded_from_accuracy_and_counted():
    row = one_eval(6, 10, failed=4)
    assert (row["samples"], row["n"], row["correct"], row["failed"]) == (14, 10, 6, 4)
    assert row["accuracy"] == pytest.approx(0.6) and row["first_error"] == "boom"


# ---- McNemar -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "n11,b,c,n00",
    [(20, 0, 15, 5), (30, 3, 9, 8), (10, 7, 7, 10), (5, 1, 0, 4), (100, 40, 60, 100), (3, 12, 0, 25), (0, 250, 180, 0)],
)
def test_exact_mcnemar_matches_scipy_binomtest_and_integer_enumeration(n11, b, c, n00):
    stats = pytest.importorskip("scipy.stats")
    t = paired(n11, b, c, n00)
    assert (t["n"], t["n11"], t["b"], t["c"], t["n00"]) == (n11 + b + c + n00, n11, b, c, n00)
    assert t["mcnemar_p"] == pytest.approx(stats.binomtest(b, b + c, 0.5).pvalue, rel=1e-9)
    assert t["mcnemar_p"] == pytest.approx(mcnemar_by_enumeration(b, c), rel=1e-9)


def test_mcnemar_edges_no_discordant_pair_and_the_cap_at_one():
    none = paired(12, 0, 0, 8)
    assert none["mcnemar_p"] == 1.0 and none["delta"] == 0.0
    assert none["delta_ci_low"] < 0 < none["delta_ci_high"]  # not degenerate at b = c = 0
    tied = paired(5, 4, 4, 5)  # 2·P(X ≤ 4 | 8, ½) = 1.27: capped
    assert tied["mcnemar_p"] == 1.0
    assert mcnemar_by_enumeration(4, 4) == 1.0


# ---- Newcombe's paired interval ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "n11,b,c,n00",
    [
        (20, 0, 15, 5),
        (30, 3, 9, 8),
        (10, 7, 7, 10),
        (5, 1, 0, 4),
        (100, 40, 60, 100),
        (3, 12, 0, 25),
        (0, 0, 10, 0),
        (12, 0, 0, 8),
        (1, 7, 1, 12),
        (59, 16, 6, 80),
    ],
)
def test_paired_interval_is_newcombes_method_10(n11, b, c, n00):
    t = paired(n11, b, c, n00)
    n = n11 + b + c + n00
    assert t["delta"] == pytest.approx((c - b) / n)
    assert t["acc_a"] == pytest.approx((n11 + b) / n) and t["acc_b"] == pytest.approx((n11 + c) / n)
    low, high = newcombe10(n11, b, c, n00)
    assert (t["delta_ci_low"], t["delta_ci_high"]) == (pytest.approx(low, abs=1e-9), pytest.approx(high, abs=1e-9))
    assert -1.0 <= t["delta_ci_low"] <= t["delta"] <= t["delta_ci_high"] <= 1.0


@pytest.mark.parametrize("p11,p10,p01", [(0.5, 0.1, 0.1), (0.3, 0.05, 0.2), (0.7, 0.15, 0.05)])
def test_the_paired_interval_covers_the_true_delta_about_95_percent(p11, p10, p01):
    """Exact coverage over every 2x2 table of n = 30 documents (multinomial weights): Newcombe reports method 10's
    mean coverage near 0.95 and its minimum above 0.93 — a wrong sign or term drops far below."""
    n, p00 = 30, 1 - p11 - p10 - p01
    true = p01 - p10  # acc B − acc A
    covered = total = 0.0
    for n11, b, c in product(range(n + 1), repeat=3):
        n00 = n - n11 - b - c
        if n00 < 0:
            continue
        w = (
            math.factorial(n)
            / (math.factorial(n11) * math.factorial(b) * math.factorial(c) * math.factorial(n00))
            * p11**n11
            * p10**b
            * p01**c
            * p00**n00
        )
        low, high = newcombe10(n11, b, c, n00)
        covered += w * (low <= true <= high)
        total += w
    assert total == pytest.approx(1.0)
    assert 0.925 < covered < 0.99


# ---- the verdict rule and the Holm family -----------------------------------------------------------------------
def test_verdict_needs_the_adjusted_test_and_the_interval_on_the_deltas_side():
    assert verdict(0.2, 0.1, 0.3, 0.001) == "better"
    assert verdict(-0.2, -0.3, -0.1, 0.001) == "worse"
    assert verdict(0.2, -0.01, 0.3, 0.001) == "within noise"  # the interval reaches 0
    assert verdict(0.2, 0.1, 0.3, 0.06) == "within noise"
    assert verdict(0.0, -0.1, 0.1, 1.0) == "within noise"
    assert verdict(None, None, None, None) == "untested"


def test_holm_alone_adjusts_a_family_and_decide_sets_pct_and_regression():
    tests = [
        {"mcnemar_p": 0.01, "acc_a": 0.5, "delta": -0.2, "delta_ci_low": -0.3, "delta_ci_high": -0.1},
        {"mcnemar_p": 0.03, "acc_a": 0.5, "delta": 0.1, "delta_ci_low": 0.01, "delta_ci_high": 0.2},
        {"mcnemar_p": None, "acc_a": None, "delta": None},
    ]
    holm_alone(tests, "f")
    assert [t["p_holm"] for t in tests] == [pytest.approx(0.02), pytest.approx(0.03), None]
    assert all(t["holm_tests"] == 2 and t["holm_family"] == "f" for t in tests)
    decide(tests, fail_pct=5.0)
    assert [t["verdict"] for t in tests] == ["worse", "better", "untested"]
    assert tests[0]["pct"] == pytest.approx(-40.0) and tests[0]["regression"] and not tests[1]["regression"]
