"""Student's t, written here (student.py), held to scipy's."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st
from scipy import special

from allocmark.stats import student

DFS = [1, 2, 3, 4, 5, 7, 9, 11.7, 19, 29, 49.5, 99, 199, 999, 1e5]
LEVELS = [0.51, 0.6, 0.8, 0.975, 0.99, 1 - 0.05 / 36, 1 - 1e-6]


@pytest.mark.parametrize("df", DFS)
def test_quantiles_agree_with_scipy(df: float) -> None:
    for q in LEVELS:
        want = float(special.stdtrit(df, q))
        assert math.isclose(student.quantile(df, q), want, rel_tol=1e-9, abs_tol=1e-12), q
        assert math.isclose(student.quantile(df, 1 - q), -want, rel_tol=1e-9, abs_tol=1e-12)
    assert student.quantile(df, 0.5) == 0.0


@given(st.floats(0.5, 5000), st.floats(-60, 60))
@settings(max_examples=300, deadline=None)
def test_tails_agree_with_scipy(df: float, t: float) -> None:
    want = float(special.stdtr(df, -abs(t)))
    assert math.isclose(student.tail(df, t), want, rel_tol=1e-9, abs_tol=1e-300)
    assert math.isclose(
        student.cdf(df, t), float(special.stdtr(df, t)), rel_tol=1e-9, abs_tol=1e-15
    )


def test_near_the_centre_the_quantile_is_the_mass_over_the_density() -> None:
    """Where scipy's stdtrit returns 0 (df 4, q 0.5 + 1e-9): t = eps / f(0)."""
    for df in (1, 4, 30):
        f0 = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)
        assert math.isclose(student.quantile(df, 0.5 + 1e-9), 1e-9 / f0, rel_tol=1e-6)


def test_the_limits() -> None:
    assert math.isclose(student.quantile(math.inf, 0.975), 1.959963984540054, rel_tol=1e-12)
    assert math.isclose(student.quantile(1, 0.975), math.tan(math.pi * 0.475), rel_tol=1e-9)
    with pytest.raises(ValueError):
        student.quantile(0, 0.9)
    with pytest.raises(ValueError):
        student.quantile(5, 1.0)
