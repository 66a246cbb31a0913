"""The §3.3 collision and §4.5 stability sections of a DyCodeEval launch's summary, computed
from variant and completion records (pure: no Docker, no Ray, no model), and the files the
report phase writes. Expected values are worked out by hand in the comments."""

from __future__ import annotations

import math

import pyarrow.parquet as pq
import pytest

from raydist.problems.report import COMPLETIONS_SCHEMA, collision_markdown, completions_table, stability_markdown
from raydist.problems.summary import collision_numbers, completion_rows, stability_numbers


def variant(seed_id, g, scenario, prompt, accepted=False, canonical=None):
    return {"variant_id": f"{seed_id}{g}", "seed_id": seed_id, "generation_seed": g, "scenario": scenario,
            "prompt": prompt, "accepted": accepted, "canonical_passed": canonical}


# Three seeds, M = 3 runs each, a pool of |S| = 4 scenarios.
#   A: scenarios x y x, prompts p1 p2 p1 -> first recurs, a collision
#   B: scenarios y z w, prompts q1 q2 q3 -> neither
#   C: scenarios z z z, prompts r1 (refused rewrite) r3 -> scenario: both; prompt: C not counted
VARIANTS = [
    variant("A", 0, "x", "p1", True, True), variant("A", 1, "y", "p2", True, True),
    variant("A", 2, "x", "p1"),
    variant("B", 0, "y", "q1", True, True), variant("B", 1, "z", "q2", True, False),
    variant("B", 2, "w", "q3", True, True),
    variant("C", 0, "z", "r1"), variant("C", 1, "z", "r1") | {"rejection": "rewrite: the rewrite is the seed prompt"},
    variant("C", 2, "z", "r3"),
]


def test_collision_rates_and_theorem_values_by_hand():
    numbers = collision_numbers(VARIANTS, pool_size=4)
    assert numbers["runs"] == 3 and numbers["pool"] == 4
    scenario, prompt = numbers["rows"]
    # N = 4, M = 3: Theorem 3.1 exact 1 - (3/4)^2 = 7/16; bound 1 - exp(-2/3).
    # Theorem 3.2 exact 1 - (1)(3/4)(2/4) = 10/16; bound M(M-1)/(2N) = 6/8.
    for row in (scenario, prompt):
        assert row["repeat_exact"] == pytest.approx(7 / 16)
        assert row["repeat_bound"] == pytest.approx(1 - math.exp(-2 / 3))
        assert row["collision_exact"] == pytest.approx(10 / 16)
        assert row["collision_bound"] == pytest.approx(0.75)
    # Scenarios: A and C repeat and collide, B does not -> 2/3; datasets x,y,z / y,z,z / x,w,z
    # are pairwise different -> 0; a pair of 3-seed datasets collides with probability 4^-3.
    assert scenario == scenario | {"outcome": "scenario drawn", "seeds": 3, "repeat_rate": pytest.approx(2 / 3),
                                   "collision_rate": pytest.approx(2 / 3), "dataset_collision_rate": 0.0,
                                   "dataset_collision_exact": pytest.approx(1 / 64)}
    # Problems: C has a run whose rewrite was refused, so only A (repeat, collision) and B (neither).
    assert prompt == prompt | {"outcome": "rewritten problem", "seeds": 2, "repeat_rate": 0.5,
                               "collision_rate": 0.5, "dataset_collision_rate": 0.0,
                               "dataset_collision_exact": pytest.approx(1 / 16)}
    text = collision_markdown(numbers)
    assert "M = 3 runs per seed problem, scenario pool |S| = 4" in text
    assert "| rewritten problem | 2 | 0.500 | 0.438 | 0.487 | 0.500 | 0.625 | 0.75 | 0.000 | 0.0625 |" in text


def test_identical_datasets_collide():
    same = [variant(s, g, "x", f"prompt of {s}") for s in "AB" for g in range(3)]
    prompt = collision_numbers(same, pool_size=2)["rows"][1]
    # every run repeats the first; all 3 pairs of datasets are identical
    assert (prompt["repeat_rate"], prompt["collision_rate"], prompt["dataset_collision_rate"]) == (1.0, 1.0, 1.0)


def test_one_run_per_seed_has_no_collision_table():
    numbers = collision_numbers([variant("A", 0, "x", "p")], pool_size=4)
    assert numbers == {"runs": 1, "pool": 4, "rows": []}
    assert "generation.variants_per_seed >= 2); this launch has 1." in collision_markdown(numbers)


def rows_for(model, variant_id, passed):
    return [{"model": model, "variant_id": variant_id, "passed": p} for p in passed]


