"""DyCodeEval's evaluation tables on hand-made rows, every value worked out by hand in the
comments: pass@k on seeds and variants beside DyPass@k with t intervals (§5, Table 2), and the
static-vs-dynamic fit with its prediction band and outliers (§4.3, Figure 5)."""

from __future__ import annotations

import math

import pytest

from raydist.analysis.contamination import contamination_fit
from raydist.analysis.stability import mean_interval
from raydist.problems.tables import pass_table, score_points

# Student t 0.975 quantiles (two-sided 95%) by degrees of freedom
T1, T2, T4, T13 = 12.706204736174694, 4.302652729749462, 2.7764451051977934, 2.1603686564627913


def samples(model: str, seed_id: str, variant_id: str | None, n: int, c: int) -> list[dict]:
    """``n`` completions rows of one prompt, the first ``c`` passing."""
    return [{"model": model, "seed_id": seed_id, "variant_id": variant_id, "passed": i < c} for i in range(n)]


# Model a, 2 samples per prompt: seeds S1..S5 with 2, 2, 1, 1, 1 passing; variants v1 (1 of 2)
# and v2 (0 of 2) of S1, v3 (2 of 2) of S2. Model b, 1 sample: S1 passes, S2 fails; v1 passes.
ROWS = (samples("a", "S1", None, 2, 2) + samples("a", "S2", None, 2, 2) + samples("a", "S3", None, 2, 1)
        + samples("a", "S4", None, 2, 1) + samples("a", "S5", None, 2, 1) + samples("a", "S1", "v1", 2, 1)
        + samples("a", "S1", "v2", 2, 0) + samples("a", "S2", "v3", 2, 2)
        + samples("b", "S2", None, 1, 0) + samples("b", "S1", None, 1, 1) + samples("b", "S1", "v1", 1, 1))


def test_pass_at_1_dypass_and_delta_by_hand():
    a, b = pass_table(ROWS, ks=(1,))
    assert (a["model"], a["seeds"], a["variants"], a["variant_seeds"]) == ("a", 5, 3, 2)
    # pass@1 per seed c/n: 1, 1, .5, .5, .5 -> mean .7; sd^2 = (2·.09 + 3·.04)/4 = .075;
    # half-width t4·sd/sqrt(5) = .340; the interval .360-1.040 is clipped to 1.
    half = T4 * math.sqrt(0.075) / math.sqrt(5)
    assert a["pass@1"] == pytest.approx(0.7) and a["pass@1_low"] == pytest.approx(0.7 - half)
    assert a["pass@1_high"] == 1.0 and 0.7 + half > 1
    # each variant a problem: .5, 0, 1 -> .5; half t2·.5/sqrt(3) = 1.24 clips both ends
    assert (a["variant_pass@1"], a["variant_pass@1_low"], a["variant_pass@1_high"]) == (0.5, 0.0, 1.0)
    # DyPass@1 pools a seed's variants: S1 1 of 4 = .25, S2 2 of 2 = 1 -> .625
    assert a["DyPass@1"] == 0.625 and (a["DyPass@1_low"], a["DyPass@1_high"]) == (0.0, 1.0)
    # delta on S1 and S2: .25 - 1 = -.75 and 1 - 1 = 0 -> -.375, interval clipped to [-1, 1]
    assert (a["delta@1"], a["delta@1_low"], a["delta@1_high"]) == (-0.375, -1.0, 1.0)
    # one seed with variants: a value without an interval
    assert (b["pass@1"], b["DyPass@1"], b["DyPass@1_low"], b["delta@1"]) == (0.5, 1.0, None, 0.0)
    assert b["pass@1_low"] == pytest.approx(0.0) and b["pass@1_high"] == 1.0  # .5 ± t1·.707/1.414


def test_pass_at_2_is_undefined_where_a_prompt_has_fewer_samples():
    a, b = pass_table(ROWS, ks=(2,))
    # a: every seed has a pass in 2 samples -> pass@2 = 1 for all five, sd 0;
    # DyPass@2 of S1: 1 - C(3,2)/C(4,2) = .5, of S2: 1 -> .75; each variant: 1 - C(1,2)/C(2,2) = 1, 0, 1
    assert (a["pass@2"], a["pass@2_low"], a["pass@2_high"]) == (1.0, 1.0, 1.0)
    assert a["DyPass@2"] == 0.75 and a["variant_pass@2"] == pytest.approx(2 / 3)
    assert a["delta@2"] == -0.25  # (.5 - 1 + 1 - 1) / 2
    # b answered each prompt once: pass@2 and DyPass@2 have no value
    assert (b["pass@2"], b["variant_pass@2"], b["DyPass@2"], b["delta@2"]) == (None, None, None, None)


def test_score_points_are_the_models_with_both_scores():
    table = pass_table(ROWS + samples("c", "S1", None, 1, 1))
    assert score_points(table) == {"a": (0.7, 0.625), "b": (0.5, 1.0)}


def test_mean_interval_by_hand():
    # 1, 2, 3, 4, 5 scaled to [0, 1] by .1: mean .3, sd sqrt(.025), half t4·sd/sqrt(5)
    half = T4 * math.sqrt(0.025) / math.sqrt(5)
    assert mean_interval([0.1, 0.2, 0.3, 0.4, 0.5]) == pytest.approx((0.3, 0.3 - half, 0.3 + half))
    assert mean_interval([0.4]) == (0.4, None, None)
    assert mean_interval([-0.5, 0.5], bounds=(-1.0, 1.0)) == (0.0, -1.0, 1.0)
    with pytest.raises(ValueError, match="at least one score"):
        mean_interval([])


