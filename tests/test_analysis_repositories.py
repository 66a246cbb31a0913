"""SchrodingerRepo §V analysis on hand-made runs.parquet files: reading and what is missing,
Table I, the paired tests against L0 (exact McNemar, sign-flip permutation, bootstrap
interval), Figure 3's action shares, verdict stability and McNemar's sample size, and the
case study. Every expected value is computed by hand here."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raydist.analysis import repositories as rp
from raydist.analysis import runs
from raydist.analysis import significance as sg
from raydist.results.schema import RUNS_SCHEMA, table_from_rows

R, U = "resolved", "unresolved"
FIGURE = ("navigate", "search", "read", "probe", "edit", "test")


def unit(instance: str, level: str, seed: int = 0, outcome: str = R, *, model: str = "m", agent: str = "a",
         actions=(0, 0, 0, 0, 0, 0), **fields) -> dict:
    """One runs.parquet row with the real column names; ``actions`` in ``FIGURE`` order."""
    return {"key": f"{model}/{agent}/{instance}/{level}/{seed}", "instance_id": instance, "model": model,
            "agent": agent, "level": level, "seed": seed, "config_hash": "c", "resolved": outcome == R,
            "outcome": outcome, "steps": 10, "input_tokens": 1000, "output_tokens": 100, "cost": 0.5,
            **{f"actions_{c}": n for c, n in zip(FIGURE, actions, strict=True)}, "actions_submit": 1,
            "actions_other": 0, "model_patch": f"patch {instance} {level} {seed}", **fields}


def table(rows: list[dict]) -> pa.Table:
    return table_from_rows(rows, RUNS_SCHEMA, "runs.parquet")


def write_run(run_dir, rows: list[dict]):
    run_dir.mkdir(parents=True, exist_ok=True)
    pq.write_table(table(rows), run_dir / "runs.parquet")
    return run_dir


def verdicts(instance: str, level: str, outcomes: str, **fields) -> list[dict]:
    """One unit per seed: ``outcomes`` is a string of R/U letters, seed 0 first."""
    return [unit(instance, level, seed, R if letter == "R" else U, **fields) for seed, letter in enumerate(outcomes)]


def one_row(rows: list[dict], **match) -> dict:
    found = [r for r in rows if all(r[k] == v for k, v in match.items())]
    assert len(found) == 1, found
    return found[0]


# --- reading and what is missing -----------------------------------------------------------


def test_load_runs_reads_every_run_directory_below_a_sweep_folder(tmp_path):
    write_run(tmp_path / "sweep" / "level=L0", [unit("i1", "L0"), unit("i2", "L0")])
    write_run(tmp_path / "sweep" / "level=L2", [unit("i1", "L2")])
    loaded = runs.load_runs([tmp_path / "sweep"])
    assert loaded.num_rows == 3
    assert sorted(set(loaded.column("run_dir").to_pylist())) == [str((tmp_path / "sweep" / f"level={x}").resolve())
                                                                  for x in ("L0", "L2")]


def test_a_run_directory_without_runs_parquet_is_reported_unfinished(tmp_path):
    write_run(tmp_path / "sweep" / "seed=0", [unit("i1", "L0")])
    (tmp_path / "sweep" / "seed=1" / "rows").mkdir(parents=True)
    assert runs.unfinished_run_dirs([tmp_path / "sweep"]) == [tmp_path / "sweep" / "seed=1"]
    assert runs.load_runs([tmp_path / "sweep"]).num_rows == 1


def test_a_cell_with_fewer_finished_instances_is_reported_short():
    rows = [unit(i, "L0") for i in ("i1", "i2", "i3")]
    rows += [unit("i1", "L2"), unit("i2", "L2", outcome="infrastructure_error")]  # i3 never ran at L2
    assert runs.short_cells(table(rows)) == [{"model": "m", "agent": "a", "level": "L2", "seed": 0, "attempt": 0,
                                              "instances": 3, "finished": 1, "errors": 1, "missing": ["i2", "i3"]}]


def test_a_folder_without_runs_parquet_raises_a_named_error(tmp_path):
    with pytest.raises(ValueError, match=f"no runs.parquet at or below {tmp_path}"):
        runs.load_runs([tmp_path])


def test_a_path_that_does_not_exist_raises_a_named_error(tmp_path):
    with pytest.raises(ValueError, match=f"{tmp_path / 'nowhere'}: no such file or folder"):
        runs.load_runs([tmp_path / "nowhere"])


def test_a_parquet_missing_a_required_column_raises_naming_file_and_column(tmp_path):
    run_dir = write_run(tmp_path / "run", [unit("i1", "L0")])
    pq.write_table(pq.read_table(run_dir / "runs.parquet").drop_columns(["actions_probe"]), run_dir / "runs.parquet")
    with pytest.raises(ValueError, match=r"run/runs\.parquet lacks column\(s\) actions_probe"):
        runs.load_runs([run_dir])


def test_an_outcome_outside_the_taxonomy_is_refused(tmp_path):
    run_dir = write_run(tmp_path / "run", [unit("i1", "L0", outcome="timeout")])
    with pytest.raises(ValueError, match="outcome 'timeout' is none of resolved"):
        runs.load_runs([run_dir])


def test_a_unit_in_two_run_directories_is_refused(tmp_path):
    write_run(tmp_path / "a", [unit("i1", "L0")])
    write_run(tmp_path / "b", [unit("i1", "L0")])
    with pytest.raises(ValueError, match="unit m/a/i1/L0/0 is in both"):
        runs.load_runs([tmp_path])


# --- Table I ---------------------------------------------------------------------------------


def _two_seed_rows() -> list[dict]:
    # L0: seed 0 resolves 3 of 4, seed 1 2 of 4; L2: seed 0 1 of 4, seed 1 2 of 4.
    rows = []
    for instance, l0, l2 in [("i1", "RR", "RR"), ("i2", "RR", "UR"), ("i3", "RU", "UU"), ("i4", "UU", "UU")]:
        rows += verdicts(instance, "L0", l0) + verdicts(instance, "L2", l2, steps=25, input_tokens=2500, cost=1.25)
    return rows


def test_table_one_pass_at_1_is_the_mean_over_seeds_with_its_sample_std_and_delta():
    rows = rp.level_table(table(_two_seed_rows()))
    l0, l2 = one_row(rows, level="L0"), one_row(rows, level="L2")
    assert (l0["pass_at_1"], l2["pass_at_1"]) == ((0.75 + 0.5) / 2, (0.25 + 0.5) / 2)
    assert l0["pass_at_1_std"] == pytest.approx(0.25 / math.sqrt(2), rel=1e-15)  # |0.75 - 0.5| / sqrt(2)
    assert l2["pass_at_1_std"] == pytest.approx(0.25 / math.sqrt(2), rel=1e-15)
    assert (l0["delta_pp"], l2["delta_pp"]) == (0.0, -25.0)
    assert (l2["instances"], l2["seeds"], l2["finished"]) == (4, 2, 8)


def test_table_one_reports_cost_means_and_their_change_against_l0_in_percent():
    l2 = one_row(rp.level_table(table(_two_seed_rows())), level="L2")
    assert (l2["mean_steps"], l2["mean_input_tokens"], l2["mean_output_tokens"], l2["mean_cost"]) == (25, 2500, 100,
                                                                                                       1.25)
    assert (l2["mean_steps_change"], l2["mean_input_tokens_change"], l2["mean_output_tokens_change"],
            l2["mean_cost_change"]) == (150.0, 150.0, 0.0, 150.0)


def test_error_units_are_counted_apart_and_left_out_of_pass_at_1_and_means():
    rows = [unit("i1", "L2"), unit("i2", "L2", outcome=U),
            unit("i3", "L2", outcome="infrastructure_error", steps=999), unit("i4", "L2", outcome="input_error"),
            unit("i5", "L2", outcome="bug")]
    l2 = one_row(rp.level_table(table(rows)), level="L2")
    assert (l2["pass_at_1"], l2["mean_steps"]) == (0.5, 10)  # 1 of 2 finished; 0.2 if errors counted unresolved
    assert (l2["units"], l2["finished"], l2["input_error"], l2["infrastructure_error"], l2["bug"]) == (5, 2, 1, 1, 1)


def test_pass_at_1_weights_each_seed_equally_not_each_unit():
    rows = verdicts("i1", "L0", "RR") + verdicts("i2", "L0", "RU") + verdicts("i3", "L0", "U")  # i3 ran seed 0 only
    l0 = one_row(rp.level_table(table(rows)), level="L0")
    assert l0["pass_at_1"] == pytest.approx((2 / 3 + 1 / 2) / 2, rel=1e-15)  # seeds 2/3 and 1/2; pooled: 3/5
    assert l0["pass_at_1_std"] == pytest.approx((2 / 3 - 1 / 2) / math.sqrt(2), rel=1e-12)


def test_a_system_without_l0_has_no_delta():
    l2 = one_row(rp.level_table(table([unit("i1", "L2")])), level="L2")
    assert (l2["delta_pp"], l2["mean_steps_change"], l2["pass_at_1_std"]) == (None, None, None)


def test_table_one_and_the_significance_table_give_one_delta_even_where_the_means_disagree_in_sign():
    # L0 = R,R,U,U; L2 seed 0 = R,U,U,U; L2 seed 1 = R on i1 and an infrastructure error on i2..i4.
    # Unpaired: L0 0.5, L2 (1/4 + 1/1) / 2 = 0.625 -> +12.5 points. Paired shares at L2: i1 1, i2..i4 0
    # against 1, 1, 0, 0 -> differences 0, -1, 0, 0 -> -25 points, as the paired test says.
    rows = [unit(i, "L0", outcome=o) for i, o in zip(("i1", "i2", "i3", "i4"), (R, R, U, U), strict=True)]
    rows += [unit(i, "L2", 0, o) for i, o in zip(("i1", "i2", "i3", "i4"), (R, U, U, U), strict=True)]
    rows += [unit("i1", "L2", 1)] + [unit(i, "L2", 1, "infrastructure_error") for i in ("i2", "i3", "i4")]
    l2 = one_row(rp.level_table(table(rows)), level="L2")
    assert l2["pass_at_1"] == 0.625 and (l2["paired"], l2["delta_pp"]) == (4, -25.0)
    assert one_row(sg.paired_significance(table(rows)), level="L2")["delta_pp"] == l2["delta_pp"]


def test_a_level_run_on_half_the_instances_gets_the_paired_delta():
    # L0 on i1..i4 = R,R,U,U (0.5); L2 on i1 = U, i3 = R, i4 = R only (2/3). Unpaired: 2/3 - 1/2 =
    # +16.7 points; paired differences i1 -1, i3 +1, i4 +1 -> +1/3 -> +33.3 points.
    rows = [unit(i, "L0", outcome=o) for i, o in zip(("i1", "i2", "i3", "i4"), (R, R, U, U), strict=True)]
    rows += [unit("i1", "L2", outcome=U), unit("i3", "L2"), unit("i4", "L2")]
    l2 = one_row(rp.level_table(table(rows)), level="L2")
    assert l2["pass_at_1"] == pytest.approx(2 / 3) and l2["paired"] == 3
    assert l2["delta_pp"] == pytest.approx(100 / 3, rel=1e-12)
    assert one_row(sg.paired_significance(table(rows)), level="L2")["delta_pp"] == pytest.approx(l2["delta_pp"])


def test_pass_at_1_with_errors_counted_unresolved_is_given_beside_the_finished_one():
    rows = [unit("i1", "L2"), unit("i2", "L2", outcome=U), unit("i3", "L2", outcome="infrastructure_error"),
            unit("i4", "L2", outcome="input_error"), unit("i5", "L2", outcome="bug")]
    l2 = one_row(rp.level_table(table(rows)), level="L2")
    assert (l2["pass_at_1"], l2["pass_at_1_all"]) == (0.5, 0.2)  # 1 of 2 finished; 1 of 5 units


# --- paired significance ---------------------------------------------------------------------


def _mcnemar_rows(b: int, c: int, concordant: int = 3) -> list[dict]:
    """One seed: b instances resolved only at L0, c only at L2, ``concordant`` resolved at both."""
    rows = []
    for n in range(b):
        rows += [unit(f"b{n}", "L0"), unit(f"b{n}", "L2", outcome=U)]
    for n in range(c):
        rows += [unit(f"c{n}", "L0", outcome=U), unit(f"c{n}", "L2")]
    for n in range(concordant):
        rows += [unit(f"s{n}", "L0"), unit(f"s{n}", "L2")]
    return rows


def _binomial_p(b: int, c: int) -> float:
    """2 * sum_{k <= min(b, c)} C(b + c, k) / 2^(b + c), capped at 1."""
    n = b + c
    return min(1.0, 2 * sum(math.comb(n, k) for k in range(min(b, c) + 1)) / 2 ** n)


def test_mcnemar_p_value_on_one_seed_is_the_exact_binomial():
    result = one_row(sg.paired_significance(table(_mcnemar_rows(6, 1))), level="L2")
    assert (result["test"], result["b"], result["c"], result["instances"]) == (sg.MCNEMAR, 6, 1, 10)
    assert result["p_value"] == pytest.approx(0.125, rel=1e-12) == _binomial_p(6, 1)  # 2 * (1 + 7) / 128


def test_swapping_one_outcome_moves_the_mcnemar_p_value_to_its_new_hand_value():
    rows = _mcnemar_rows(6, 1)
    one_row(rows, instance_id="b0", level="L2").update(outcome=R, resolved=True)  # b=5, c=1 now
    result = one_row(sg.paired_significance(table(rows)), level="L2")
    assert (result["b"], result["c"]) == (5, 1)
    assert result["p_value"] == pytest.approx(14 / 64, rel=1e-12)  # 2 * (1 + 6) / 64


def test_seeds_that_agree_give_one_verdict_and_mcnemar():
    rows = []
    for instance, l0, l2 in [("i1", "RR", "UU"), ("i2", "RR", "UU"), ("i3", "UU", "RR"), ("i4", "RR", "RR")]:
        rows += verdicts(instance, "L0", l0) + verdicts(instance, "L2", l2)
    result = one_row(sg.paired_significance(table(rows)), level="L2")
    assert (result["test"], result["b"], result["c"], result["p_value"]) == (sg.MCNEMAR, 2, 1, 1.0)


def _fractional_rows() -> list[dict]:
    # Resolved shares over three seeds, L0 -> L2: i1 1 -> 1/3, i2 2/3 -> 0, i3 0 -> 1/3, i4 1 -> 0, i5 1 -> 1.
    rows = []
    for instance, l0, l2 in [("i1", "RRR", "RUU"), ("i2", "RRU", "UUU"), ("i3", "UUU", "RUU"), ("i4", "RRR", "UUU"),
                             ("i5", "RRR", "RRR")]:
        rows += verdicts(instance, "L0", l0) + verdicts(instance, "L2", l2)
    return rows


def _enumerated_p(differences: list[Fraction]) -> Fraction:
    """Share of the 2^n sign patterns whose |sum| is at least the observed one, in exact fractions."""
    observed = abs(sum(differences))
    patterns = list(itertools.product((1, -1), repeat=len(differences)))
    hits = sum(abs(sum(s * d for s, d in zip(signs, differences, strict=True))) >= observed for signs in patterns)
    return Fraction(hits, len(patterns))


def test_fractional_shares_use_the_exact_sign_flip_test():
    thirds = [Fraction(-2, 3), Fraction(-2, 3), Fraction(1, 3), Fraction(-1)]  # i5's 0 changes no pattern
    assert _enumerated_p(thirds) == Fraction(4, 16)  # |sum| 2 of at most 8/3: all +, all -, only i3 flipped, or not
    result = one_row(sg.paired_significance(table(_fractional_rows())), level="L2")
    assert (result["test"], result["b"], result["c"]) == (sg.SIGN_FLIP, 3, 1)
    assert "exact over all sign patterns" in result["assumptions"]
    assert result["p_value"] == pytest.approx(0.25, rel=1e-12)
    assert result["delta_pp"] == pytest.approx(100 * float(sum(thirds)) / 5, rel=1e-12)  # -40 points


def test_swapping_one_seed_moves_the_sign_flip_p_value_to_its_new_hand_value():
    rows = _fractional_rows()
    one_row(rows, instance_id="i3", level="L2", seed=1).update(outcome=R, resolved=True)  # i3: 0 -> 2/3
    assert _enumerated_p([Fraction(-2, 3), Fraction(-2, 3), Fraction(2, 3), Fraction(-1)]) == Fraction(8, 16)
    assert one_row(sg.paired_significance(table(rows)), level="L2")["p_value"] == pytest.approx(0.5, rel=1e-12)


def test_sign_flip_on_single_verdicts_equals_exact_mcnemar():
    assert sg.sign_flip_test([-1] * 6 + [1]) == (pytest.approx(0.125, rel=1e-12), True)


def test_sign_flip_draws_patterns_from_the_seed_when_enumeration_is_too_large():
    differences = [-1, -0.5, -1, 0.5, -1, -1, -0.5, -1, -1, 1, -1, -1]  # 2^12 patterns > 1000
    p, exact = sg.sign_flip_test(differences, permutations=1000, seed=7)
    assert exact is False
    assert (p, exact) == sg.sign_flip_test(differences, permutations=1000, seed=7)
    assert 1 / 1001 <= p < 0.05 and (p * 1001) == pytest.approx(round(p * 1001))  # (1 + hits) / (1 + 1000)


def test_bootstrap_interval_contains_the_delta_and_is_the_seeded_resample_of_instances():
    result = one_row(sg.paired_significance(table(_fractional_rows()), n_resamples=2000, seed=3), level="L2")
    assert result["ci_low"] <= result["delta_pp"] <= result["ci_high"]
    differences = np.array([1 / 3 - 1, 0 - 2 / 3, 1 / 3 - 0, 0 - 1, 0.0])  # instances i1..i5 in id order
    means = differences[np.random.default_rng(3).integers(0, 5, size=(2000, 5))].mean(axis=1)
    assert (result["ci_low"], result["ci_high"]) == pytest.approx(tuple(100 * np.percentile(means, [2.5, 97.5])),
                                                                  rel=1e-12)


def test_the_mcnemar_interval_is_exact_and_agrees_with_the_test_where_a_bootstrap_did_not():
    # b = 5, c = 0 on 10 instances: exact p = 2 / 32 = 0.0625, but the bootstrap interval of the
    # differences (five -1, five 0) is about [-80, -20] and excludes 0. The conditional interval:
    # Clopper-Pearson for 0 of 5 is [0, 1 - 0.025^(1/5)] = [0, 0.521824]; times (b + c) / n = 1/2
    # through 2t - 1: [-0.5, 0.021824], so Δ's interval holds 0, as the test says.
    result = one_row(sg.paired_significance(table(_mcnemar_rows(5, 0, concordant=5))), level="L2")
    assert result["p_value"] == pytest.approx(2 / 32, rel=1e-12)
    assert result["delta_pp"] == -50.0
    high = 100 * 0.5 * (2 * (1 - 0.025 ** (1 / 5)) - 1)
    assert (result["ci_low"], result["ci_high"]) == pytest.approx((-50.0, high), rel=1e-9)
    assert high == pytest.approx(2.1824, abs=1e-4) and result["interval_agrees"] is True
    d = np.array([-1.0] * 5 + [0.0] * 5)
    low_boot, high_boot = sg.bootstrap_interval(d)
    assert high_boot < 0  # what the report printed before: an interval that excluded 0


def test_mcnemar_interval_by_hand_and_refusals():
    assert sg.mcnemar_interval(0, 0, 4) == (0.0, 0.0)
    low, high = sg.mcnemar_interval(5, 0, 5)  # every instance fell: [-1, 2 * 0.521824 - 1]
    assert (low, high) == pytest.approx((-1.0, 2 * (1 - 0.025 ** 0.2) - 1), rel=1e-9)
    with pytest.raises(ValueError, match="b \\+ c <= n"):
        sg.mcnemar_interval(3, 3, 5)


def test_a_sign_flip_row_says_whether_its_bootstrap_interval_agrees_with_its_test():
    result = one_row(sg.paired_significance(table(_fractional_rows())), level="L2")
    assert result["interval"].startswith("percentile bootstrap")
    excludes_zero = result["ci_low"] > 0 or result["ci_high"] < 0
    assert result["interval_agrees"] is (excludes_zero == (result["p_value"] < 0.05))


def test_a_bootstrap_interval_that_disagrees_with_its_sign_flip_test_is_flagged_and_named():
    # Three instances, each resolved at 3 of 3 seeds at L0 and 2 of 3 at L2: every difference is
    # -1/3, so every resample's mean is -1/3 and the interval [-33.3, -33.3] excludes 0, while the
    # exact sign-flip p is 2 / 2^3 = 0.25.
    rows = []
    for instance in ("i1", "i2", "i3"):
        rows += verdicts(instance, "L0", "RRR") + verdicts(instance, "L2", "RRU")
    result = one_row(sg.paired_significance(table(rows)), level="L2")
    assert (result["test"], result["p_value"]) == (sg.SIGN_FLIP, pytest.approx(0.25, rel=1e-12))
    assert (result["ci_low"], result["ci_high"]) == pytest.approx((-100 / 3, -100 / 3), rel=1e-9)
    assert result["interval_agrees"] is False
    from raydist.reporting.sections import _significance

    assert any("disagree" in line and "m / a / L2" in line for line in _significance(table(rows), 0).text)


def test_holm_adjusts_a_fixed_set_of_p_values_by_hand():
    # sorted 0.005, 0.01, 0.03, 0.04 of m = 4: 4 * 0.005 = 0.02, 3 * 0.01 = 0.03, 2 * 0.03 = 0.06,
    # 1 * 0.04 = 0.04 -> running max 0.06; back in the given order:
    assert sg.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02], rel=1e-12)
    assert sg.holm([0.5, 0.9]) == [1.0, 1.0] and sg.holm([]) == []
    with pytest.raises(ValueError, match="p-values must lie in"):
        sg.holm([1.5])


def test_the_significance_table_holds_holm_beside_each_raw_p_value():
    rows = _mcnemar_rows(6, 1) + [dict(r, level="L3", key=r["key"] + "/L3") for r in _mcnemar_rows(6, 1)
                                  if r["level"] == "L2"]
    result = sg.paired_significance(table(rows))
    assert [(r["level"], r["p_value"]) for r in result] == [("L2", pytest.approx(0.125)), ("L3", pytest.approx(0.125))]
    assert [r["p_holm"] for r in result] == pytest.approx([0.25, 0.25], rel=1e-12)  # 2 * 0.125, then the max


# --- verdict stability and power -------------------------------------------------------------


def _stability_rows() -> list[dict]:
    rows = []
    for instance, l0, l2 in [("i1", "RR", "UU"), ("i2", "UU", "RR"), ("i3", "RR", "RU"), ("i4", "RU", "UU"),
                             ("i5", "RR", "RR")]:
        rows += verdicts(instance, "L0", l0) + verdicts(instance, "L2", l2)
    return rows


def test_seed_disagreements_are_counted_per_level():
    rows = sg.verdict_stability(table(_stability_rows()))
    assert [(r["level"], r["multi_seed"], r["seed_disagreements"]) for r in rows] == [("L0", 5, 1), ("L2", 5, 1)]
    assert one_row(rows, level="L0")["resolved_to_unresolved"] is None


def test_flips_count_instances_whose_unanimous_verdict_changes():
    l2 = one_row(sg.verdict_stability(table(_stability_rows())), level="L2")
    assert (l2["paired"], l2["resolved_to_unresolved"], l2["unresolved_to_resolved"], l2["mixed"]) == (5, 1, 1, 2)
    # psi: i1 1, i2 1, i3 1 * 1/2, i4 1/2 * 1, i5 0 -> 3 / 5
    assert l2["discordance"] == pytest.approx(0.6, rel=1e-12)


def test_connor_sample_size_is_connors_formula_by_hand():
    # z_0.975 = 1.959964, z_0.8 = 0.841621; (1.959964 * sqrt(0.2) + 0.841621 * sqrt(0.2 - 0.06^2))^2 / 0.06^2
    # = (0.876523 + 0.372981)^2 / 0.0036 = 1.561260 / 0.0036 = 433.68 -> 434
    assert sg.connor_sample_size(0.06, 0.2) == 434
    # psi 0.5, drop 0.1: (1.959964 * 0.707107 + 0.841621 * 0.700000)^2 / 0.01 = (1.385904 + 0.589135)^2 / 0.01 = 390.08
    assert sg.connor_sample_size(0.1, 0.5) == 391


def _power_by_enumeration(n: int, drop: float, psi: float, alpha: float = 0.05) -> float:
    """Every (discordant pairs m, pairs resolved only at L0 b) weighted by its probability,
    counted when scipy's two-sided binomial test of b of m rejects at alpha."""
    from scipy import stats

    q = (psi + drop) / (2 * psi)
    return sum(stats.binom.pmf(m, n, psi) * stats.binom.pmf(b, m, q)
               for m in range(1, n + 1) for b in range(m + 1) if stats.binomtest(b, m, 0.5).pvalue <= alpha)