def test_stability_over_datasets_by_hand():
    # Dataset g = the accepted, canonical-checked variants of generation seed g:
    #   0: A0 (1 of 2) and B0 (2 of 2) -> pass@1 (0.5 + 1.0) / 2 = 0.75
    #   1: A1 (0 of 2); B1 failed the canonical check and A2 was not accepted -> 0.0
    #   2: B2 (1 of 2) -> 0.5
    rows = (rows_for("m", "A0", [True, False]) + rows_for("m", "B0", [True, True]) + rows_for("m", "A1", [False, False])
            + rows_for("m", "B2", [False, True]) + rows_for("m", "B1", [True, True]) + rows_for("m", None, [True])
            + rows_for("only0", "A0", [True]))
    numbers = stability_numbers(VARIANTS, rows)
    m = numbers["m"]
    assert m["datasets"] == {0: {"variants": 2, "pass@1": 0.75}, 1: {"variants": 1, "pass@1": 0.0},
                             2: {"variants": 1, "pass@1": 0.5}}
    # mean 1.25 / 3; squared deviations sum to 0.2916..., std = sqrt(0.2916... / 2);
    # t(0.975, 2 df) = 4.302653 -> half width 4.302653 * std / sqrt(3)
    std = math.sqrt(((0.75 - 1.25 / 3) ** 2 + (1.25 / 3) ** 2 + (0.5 - 1.25 / 3) ** 2) / 2)
    assert (m["R"], m["mean"], m["std"]) == (3, pytest.approx(1.25 / 3), pytest.approx(std))
    assert m["ci_high"] - m["mean"] == pytest.approx(4.302653 * std / math.sqrt(3), rel=1e-6)
    assert numbers["only0"] == {"datasets": {0: {"variants": 1, "pass@1": 1.0}}, "R": 1, "mean": None,
                              "std": None, "ci_low": None, "ci_high": None}
    text = stability_markdown(numbers)
    assert "| m | 3 | 0.750 (2), 0.000 (1), 0.500 (1) | 0.417 ± 0.382 | " in text
    assert "| only0 | 1 | 1.000 (1) | n/a (needs R >= 2) | n/a |" in text


def test_rejections_are_counted_by_the_stage_that_refused_them():
    from raydist.problems.summary import summary_numbers

    records = [variant("A", g, "x", "p") | {"rejection": r, "semantic_verdict": sv, "consistency_verdict": cv}
               for g, (r, sv, cv) in enumerate([
                   ("contexts: no context for parameter(s) numbers", None, None),
                   ("rewrite: the rewrite is the seed prompt unchanged", None, None),
                   ("rewrite: the rewrite lacks example(s) 1 of the seed", None, None),
                   ("validator: semantic NO: other task", "NO", "YES"),
                   (None, "YES", "YES")])]
    numbers = summary_numbers(records, [], [], [1])
    assert numbers["rejected_at"] == {"contexts": 1, "rewrite": 2, "validator": 1}
    # the validator was asked twice: semantic YES once, consistency YES twice
    assert (numbers["validated"], numbers["semantic_yes"], numbers["consistent_yes"]) == (2, 0.5, 1.0)


def test_only_records_of_the_current_configuration_are_reported(tmp_path):
    from raydist.problems import load_seeds
    from raydist.problems.config import Evaluation, Generation, ProblemsSettings
    from raydist.problems.generate import Variant, variant_id
    from raydist.problems.job import ProblemsJob
    from raydist.problems.phases import Seeds, execute, generate, validate
    from raydist.problems.records import RecordStore, completion_key

    problems = load_seeds("humaneval", ids=["HumanEval/0"])
    settings = ProblemsSettings(benchmark={"name": "humaneval", "dataset": "humaneval"},
                                generation=Generation(model="gen", variants_per_seed=2),
                                evaluation=Evaluation(models=["m"], n=2, temperature=0.8, max_tokens=64))
    job = ProblemsJob(settings=settings, run_dir=tmp_path, cache_dir=tmp_path)
    variants = RecordStore(tmp_path / "variants")
    for g in range(3):  # generation seed 2 is from a launch with variants_per_seed=3
        vid = variant_id("HumanEval/0", g, "gen")
        variants.put(vid, {"variant_id": vid, "seed_id": "HumanEval/0", "dataset": "humaneval", "generation_seed": g,
                           "generator_model": "gen", "scenario": "x", "tests": []})
    completions = RecordStore(tmp_path / "completions")
    for model, n, t in (("m", 2, 0.8), ("m", 1, 0.8), ("m", 2, 0.2), ("other", 2, 0.8)):
        completions.put(completion_key(model, "HumanEval/0", n, t, 64), {"model": model, "item_id": "HumanEval/0",
                                                                         "n": n})
    seed_set = Seeds(tuple(problems))
    generated = generate(job, seed_set, run=False)
    assert sorted(v.generation_seed for v in generated.variants) == [0, 1]
    assert all(isinstance(v, Variant) for v in generated.variants) and generated.pool is None
    executed = execute(job, seed_set, validate(job, generated, None, run=False), None, run=False)
    assert executed.completions == ({"model": "m", "item_id": "HumanEval/0", "n": 2},)