def test_a_three_model_fit_by_hand():
    fit = contamination_fit({"p": (0.0, 0.0), "q": (1.0, 1.0), "r": (2.0, 3.0)}, grid=3)
    # x̄ = 1, Sxx = 2, ȳ = 4/3, Sxy = (-1)(-4/3) + 0 + (1)(5/3) = 3 -> slope 3/2, intercept -1/6;
    # residuals 1/6, -1/3, 1/6 -> SSE 1/6, s = sqrt(1/6) (1 degree of freedom);
    # Syy = 16/9 + 1/9 + 25/9 = 42/9 -> r = 3 / sqrt(2 · 42/9)
    assert (fit.n, fit.x_mean, fit.sxx) == (3, 1.0, 2.0)
    assert fit.slope == pytest.approx(1.5) and fit.intercept == pytest.approx(-1 / 6)
    assert fit.residual_std == pytest.approx(math.sqrt(1 / 6)) and fit.t == pytest.approx(T1, rel=1e-12)
    assert fit.r == pytest.approx(3 / math.sqrt(2 * 42 / 9))
    # band at x = 2: ŷ = 17/6 ± t1·sqrt(1/6)·sqrt(1 + 1/3 + 1/2) = t1·sqrt(11)/6
    x, y, low, high = fit.band[2]
    assert (x, y) == (2.0, pytest.approx(17 / 6))
    assert (low, high) == pytest.approx((17 / 6 - T1 * math.sqrt(11) / 6, 17 / 6 + T1 * math.sqrt(11) / 6))
    assert [b[0] for b in fit.band] == [0.0, 1.0, 2.0] and fit.outliers == ()


# Fourteen in-the-wild models on dynamic = static - .05 ± .01 (x = .10, .15, ..., .75; the noise
# symmetric about x̄ = .425 and summing to 0) and one contaminated model at x̄ scoring .3 lower.
NOISE = [1, -1, 1, -1, 1, -1, 0, 0, -1, 1, -1, 1, -1, 1]
WILD = {f"m{i:02d}": (0.1 + 0.05 * i, 0.05 + 0.05 * i + 0.01 * NOISE[i]) for i in range(14)}
LEAKY = {"leaky": (0.425, 0.075)}


def test_a_contaminated_model_falls_below_the_band_of_fifteen():
    fit = contamination_fit(WILD | LEAKY)
    # The leaky model sits at x̄ and the noise is symmetric, so Sxy = Sxx = .0025·Σ(i - 6.5)² = .56875
    # and the slope is 1; ȳ = x̄ - .05 - .3/15 = x̄ - .07, so the intercept is -.07.
    assert fit.sxx == pytest.approx(0.56875) and fit.x_mean == pytest.approx(0.425)
    assert fit.slope == pytest.approx(1.0) and fit.intercept == pytest.approx(-0.07)
    # residuals: noise + .02 for the fourteen, -.28 for the leaky one:
    # SSE = 12·.0001 + 14·.0004 + .0784 = .0852 (13 degrees of freedom); Syy = Sxx + .0068 + .0784 = .65395
    s = math.sqrt(0.0852 / 13)
    assert fit.residual_std == pytest.approx(s) and fit.t == pytest.approx(T13, rel=1e-12)
    assert fit.r == pytest.approx(math.sqrt(0.56875 / 0.65395))
    # at x̄ the band is ŷ ± t13·s·sqrt(1 + 1/15) = .355 ± .181, and .075 lies below it
    [leaky] = [p for p in fit.points if p.name == "leaky"]
    half = T13 * s * math.sqrt(1 + 1 / 15)
    assert (leaky.predicted, leaky.low, leaky.high) == pytest.approx((0.355, 0.355 - half, 0.355 + half))
    assert leaky.side == "below" and fit.outliers == ("leaky",)
    # the band's first point, x = .1: ŷ = .03 ± t13·s·sqrt(1 + 1/15 + .325²/.56875)
    half = T13 * s * math.sqrt(1 + 1 / 15 + 0.325 ** 2 / 0.56875)
    assert fit.band[0] == pytest.approx((0.1, 0.03, 0.03 - half, 0.03 + half))
    assert fit.band[-1][0] == pytest.approx(0.75) and len(fit.band) == 51


def test_without_the_contaminated_model_no_model_is_outside():
    fit = contamination_fit(WILD)
    assert fit.outliers == () and fit.slope == pytest.approx(1.0)


def test_a_model_above_the_band_is_named_above():
    fit = contamination_fit(WILD | {"rephrase-proof": (0.425, 0.675)})
    assert fit.outliers == ("rephrase-proof",) and fit.points[-1].side == "above"


@pytest.mark.parametrize(("points", "message"), [
    ({"a": (0.1, 0.2), "b": (0.3, 0.4)}, "at least 3 models, got 2"),
    ({"a": (0.5, 0.2), "b": (0.5, 0.4), "c": (0.5, 0.1)}, "same static score"),
    ({"a": (0.1, 0.2), "b": (0.3, float("nan")), "c": (0.5, 0.1)}, "finite scores"),
])
def test_a_fit_that_cannot_be_made_says_why(points, message):
    with pytest.raises(ValueError, match=message):
        contamination_fit(points)