def test_exact_mcnemar_power_equals_the_enumeration_of_every_outcome():
    for n, drop, psi in ((30, 0.3, 0.5), (41, 0.2, 0.4)):
        assert sg.mcnemar_exact_power(n, drop, psi) == pytest.approx(_power_by_enumeration(n, drop, psi), rel=1e-9)


def test_the_exact_test_needs_more_instances_than_connors_approximation():
    # At Connor's 434 the exact test has power 0.775 only; 460 is the least n with 0.8.
    assert sg.mcnemar_exact_power(434, 0.06, 0.2) == pytest.approx(0.77497, abs=1e-5)
    assert sg.mcnemar_exact_power(459, 0.06, 0.2) < 0.8 <= sg.mcnemar_exact_power(460, 0.06, 0.2)
    assert sg.mcnemar_sample_size(0.06, 0.2) == 460


def test_sample_size_refuses_a_drop_larger_than_the_discordance():
    with pytest.raises(ValueError, match="drop <= discordance"):
        sg.mcnemar_sample_size(0.3, 0.2)


def test_power_note_uses_the_measured_discordance():
    l2 = one_row(sg.verdict_stability(table(_mcnemar_rows(6, 1)), drop=0.06), level="L2")
    assert l2["discordance"] == pytest.approx(0.7, rel=1e-12)  # 7 discordant of 10
    needed = sg.mcnemar_sample_size(0.06, 0.7)
    assert l2["instances_needed"] == needed and needed > sg.connor_sample_size(0.06, 0.7) == 1524
    assert sg.mcnemar_exact_power(needed - 1, 0.06, 0.7) < 0.8 <= sg.mcnemar_exact_power(needed, 0.06, 0.7)
    assert l2["power_note"].startswith(f"{needed} paired instances detect a drop of 6 points")
    assert "Connor's normal approximation says 1524" in l2["power_note"]


