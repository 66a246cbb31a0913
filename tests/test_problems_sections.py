"""The DyCodeEval report's sections and figures from run directories written with the launch's
own table writers (variants_table, completions_table), on two real HumanEval seeds and four
models whose pass counts are chosen by hand; every number is worked out in the comments."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from raydist._util.files import atomic_write_parquet
from raydist.analysis.contamination import contamination_fit
from raydist.analysis.problems_figures import pass_figure
from raydist.problems import Variant, load_seeds, variants_table
from raydist.problems.generate import variant_id
from raydist.problems.report import completions_table
from raydist.problems.sections import Section, problems_sections
from raydist.problems.summary import collision_numbers
from raydist.problems.tables import load_problem_run

SEEDS = load_seeds("humaneval", ids=["HumanEval/0", "HumanEval/2"])
SCENARIOS = ["bakery stock", "bus timetable", "library loans", "garden watering"]
# (model, seed, generation seed or None for the seed prompt) -> passing of 2 samples.
# m1 solves everything; m2 half of every prompt; m3 1 of 4 seed samples, 1 of 8 variant samples;
# m4 3 of 4 seed samples and no variant sample (what a contaminated model looks like).
PASSING = {"m1": ((2, 2), (2, 2, 2, 2)), "m2": ((1, 1), (1, 1, 1, 1)), "m3": ((0, 1), (0, 0, 1, 0)),
           "m4": ((2, 1), (0, 0, 0, 0))}
# Static pass@1 (mean over the 2 seeds of c/2) and DyPass@1 (per seed: passes of its 4 pooled variant
# samples / 4, mean over seeds): m1 (1, 1), m2 (.5, .5), m3 (.25, (0 + .25)/2), m4 (.75, 0).
POINTS = {"m1": (1.0, 1.0), "m2": (0.5, 0.5), "m3": (0.25, 0.125), "m4": (0.75, 0.0)}


class OneHot:
    """A stand-in embedder: each distinct text its own axis (cosine 0 between different texts)."""

    def __init__(self):
        self.axes: dict[str, int] = {}

    def embed(self, texts):
        return np.stack([np.eye(256, dtype=np.float32)[self.axes.setdefault(t, len(self.axes))] for t in texts])


def _variant(seed, g: int, generator: str) -> Variant:
    scenario = SCENARIOS[(SEEDS.index(seed) + 2 * g) % 4]
    prompt = seed.prompt.replace('"""', f'""" In {scenario}: ', 1)
    return Variant(variant_id=variant_id(seed.problem_id, g, generator), seed_id=seed.problem_id, dataset="humaneval",
                   generation_seed=g, generator_model=generator, scenario=scenario, contexts={"x": scenario},
                   prompt=prompt, semantic_verdict="YES", consistency_verdict="YES", accepted=True,
                   seed_prompt=seed.prompt, entry_point=seed.entry_point, tests=seed.tests,
                   canonical_solution=seed.canonical_solution, canonical_passed=True)


def _samples(model, seed_id, vid, passing) -> list[dict]:
    item = seed_id if vid is None else f"{seed_id}::{vid}"
    return [{"model": model, "item_id": item, "seed_id": seed_id, "variant_id": vid, "sample": i,
             "passed": i < passing, "status": "passed" if i < passing else "failed", "seconds": 0.1,
             "solution": "...", "error": None} for i in range(2)]


def make_run(folder: Path, passing=PASSING, generator: str = "gen") -> Path:
    """A problems run directory as the report phase leaves it: 2 seeds x 2 generation seeds."""
    folder.mkdir(parents=True)
    variants = [_variant(seed, g, generator) for seed in SEEDS for g in (0, 1)]
    rows = []
    for model, (seed_pass, variant_pass) in passing.items():
        for seed, c in zip(SEEDS, seed_pass):
            rows += _samples(model, seed.problem_id, None, c)
        for v, c in zip(variants, variant_pass):
            rows += _samples(model, v.seed_id, v.variant_id, c)
    atomic_write_parquet(folder / "variants.parquet", variants_table(variants))
    atomic_write_parquet(folder / "completions.parquet", completions_table(rows))
    (folder / "scenarios.json").write_text(json.dumps(SCENARIOS))
    (folder / "summary.md").write_text("# raydist problems\n")
    return folder


@pytest.fixture(scope="module")
def sections(tmp_path_factory) -> dict[str, Section]:
    run = make_run(tmp_path_factory.mktemp("out") / "problems" / "humaneval" / "gen")
    found = problems_sections([run.parent.parent], embedder=OneHot())
    return {s.key.split("-")[0]: s for s in found} | {"_order": [s.key.split("-")[0] for s in found]}


def test_one_run_gives_five_sections_in_the_papers_order(sections):
    assert sections["_order"] == ["pass", "contamination", "diversity", "collision", "stability"]
    assert sections["pass"].spec == "DyCodeEval §5, Table 2"
    assert sections["contamination"].title == "Static vs dynamic Pass@1: humaneval"


def test_the_pass_table_has_the_hand_values(sections):
    rows = {r["model"]: r for r in sections["pass"].rows}
    assert {m: (r["pass@1"], r["DyPass@1"]) for m, r in rows.items()} == POINTS
    # m3 on each variant: 0, 0, .5, 0 -> .125; delta per seed: 0 - 0 and .125·2 - .5 -> (0 - .25)/2
    assert rows["m3"]["variant_pass@1"] == 0.125 and rows["m3"]["delta@1"] == -0.125
    # m2 scores .5 on every prompt: sd 0, the interval is the point
    assert (rows["m2"]["pass@1_low"], rows["m2"]["pass@1_high"]) == (0.5, 0.5)
    assert (rows["m1"]["seeds"], rows["m1"]["variants"], rows["m1"]["variant_seeds"]) == (2, 4, 2)


def test_the_contamination_section_fits_the_four_models(sections):
    section = sections["contamination"]
    fit = section.data
    assert fit == contamination_fit(POINTS)
    # x̄ = .625, Sxx = .140625 + .015625 + .140625 + .015625 = .3125; ȳ = .40625;
    # Sxy = .375·.59375 + (-.125)(.09375) + (-.375)(-.28125) + .125·(-.40625) = .265625 -> slope .85,
    # intercept ȳ - .85·x̄ = -.125
    assert fit.slope == pytest.approx(0.85) and fit.intercept == pytest.approx(-0.125)
    # m4 lies .5125 below the line, yet inside a band of 2 degrees of freedom (t = 4.30): 4 models are few
    assert fit.outliers == () and section.rows[3]["outside"] is None
    assert [(r["model"], r["static"], r["dynamic"]) for r in section.rows] == [(m, *p) for m, p in POINTS.items()]
    assert "Least squares over 4 models: dynamic = -0.125 + 0.850 x static" in section.notes[0]
    # the figure: band (upper, lower filled to it), line, then the models as named markers
    band_high, band_low, line, models = section.figure.data[:4]
    assert list(band_high.y) == pytest.approx([b[3] for b in fit.band])
    assert list(band_low.y) == pytest.approx([b[2] for b in fit.band]) and band_low.fill == "tonexty"
    assert list(line.x) == pytest.approx([b[0] for b in fit.band])
    assert list(models.text) == ["m1", "m2", "m3", "m4"] and list(models.y) == [1.0, 0.5, 0.125, 0.0]


def test_the_collision_section_is_the_launchs_own_numbers(sections, tmp_path):
    section = sections["collision"]
    run = make_run(tmp_path / "again")
    assert section.data == collision_numbers(list(load_problem_run(run).variants), 4)
    # scenarios: HumanEval/0 draws "bakery stock" then "library loans", HumanEval/2 "bus timetable" then
    # "garden watering": no seed repeats -> repeat and collision rates 0; Theorem 3.1 with N = 4, M = 2: 1/4
    scenario = section.rows[0]
    assert (scenario["outcome"], scenario["repeat_rate"], scenario["collision_rate"]) == ("scenario drawn", 0.0, 0.0)
    assert scenario["repeat_exact"] == pytest.approx(0.25)
    # the figure: theory curves over M = 2..10, then observed markers at M = 2
    assert list(section.figure.data[0].x) == list(range(2, 11))
    assert section.figure.data[0].y[0] == pytest.approx(0.25)
    assert {trace.x[0] for trace in section.figure.data[3:]} == {2}


def test_the_stability_section_has_pass_at_1_per_generated_dataset(sections):
    rows = {r["model"]: r for r in sections["stability"].rows}
    # m3: dataset 0 is the variants of generation seed 0: HumanEval/0 0 of 2, HumanEval/2 1 of 2 -> .25;
    # dataset 1: 0 -> mean .125, std sqrt(2·.125²) = .1768
    assert (rows["m3"]["dataset 0"], rows["m3"]["dataset 1"], rows["m3"]["R"]) == (0.25, 0.0, 2)
    assert rows["m3"]["mean"] == 0.125 and rows["m3"]["std"] == pytest.approx(math.sqrt(2 * 0.125 ** 2))
    assert (rows["m2"]["mean"], rows["m2"]["std"]) == (0.5, 0.0)
    assert sections["stability"].columns == ("model", "R", "mean", "std", "ci_low", "ci_high", "dataset 0",
                                             "dataset 1")


def test_the_diversity_section_sets_the_variants_beside_the_baselines(sections):
    rows = {r["method"]: r for r in sections["diversity"].rows}
    assert rows["dycodeeval"]["seeds"] == 2 and rows["dycodeeval"]["variants"] == 4
    # one-hot embeddings: a variant differs from its seed and from its sibling -> cosine 0
    assert rows["dycodeeval"]["external_semantic"] == 0.0 and rows["dycodeeval"]["internal_semantic"] == 0.0
    assert "char_noise" in rows


def test_a_section_renders_as_markdown(sections):
    text = sections["contamination"].markdown()
    assert text.startswith("## Static vs dynamic Pass@1: humaneval (DyCodeEval §4.3, Figure 5)\n")
    assert "| model | static | dynamic | predicted | band_low | band_high | outside |" in text
    assert "| m4 | 0.750 | 0.000 |" in text


def test_two_run_directories_of_one_dataset_share_one_fit(tmp_path):
    make_run(tmp_path / "humaneval" / "gen")
    make_run(tmp_path / "humaneval" / "other", {"m5": ((1, 2), (1, 1, 2, 2))}, generator="other")
    found = problems_sections([tmp_path], diversity=False)
    [section] = [s for s in found if s.key.startswith("contamination")]
    assert [r["model"] for r in section.rows] == ["m1 (gen, gen)", "m2 (gen, gen)", "m3 (gen, gen)",
                                                  "m4 (gen, gen)", "m5 (other, other)"]
    assert section.data.n == 5
    assert [s.key.split("-")[0] for s in found] == ["pass", "pass", "contamination", "collision", "collision",
                                                    "stability", "stability"]


def test_fewer_than_three_models_get_points_and_a_note_not_a_fit(tmp_path):
    make_run(tmp_path / "gen", {m: PASSING[m] for m in ("m1", "m2")})
    [section] = [s for s in problems_sections([tmp_path], diversity=False) if s.key.startswith("contamination")]
    assert section.data is None
    assert section.notes == (("The fit needs at least 3 models with pass@1 and DyPass@1 and two different "
                              "static scores; 2 here."),)
    assert [t.name for t in section.figure.data] == ["y = x", "models"]


def test_no_problems_run_directory_is_an_error_naming_the_path(tmp_path):
    with pytest.raises(ValueError, match=f"no problems run directory .* at or below {tmp_path}"):
        problems_sections([tmp_path])


def test_the_pass_figure_draws_each_interval_around_its_bar():
    table = [{"model": "a", "pass@1": 0.7, "pass@1_low": 0.36, "pass@1_high": 1.0, "variant_pass@1": 0.5,
              "variant_pass@1_low": None, "variant_pass@1_high": None, "DyPass@1": None}]
    seeds, variants, dypass = pass_figure(table).data
    assert list(seeds.y) == [0.7] and list(seeds.error_y.array) == pytest.approx([0.3])
    assert list(seeds.error_y.arrayminus) == pytest.approx([0.34])
    assert list(variants.error_y.array) == [0.0] and list(dypass.y) == [None]
