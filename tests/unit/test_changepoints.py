"""E-divisive means (analytics.changepoints) on fixed series: a step, two steps, a drift, noise only, the refusals."""

from __future__ import annotations

import numpy as np
import pytest

from analytics.changepoints import ChangePoint, SeriesTooShort, find_change_points, minimum_length


def _noise(n: int, seed: int, scale: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).normal(0.0, scale, n)


def test_a_step_is_found_where_it_is_with_both_means():
    values = np.concatenate([100 + _noise(20, 1), 125 + _noise(20, 2)])
    points = find_change_points(values)
    assert [p.index for p in points] == [20]
    (p,) = points
    assert p.p_value <= 0.05
    assert p.mean_before == pytest.approx(values[:20].mean())
    assert p.mean_after == pytest.approx(values[20:].mean())
    assert p.mean_after - p.mean_before == pytest.approx(25, abs=2)


def test_two_steps_are_both_found_in_index_order():
    values = np.concatenate([10 + _noise(15, 3, 0.5), 14 + _noise(15, 4, 0.5), 11 + _noise(15, 5, 0.5)])
    points = find_change_points(values)
    assert [p.index for p in points] == [15, 30]
    assert points[0].mean_after == pytest.approx(points[1].mean_before)
    assert points[0].mean_before < points[0].mean_after > points[1].mean_after


def test_a_drift_is_reported_as_a_staircase_of_rises():
    values = np.linspace(50, 80, 40) + _noise(40, 6, 0.5)
    points = find_change_points(values)
    assert len(points) >= 2, "a 60 % drift over 40 runs is not noise, nor one step"
    assert all(p.mean_after > p.mean_before for p in points)
    assert [p.index for p in points] == sorted({p.index for p in points})
    assert points[0].mean_before == pytest.approx(values[: points[0].index].mean())
    assert points[-1].mean_after == pytest.approx(values[points[-1].index :].mean())


def test_noise_alone_has_no_change_point_at_alpha():
    values = 100 + _noise(40, 7, 3.0)
    assert find_change_points(values, alpha=0.05) == []


def test_a_constant_series_has_none():
    assert find_change_points([5.0] * 12) == []


def test_the_same_seed_gives_the_same_answer_and_p_values_are_permutation_fractions():
    values = np.concatenate([1 + _noise(8, 8, 0.3), 2 + _noise(8, 9, 0.3)])
    a = find_change_points(values, seed=3, permutations=99)
    b = find_change_points(values, seed=3, permutations=99)
    assert a == b and a
    assert all(isinstance(p, ChangePoint) for p in a)
    assert all(round(p.p_value * 100) == pytest.approx(p.p_value * 100) for p in a)  # (1 + k) / 100


def test_min_size_bounds_the_segments():
    values = np.concatenate([0 + _noise(3, 10, 0.1), 10 + _noise(27, 11, 0.1)])
    assert [p.index for p in find_change_points(values, min_size=2)] == [3]
    assert all(p.index >= 5 and len(values) - p.index >= 5 for p in find_change_points(values, min_size=5))


def test_a_series_too_short_is_refused_in_one_line_naming_the_minimum():
    with pytest.raises(SeriesTooShort) as err:
        find_change_points([1.0, 2.0, 3.0])
    assert isinstance(err.value, ValueError)
    assert "\n" not in str(err.value) and "at least 4" in str(err.value)
    with pytest.raises(SeriesTooShort, match="at least 10"):
        find_change_points(range(9), min_size=5)
    assert minimum_length(2) == 4


@pytest.mark.parametrize(
    ("values", "kwargs", "match"),
    [
        ([1.0, 2.0, float("nan"), 4.0, 5.0], {}, r"values\[2\]"),
        ([1.0] * 6, {"alpha": 1.5}, "alpha"),
        ([1.0] * 6, {"min_size": 1}, "min_size"),
        ([1.0] * 6, {"permutations": 0}, "permutations"),
    ],
)
def test_bad_parameters_are_refused(values, kwargs, match):
    with pytest.raises(ValueError, match=match):
        find_change_points(values, **kwargs)