def test_discordance_is_undefined_when_nothing_is_paired():
    rows = [unit("i1", "L0"), unit("i2", "L2", outcome=U)]
    l2 = one_row(sg.verdict_stability(table(rows)), level="L2")
    assert (l2["paired"], l2["discordance"], l2["instances_needed"]) == (0, None, None)
    assert "undefined" in l2["power_note"]


# --- Figure 3 --------------------------------------------------------------------------------


def _action_rows() -> list[dict]:
    return [unit("a", "L0", actions=(2, 1, 3, 0, 1, 1)),
            unit("a", "L2", 0, actions=(4, 3, 6, 1, 2, 1), actions_other=4),
            unit("a", "L2", 1, actions=(6, 3, 8, 1, 2, 1)),
            unit("b", "L0", actions=(1, 1, 1, 1, 1, 1)), unit("b", "L2", actions=(2, 2, 2, 2, 2, 2)),
            unit("c", "L2", actions=(90, 90, 90, 90, 90, 90))]  # c never ran at L0: not paired


def test_added_action_shares_divide_each_category_by_the_total_added():
    # Means over paired a, b; a's L2 mean over its seeds is (5, 3, 7, 1, 2, 1).
    # L0 (1.5, 1, 2, 0.5, 1, 1), L2 (3.5, 2.5, 4.5, 1.5, 2, 1.5): added (2, 1.5, 2.5, 1, 1, 0.5), total 8.5;
    # "other" grew by (4 / 2) / 2 = 1 but is no category of Figure 3: it stays out of the total
    (row,) = rp.added_action_shares(table(_action_rows()))
    assert (row["level"], row["instances"], row["added_total"], row["added_submit"], row["added_other"]) == (
        "L2", 2, 8.5, 0, 1)
    assert [row[f"share_{c}"] for c in FIGURE] == [2 / 8.5, 1.5 / 8.5, 2.5 / 8.5, 1 / 8.5, 1 / 8.5, 0.5 / 8.5]