def test_a_canonical_check_is_kept_only_for_the_variant_it_checked(tmp_path):
    from raydist.problems.config import ProblemsSettings
    from raydist.problems.generate import Variant
    from raydist.problems.job import ProblemsJob
    from raydist.problems.phases import Generated, _check_digest, validate
    from raydist.problems.records import RecordStore

    job = ProblemsJob(settings=ProblemsSettings(), run_dir=tmp_path, cache_dir=tmp_path)
    checked = Variant("v1", "A", "humaneval", 0, "gen", "x", prompt="p", accepted=True, tests=("assert f()",))
    rewritten = Variant("v2", "A", "humaneval", 1, "gen", "x", prompt="p", accepted=True)
    first = validate(job, Generated((checked,), None), None, run=False)
    assert first.variants[0].canonical_passed is None  # not checked, nothing run
    RecordStore(tmp_path / "checks").put("v1", {"digest": _check_digest(checked), "canonical_passed": True})
    RecordStore(tmp_path / "checks").put("v2", {"digest": "stale", "canonical_passed": True})
    later = validate(job, Generated((checked, rewritten), None), None, run=False)
    assert [v.canonical_passed for v in later.variants] == [True, None]


COMPLETION = {"model": "m", "item_id": "v1", "seed_id": "HumanEval/0", "variant_id": "v1", "n": 2, "error": None,
              "samples": [{"passed": True, "status": "passed", "seconds": 0.5, "solution": "return 1"},
                          {"passed": False, "status": "failed", "seconds": 1.25, "solution": "return 2"}]}
COMPLETION_ROWS = [
    {"model": "m", "item_id": "v1", "seed_id": "HumanEval/0", "variant_id": "v1", "sample": 0, "passed": True,
     "status": "passed", "seconds": 0.5, "solution": "return 1", "error": None},
    {"model": "m", "item_id": "v1", "seed_id": "HumanEval/0", "variant_id": "v1", "sample": 1, "passed": False,
     "status": "failed", "seconds": 1.25, "solution": "return 2", "error": None},
]


def test_a_completion_row_with_a_key_the_table_lacks_is_refused_naming_it():
    rows = completion_rows([COMPLETION])
    rows[1] = rows[1] | {"tokens": 17}
    with pytest.raises(ValueError) as caught:
        completions_table(rows)
    assert str(caught.value) == ("completions.parquet row 1 has key(s) 'tokens', which are no columns of "
                                 "completions.parquet; the columns are " + ", ".join(COMPLETIONS_SCHEMA.names))


def test_the_report_replaces_its_files_whole_with_exact_tables_and_leaves_no_temporary_file(tmp_path):
    from raydist.problems import load_seeds
    from raydist.problems.config import Analysis, Evaluation, ProblemsSettings
    from raydist.problems.generate import Variant, variants_from_table
    from raydist.problems.job import ProblemsJob
    from raydist.problems.phases import Executed, Generated, Seeds, Validated
    from raydist.problems.report import report
    from raydist.problems.summary import metrics

    settings = ProblemsSettings(benchmark={"name": "humaneval", "dataset": "humaneval"},
                                evaluation=Evaluation(models=["m"], n=2, k=[1]),
                                analysis=Analysis(human_check=0, baselines=[]))
    job = ProblemsJob(settings=settings, run_dir=tmp_path, cache_dir=tmp_path)
    seed_set = Seeds(tuple(load_seeds("humaneval", ids=["HumanEval/0"])))
    variant = Variant("v1", "HumanEval/0", "humaneval", 0, "gen", "x", contexts={"numbers": "prices"}, prompt="p",
                      tests=("assert f() == 1",))
    validated = Validated((variant,))
    numbers = metrics(job, seed_set, Generated((variant,), None), validated, Executed((COMPLETION,)))
    (tmp_path / "summary.md").write_text("old\n" * 100)
    with (tmp_path / "summary.md").open("rb") as reader:  # opened before the report, as by a viewer
        written = report(job, seed_set, validated, numbers)
        assert reader.read() == b"old\n" * 100  # a write in place would truncate it under the reader
    assert sorted(p.name for p in tmp_path.iterdir()) == ["completions.parquet", "summary.md", "variants.parquet"]
    assert (tmp_path / "summary.md").read_text() == written.text
    assert pq.read_table(tmp_path / "completions.parquet").to_pylist() == COMPLETION_ROWS
    assert variants_from_table(pq.read_table(tmp_path / "variants.parquet")) == [variant]


MBPP_FILE = __import__("pathlib").Path(__file__).resolve().parents[1].parent / "shared/data/mbpp/sanitized-mbpp.json"


@pytest.mark.shared_data
@pytest.mark.skipif(not MBPP_FILE.is_file(), reason=f"MBPP-sanitized not found at {MBPP_FILE} (shared reference data)")
def test_the_diversity_table_of_mbpp_seeds_has_every_applicable_baseline(tmp_path):
    from raydist.problems import load_mbpp
    from raydist.problems.report import diversity_markdown

    text = diversity_markdown(["char_noise", "token_noise", "doc_to_comments", "function_rename"],
                              load_mbpp(MBPP_FILE, limit=3), [])
    for name in ("char_noise", "token_noise", "function_rename"):
        assert f"| {name} | 3 | 6 |" in text  # 3 seeds x 2 perturbation seeds
    assert "doc_to_comments" not in text  # not applicable to a prose instruction
    assert "| dycodeeval | 0 | 0 | n/a | n/a | n/a | n/a |" in text
