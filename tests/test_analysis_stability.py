"""DyCodeEval §4.5: mean, sample std and Student-t interval of Pass@1 over generated datasets."""

from __future__ import annotations

import math

import numpy as np
import pytest

from raydist.analysis import Stability, stability

T_975_DF1 = 12.706204736174698  # Student t 0.975 quantile, 1 degree of freedom
T_975_DF4 = 2.7764451051977987  # ... 4 degrees of freedom


def test_two_scores():
    s = stability([0.5, 0.7])
    assert s.runs == 2
    assert s.mean == pytest.approx(0.6, rel=1e-15)
    assert s.std == pytest.approx(math.sqrt(0.02), rel=1e-12)
    half = T_975_DF1 * math.sqrt(0.02) / math.sqrt(2)
    assert (s.ci_low, s.ci_high) == pytest.approx((0.6 - half, 0.6 + half), rel=1e-12)


def test_five_scores():
    s = stability([1, 2, 3, 4, 5])
    assert s.mean == 3.0
    assert s.std == pytest.approx(math.sqrt(2.5), rel=1e-15)
    half = T_975_DF4 * math.sqrt(2.5) / math.sqrt(5)
    assert (s.ci_low, s.ci_high) == pytest.approx((3 - half, 3 + half), rel=1e-12)


def test_std_is_the_sample_std():
    scores = [0.1, 0.4, 0.35, 0.2]
    assert stability(scores).std == pytest.approx(float(np.std(scores, ddof=1)), rel=1e-15)
    assert stability(scores).std != pytest.approx(float(np.std(scores, ddof=0)))


def test_constant_scores_have_a_zero_width_interval():
    s = stability([0.5] * 10)
    assert (s.std, s.ci_low, s.ci_high) == (0.0, 0.5, 0.5)


def test_a_lower_confidence_narrows_the_interval():
    wide, narrow = stability([0.5, 0.6, 0.55]), stability([0.5, 0.6, 0.55], confidence=0.8)
    assert narrow.confidence == 0.8
    assert wide.ci_low < narrow.ci_low < narrow.ci_high < wide.ci_high


@pytest.mark.parametrize("scores", [[0.5], [], [0.5, float("nan")], [[0.1, 0.2], [0.3, 0.4]]])
def test_rejects_too_few_or_non_finite_scores(scores):
    with pytest.raises(ValueError):
        stability(scores)


def test_rejects_confidence_outside_the_unit_interval():
    with pytest.raises(ValueError):
        stability([0.1, 0.2], confidence=1.0)


def test_str_reads_mean_std_and_interval():
    s = Stability(runs=10, mean=0.5, std=0.01, ci_low=0.49, ci_high=0.51, confidence=0.95)
    assert str(s) == "0.5000 ± 0.0100 (95% CI 0.4900-0.5100, R=10)"