def test_shares_are_none_when_the_level_adds_no_actions():
    rows = [unit("a", "L0", actions=(3, 3, 3, 3, 3, 3)), unit("a", "L2", actions=(3, 3, 3, 4, 2, 2))]
    (row,) = rp.added_action_shares(table(rows))
    assert row["added_total"] == -1
    assert [row[f"share_{c}"] for c in FIGURE] == [None] * 6


def test_figure_3_is_exact_so_actions_that_net_out_leave_the_shares_undefined():
    # One instance, read = 2 at L0; at L2 three seeds: read 2, read 2, search 1 + read 1. Means: read
    # 5/3, search 1/3 -> added read -1/3, search +1/3, net exactly 0 (floats gave 5.6e-17 and shares of
    # about 6e15): the level added no actions, so no category has a share.
    rows = [unit("a", "L0", actions=(0, 0, 2, 0, 0, 0)), unit("a", "L2", 0, actions=(0, 0, 2, 0, 0, 0)),
            unit("a", "L2", 1, actions=(0, 0, 2, 0, 0, 0)), unit("a", "L2", 2, actions=(0, 1, 1, 0, 0, 0))]
    (row,) = rp.added_action_shares(table(rows))
    assert (row["added_total"], row["added_read"], row["added_search"]) == (0.0, -1 / 3, 1 / 3)
    assert [row[f"share_{c}"] for c in FIGURE] == [None] * 6


def test_a_category_that_fell_has_share_zero_and_every_share_lies_in_0_to_1():
    # added: navigate +3, search -2, read +1 -> net +2 > 0; gross added 4: shares 3/4, 0, 1/4.
    rows = [unit("a", "L0", actions=(1, 3, 1, 0, 0, 0)), unit("a", "L2", actions=(4, 1, 2, 0, 0, 0))]
    (row,) = rp.added_action_shares(table(rows))
    assert (row["added_total"], row["added_search"]) == (2.0, -2.0)
    assert [row[f"share_{c}"] for c in FIGURE] == [0.75, 0.0, 0.25, 0.0, 0.0, 0.0]


# --- case study ------------------------------------------------------------------------------


def test_case_study_picks_the_first_instance_resolved_at_l0_and_not_at_the_highest_level():
    rows = [unit("i1", "L0"), unit("i1", "full"), unit("i2", "L0"), unit("i2", "L2", outcome=U),
            unit("i2", "full", outcome=U, steps=217), unit("i3", "L0"), unit("i3", "full", outcome=U)]
    case = rp.case_study(table(rows), "m")
    assert (case["instance_id"], case["highest_level"], case["reason"]) == ("i2", "full", "resolved at L0, not at full")
    assert [(u["level"], u["steps"], u["model_patch"]) for u in case["units"]] == [
        ("L0", 10, "patch i2 L0 0"), ("L2", 10, "patch i2 L2 0"), ("full", 217, "patch i2 full 0")]


def test_case_study_falls_back_to_the_largest_step_growth():
    rows = [unit("i1", "L0"), unit("i1", "L2", steps=40), unit("i2", "L0"), unit("i2", "L2", steps=217)]
    case = rp.case_study(table(rows), "m")
    assert (case["instance_id"], case["units"][1]["actions"]["submit"]) == ("i2", 1)
    assert case["reason"].endswith("largest step growth (+207 steps)")


def test_case_study_asks_for_the_agent_when_a_model_ran_under_two():
    rows = [unit("i1", "L0"), unit("i1", "L2"), unit("i1", "L0", agent="b"), unit("i1", "L2", agent="b")]
    with pytest.raises(ValueError, match="matches 2 systems"):
        rp.case_study(table(rows), "m")
    assert rp.case_study(table(rows), "m", "b")["agent"] == "b"
