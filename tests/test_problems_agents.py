"""DyCodeEval's agents and variant generation (§3.2) with a scripted model: the pipeline,
the parsing, the deterministic checks, the cache and the records. The scripted ``complete``
answers fixed strings by role (told apart by each template's wording) and logs every request."""

from __future__ import annotations

import csv
import json
import random
from dataclasses import dataclass, fields
from pathlib import Path

import pytest

from raydist._util.hashing import stable_hash
from raydist.models import ModelUnreachable
from raydist.problems import (
    LLMCallFailed,
    RecordedLLM,
    Rejected,
    Variant,
    export_for_human_check,
    generate_contexts,
    generate_variant,
    infer_parameter_types,
    load_dyc_prompts,
    load_seeds,
    propose_scenarios,
    rewrite_prompt,
    validate,
    variants_from_table,
    variants_table,
)
from raydist.problems.agents import (
    VERDICT_GRAMMAR,
    contexts_grammar,
    normalise_scenario,
    parse_contexts,
    parse_scenarios,
    parse_verdict,
    rewrite_grammar,
    rewrite_rejection,
)
from raydist.problems.generate import HUMAN_CHECK_COLUMNS, VARIANTS_SCHEMA

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = load_dyc_prompts(ROOT / "raydist" / "conf" / "prompts")
MODEL = "scripted/model"
ROLE_MARKERS = {
    "scenario": "real-world scenarios",
    "context": "write one short context",
    "rewrite": "Rewrite the programming problem",
    "validate_semantic": "Compare a rewritten programming problem",
    "validate_solution": "a programming problem and a solution",
}
SIGNATURE = "def has_close_elements(numbers: List[float], threshold: float) -> bool:"
CONTEXTS_ANSWER = ("numbers: weights of the loaves baked this morning, in grams\n"
                   "threshold: the smallest weight difference that tells two loaves apart")
GOOD_REWRITE = '''Here is the rewritten problem:
```python
from typing import List


def has_close_elements(numbers: List[float], threshold: float) -> bool:
    """ A bakery weighs its loaves; tell whether any two weigh closer to each other than the tolerance.
    >>> has_close_elements([1.0, 2.0, 3.0], 0.5)
    False
    >>> has_close_elements([1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3)
    True
    """
```'''
VARIANT_PROMPT = GOOD_REWRITE.split("```python\n")[1].split("```")[0]
YES = "VERDICT: YES\nREASON: nothing differs"


class ScriptedComplete:
    """``complete`` that answers by role: a string, a list consumed one per call, or an
    exception to raise; ``requests`` logs ``(role, messages, seed, max_tokens, grammar)``."""

    temperature = 0.7

    def __init__(self, **answers):
        self.answers = answers
        self.requests: list[tuple] = []
        self.usage = {"input_tokens": 0, "output_tokens": 0, "calls": 0}

    def __call__(self, messages, *, seed, max_tokens, grammar=None):
        text = messages[-1]["content"]
        role = next(role for role, marker in ROLE_MARKERS.items() if marker in text)
        self.requests.append((role, messages, seed, max_tokens, grammar))
        self.usage = {"input_tokens": self.usage["input_tokens"] + 10,
                      "output_tokens": self.usage["output_tokens"] + 3, "calls": self.usage["calls"] + 1}
        answer = self.answers[role]
        if isinstance(answer, list):
            answer = answer.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def roles(self) -> list[str]:
        return [request[0] for request in self.requests]


def scripted(**answers) -> dict:
    defaults = {"context": CONTEXTS_ANSWER, "rewrite": GOOD_REWRITE, "validate_semantic": YES,
                "validate_solution": YES}
    return defaults | answers


@pytest.fixture
def problem():
    return load_seeds("humaneval", ids=["HumanEval/0"])[0]


def recorded(tmp_path, **answers) -> tuple[RecordedLLM, ScriptedComplete]:
    complete = ScriptedComplete(**answers)
    return RecordedLLM(complete, model=MODEL, cache_dir=tmp_path / "cache"), complete


# --- Scenario Proposer ---------------------------------------------------------------


def test_scenario_pool_grows_over_rounds_and_drops_normalised_duplicates(tmp_path):
    llm, complete = recorded(tmp_path, scenario=[
        "Stock control for a corner bakery\n- Patient appointment scheduling\nHere are more scenarios:\n",
        "stock control, for a Corner bakery.\n1. Fleet fuel tracking for a taxi company\n"
        "PATIENT appointment   scheduling",
        "Library book lending records\nStudent grade reporting\n",
    ])
    pool = propose_scenarios(llm, ["retail", "health care"], target=4, seed=7, prompts=PROMPTS)
    assert pool == ["Stock control for a corner bakery", "Patient appointment scheduling",
                    "Fleet fuel tracking for a taxi company", "Library book lending records"]
    assert [request[2] for request in complete.requests] == [7000, 7001, 7002]


def test_scenario_prompt_lists_the_domains_and_the_names_already_taken(tmp_path):
    llm, complete = recorded(tmp_path, scenario=["Stock control for a corner bakery", "Fleet fuel tracking"])
    propose_scenarios(llm, ["retail", "logistics"], target=2, seed=0, prompts=PROMPTS, per_round=5)
    first, second = (request[1][-1]["content"] for request in complete.requests)
    assert "from these areas: retail, logistics." in first and "already taken" not in first
    assert "already taken; do not repeat them:\nStock control for a corner bakery\n" in second
    assert complete.requests[0][4] == "root ::= item{1,5}\nitem ::= [A-Za-z] [A-Za-z0-9 ,'&()/-]{2,79} \"\\n\"\n"


def test_scenarios_that_echo_the_request_are_dropped(tmp_path):
    echoes = "inventory management for a bakery\nRetail, health care\n"
    llm, _ = recorded(tmp_path, scenario=echoes + "Ride sharing for commuters")
    pool = propose_scenarios(llm, ["retail", "health care"], target=3, seed=0, prompts=PROMPTS, max_rounds=1)
    assert pool == ["Ride sharing for commuters"]


def test_scenario_rounds_stop_at_the_round_budget(tmp_path):
    llm, complete = recorded(tmp_path, scenario="Stock control for a corner bakery")
    pool = propose_scenarios(llm, ["retail"], target=5, seed=0, prompts=PROMPTS, max_rounds=3)
    assert pool == ["Stock control for a corner bakery"]
    assert len(complete.requests) == 3


def test_same_seed_gives_the_same_pool_from_the_cache(tmp_path):
    answers = ["Stock control for a corner bakery\nPatient appointment scheduling"]
    llm, complete = recorded(tmp_path, scenario=list(answers))
    first = propose_scenarios(llm, ["retail"], target=2, seed=3, prompts=PROMPTS)
    again = propose_scenarios(llm, ["retail"], target=2, seed=3, prompts=PROMPTS)
    assert first == again == ["Stock control for a corner bakery", "Patient appointment scheduling"]
    assert len(complete.requests) == 1
    assert [call["cached"] for call in llm.calls] == [False, True]


def test_normalise_scenario_ignores_case_whitespace_and_punctuation():
    assert normalise_scenario("  Inventory  management -- for a Bakery. ") == "inventory management for a bakery"


def test_parse_scenarios_drops_markers_headings_and_names_of_the_wrong_length():
    answer = ("Sure! Here are 4 scenarios:\n1) **Ride sharing for commuters**\n\n* \"Retail\"\n"
              "- Stock levels.\n" + " ".join(["word"] * 13) + "\n2. Hotel room booking.")
    assert parse_scenarios(answer) == ["Ride sharing for commuters", "Stock levels", "Hotel room booking"]


# --- Context Generator -----------------------------------------------------------------


def test_contexts_one_per_parameter_with_the_inferred_types_in_the_request(tmp_path, problem):
    llm, complete = recorded(tmp_path, **scripted())
    types = {"numbers": "list[float]", "threshold": "float"}
    contexts = generate_contexts(llm, problem, "quality control in a bakery", types, 5, prompts=PROMPTS)
    assert contexts == {"numbers": "weights of the loaves baked this morning, in grams",
                        "threshold": "the smallest weight difference that tells two loaves apart"}
    role, messages, seed, _, grammar = complete.requests[0]
    assert (role, seed) == ("context", 5)
    assert "- numbers: list[float]\n- threshold: float\n" in messages[0]["content"]
    assert "Scenario: quality control in a bakery" in messages[0]["content"]
    assert grammar == contexts_grammar(["numbers", "threshold"])
    assert llm.calls[0]["problem_id"] == "HumanEval/0"


def test_contexts_request_shows_recursive_types_of_a_real_seed(tmp_path):
    seed = load_seeds("humaneval", ids=["HumanEval/87"])[0]
    types = infer_parameter_types(seed)
    llm, complete = recorded(tmp_path, context="lst: shelves of crates\nx: the crate label to find")
    contexts = generate_contexts(llm, seed, "warehouse stock lookup", types, 0, prompts=PROMPTS)
    assert types == {"lst": "list[list[int]]", "x": "int"}
    assert "- lst: list[list[int]]\n- x: int\n" in complete.requests[0][1][0]["content"]
    assert contexts == {"lst": "shelves of crates", "x": "the crate label to find"}


def test_a_parameter_without_context_is_rejected_with_its_name(tmp_path, problem):
    llm, _ = recorded(tmp_path, context="numbers: loaf weights\nflour: kilograms of flour")
    with pytest.raises(Rejected) as caught:
        generate_contexts(llm, problem, "bakery", {"numbers": "list[float]", "threshold": "float"}, 0,
                          prompts=PROMPTS)
    assert str(caught.value) == "contexts: no context for parameter(s) threshold"


def test_a_copied_placeholder_is_no_context(tmp_path, problem):
    llm, complete = recorded(tmp_path, context="numbers: <context>\nthreshold: tolerance in grams")
    with pytest.raises(Rejected) as caught:
        generate_contexts(llm, problem, "bakery", {"numbers": "list[float]", "threshold": "float"}, 0,
                          prompts=PROMPTS)
    assert str(caught.value) == "contexts: no context for parameter(s) numbers"
    assert complete.requests[0][4].endswith("context ::= [^\\n <] [^\\n<]{0,119}\n")


def test_parse_contexts_reads_markdown_and_keeps_the_first_line_of_a_name():
    answer = "Contexts:\n- **numbers**: loaf weights\n`threshold` = tolerance\nnumbers: again\nthreshold:"
    assert parse_contexts(answer, ["numbers", "threshold"]) == {"numbers": "loaf weights", "threshold": "tolerance"}


# --- Prompt Rewriter -------------------------------------------------------------------


def test_rewrite_returns_the_fenced_prompt_under_the_signature_grammar(tmp_path, problem):
    llm, complete = recorded(tmp_path, **scripted())
    variant = rewrite_prompt(llm, problem, "bakery", {"numbers": "weights", "threshold": "tolerance"}, 2,
                             prompts=PROMPTS)
    assert variant == VARIANT_PROMPT
    assert complete.requests[0][4] == rewrite_grammar(problem)
    assert rewrite_grammar(problem) == (
        f'root ::= "```python\\nfrom typing import List\\n\\n\\n{SIGNATURE}\\n    \\"\\"\\"" text "\\"\\"\\"\\n```"\n'
        'text ::= ( [^\\"] | "\\"" [^\\"] | "\\"\\"" [^\\"] )*\n')


def test_rewrite_without_the_signature_is_rejected_with_the_signature(tmp_path, problem):
    answer = GOOD_REWRITE.replace("numbers: List[float]", "weights: List[float]")
    llm, _ = recorded(tmp_path, rewrite=answer)
    with pytest.raises(Rejected) as caught:
        rewrite_prompt(llm, problem, "bakery", {}, 0, prompts=PROMPTS)
    assert str(caught.value) == f"rewrite: the rewrite lacks the signature line {SIGNATURE!r}"
    assert caught.value.candidate.startswith("from typing import List\n\n\ndef has_close_elements(weights")


def test_rewrite_with_a_changed_example_output_is_rejected_with_its_number(tmp_path, problem):
    answer = GOOD_REWRITE.replace("    True\n", "    False\n")
    llm, _ = recorded(tmp_path, rewrite=answer)
    with pytest.raises(Rejected) as caught:
        rewrite_prompt(llm, problem, "bakery", {}, 0, prompts=PROMPTS)
    assert str(caught.value) == "rewrite: the rewrite lacks example(s) 2 of the seed"


def test_rewrite_that_echoes_the_request_is_rejected_with_the_line(tmp_path, problem):
    echo = "Rewrite the programming problem below so that it is set in this scenario: bakery"
    answer = GOOD_REWRITE.replace('    """', f'    """{echo}\n', 1)
    llm, _ = recorded(tmp_path, rewrite=answer)
    with pytest.raises(Rejected) as caught:
        rewrite_prompt(llm, problem, "bakery", {"numbers": "weights", "threshold": "tolerance"}, 0,
                       prompts=PROMPTS)
    assert str(caught.value) == f"rewrite: the rewrite copies the request: {echo!r}"


def test_a_rewrite_may_use_the_contexts_words_and_the_seeds_own_lines():
    problem = load_seeds("humaneval", ids=["HumanEval/0"])[0]
    request = ("Rewrite the programming problem below so that it is set in this scenario: bakery\n"
               "- numbers: weights of the loaves baked this morning\n" + problem.prompt)
    variant = problem.prompt.replace("Check if in given list of numbers",
                                     "Check if among the weights of the loaves baked this morning")
    assert rewrite_rejection(problem, variant, request) is None


def test_a_near_copy_of_the_seed_is_rejected_with_its_similarity():
    problem = load_seeds("humaneval", ids=["HumanEval/0"])[0]
    typo = problem.prompt.replace("closer to each other", "closer to each  other").replace("given threshold",
                                                                                          "the given threshold")
    assert rewrite_rejection(problem, typo) == "the rewrite is a near copy of the seed (similarity 0.98)"


def test_a_rewrite_that_leaves_the_scenario_out_is_rejected():
    problem = load_seeds("humaneval", ids=["HumanEval/0"])[0]
    vague = problem.prompt.replace("Check if in given list of numbers, are any two numbers closer to each other than\n"
                                   "    given threshold.", "Write your solution in the code provided below.")
    assert vague != problem.prompt
    grounding = ["stock control for a bakery", "weights of the loaves baked this morning"]
    assert rewrite_rejection(problem, vague, grounding=grounding) == (
        "the rewrite is not set in the scenario: it uses no word of the scenario or the contexts")
    told = vague.replace("Write your solution in the code provided below.",
                         "Do any two loaves on the bakery shelf weigh within the tolerance of each other?")
    assert rewrite_rejection(problem, told, grounding=grounding) is None
    # words the seed already uses prove nothing: no new word, no check
    assert rewrite_rejection(problem, vague, grounding=["numbers", "threshold"]) is None


def test_rewrite_that_repeats_the_seed_is_rejected(tmp_path, problem):
    llm, _ = recorded(tmp_path, rewrite=f"```python\n{problem.prompt}```")
    with pytest.raises(Rejected) as caught:
        rewrite_prompt(llm, problem, "bakery", {}, 0, prompts=PROMPTS)
    assert str(caught.value) == "rewrite: the rewrite is the seed prompt unchanged"


def test_a_rewrite_cut_off_inside_its_docstring_is_not_valid_python(tmp_path, problem):
    llm, _ = recorded(tmp_path, rewrite=GOOD_REWRITE.replace('    """\n```', ""))
    with pytest.raises(Rejected) as caught:
        rewrite_prompt(llm, problem, "bakery", {}, 0, prompts=PROMPTS)
    assert str(caught.value) == ("rewrite: the rewrite is not valid Python "
                                 "(unterminated triple-quoted string literal (detected at line 9) at line 5)")
    assert caught.value.candidate.startswith("from typing import List\n")


def test_examples_may_change_indentation_only(tmp_path, problem):
    dedented = VARIANT_PROMPT.replace("    >>> ", ">>> ").replace("    False", "False").replace("    True", "True")
    llm, _ = recorded(tmp_path, rewrite=dedented)
    assert rewrite_prompt(llm, problem, "bakery", {}, 0, prompts=PROMPTS) == dedented


def test_every_humaneval_seed_prompt_fits_its_own_rewrite_grammar():
    for seed in load_seeds("humaneval"):
        grammar = rewrite_grammar(seed)
        if "text ::=" not in grammar:
            assert seed.problem_id == "HumanEval/115"  # its description string follows an import
            continue
        # GBNF string literals escape as JSON strings do
        forced, closing = map(json.loads, grammar.split("\n")[0].removeprefix("root ::= ").split(" text "))
        whole = "```python\n" + seed.prompt.lstrip("\n").rstrip() + "\n```"
        middle = whole.removeprefix(forced).removesuffix(closing)
        assert whole == forced + middle + closing and closing[:3] not in middle, seed.problem_id


MBPP_FILE = Path(__file__).resolve().parents[1].parent / "shared/data/mbpp/sanitized-mbpp.json"


@pytest.mark.shared_data
@pytest.mark.skipif(not MBPP_FILE.is_file(), reason=f"MBPP-sanitized not found at {MBPP_FILE} (shared reference data)")
def test_every_mbpp_seed_prompt_fits_its_own_instruction_grammar():
    import re

    for seed in load_seeds("mbpp", path=str(MBPP_FILE)):
        grammar = rewrite_grammar(seed)
        root, line = grammar.splitlines()
        lines, chars = int(re.search(r"line\{1,(\d+)\}", root)[1]), int(re.search(r"\{0,(\d+)\}", line)[1])
        assert lines >= 6 and chars >= 399
        assert root == f'root ::= "```\\n" line{{1,{lines}}} {json.dumps(chr(10) + seed.signature + chr(10) + "```")}'
        assert line == f'line ::= [^`\\n ] [^`\\n]{{0,{chars}}} "\\n"'
        # the same language as a regular expression: the seed itself is a sentence of it
        language = re.compile(rf"```\n(?:[^`\n ][^`\n]{{0,{chars}}}\n){{1,{lines}}}\n" + re.escape(seed.signature)
                              + r"\n```")
        assert language.fullmatch("```\n" + seed.prompt.rstrip("\n") + "\n```"), seed.problem_id


# --- Validator -------------------------------------------------------------------------


@pytest.mark.parametrize(("answer", "expected"), [
    ("VERDICT: YES\nREASON: nothing differs", ("YES", "nothing differs")),
    ("**Verdict:** no\n**Reason:** the threshold became a maximum", ("NO", "the threshold became a maximum")),
    ("Yes, they match.", ("YES", "")),
    ("ANSWER = NO", ("NO", "")),
    ("I think the problems are similar.", (None, "")),
    ("REASON: unclear\nVERDICT: YES", ("YES", "unclear")),
])
def test_parse_verdict(answer, expected):
    assert parse_verdict(answer) == expected


def test_validate_asks_two_separate_questions_and_shows_the_solution_code(tmp_path, problem):
    llm, complete = recorded(tmp_path, validate_semantic=YES,
                             validate_solution="VERDICT: NO\nREASON: the solution ignores loaves")
    verdicts = validate(llm, problem, VARIANT_PROMPT, 4, prompts=PROMPTS)
    assert (verdicts.semantic, verdicts.consistent) == ("YES", "NO")
    assert verdicts.reasons == {"semantic": "nothing differs", "consistent": "the solution ignores loaves"}
    assert not verdicts.accepted
    assert verdicts.rejection() == "validator: consistent NO: the solution ignores loaves"
    assert complete.roles() == ["validate_semantic", "validate_solution"]
    assert all(request[4] == VERDICT_GRAMMAR and request[2] == 4 for request in complete.requests)
    solution_message = complete.requests[1][1][0]["content"]
    assert "distance = abs(elem - elem2)" in solution_message
    assert "Check if in given list of numbers" not in solution_message
    assert VARIANT_PROMPT.rstrip() in solution_message


# --- generate_variant ------------------------------------------------------------------


POOL = [f"scenario number {i}" for i in range(10)]


def test_accepted_variant_keeps_the_seed_signature_tests_and_solution(tmp_path, problem):
    llm, complete = recorded(tmp_path, **scripted())
    variant = generate_variant(llm, problem, POOL, 3, PROMPTS)
    assert variant.accepted and variant.rejection is None and variant.error is None
    assert variant.variant_id == stable_hash({"seed_id": "HumanEval/0", "generation_seed": 3,
                                              "generator_model": MODEL})
    assert variant.scenario == random.Random("HumanEval/0:3").choice(POOL)
    assert (variant.semantic_verdict, variant.consistency_verdict) == ("YES", "YES")
    assert variant.prompt == VARIANT_PROMPT
    assert variant.contexts == {"numbers": "weights of the loaves baked this morning, in grams",
                                "threshold": "the smallest weight difference that tells two loaves apart"}
    assert (variant.tests, variant.canonical_solution, variant.seed_prompt) == (
        problem.tests, problem.canonical_solution, problem.prompt)
    assert variant.canonical_passed is None
    assert complete.roles() == ["context", "rewrite", "validate_semantic", "validate_solution"]


def test_a_validator_no_rejects_the_variant_with_its_reason(tmp_path, problem):
    llm, _ = recorded(tmp_path, **scripted(validate_semantic="VERDICT: NO\nREASON: the tolerance became a maximum"))
    variant = generate_variant(llm, problem, POOL, 0, PROMPTS)
    assert not variant.accepted
    assert variant.rejection == "validator: semantic NO: the tolerance became a maximum"
    assert variant.prompt == VARIANT_PROMPT


def test_a_rejected_rewrite_is_a_row_with_the_rejected_text(tmp_path, problem):
    llm, complete = recorded(tmp_path, **scripted(rewrite=GOOD_REWRITE.replace("    True\n", "")))
    variant = generate_variant(llm, problem, POOL, 0, PROMPTS)
    assert not variant.accepted and variant.error is None
    assert variant.rejection == "rewrite: the rewrite lacks example(s) 2 of the seed"
    assert variant.prompt is not None and SIGNATURE in variant.prompt
    assert complete.roles() == ["context", "rewrite"]


def test_a_failed_call_is_recorded_and_gives_a_variant_with_the_error(tmp_path, problem):
    failure = ModelUnreachable("model 'm' at http://x did not answer after 1 attempt(s)")
    llm, complete = recorded(tmp_path, **scripted(rewrite=failure))
    variant = generate_variant(llm, problem, POOL, 0, PROMPTS)
    assert variant.error == "rewrite: ModelUnreachable: model 'm' at http://x did not answer after 1 attempt(s)"
    assert not variant.accepted and variant.rejection is None and variant.prompt is None
    assert variant.contexts["numbers"] == "weights of the loaves baked this morning, in grams"
    assert [(call["role"], call["ok"]) for call in llm.calls] == [("context", True), ("rewrite", False)]
    assert llm.calls[1]["error"] == "ModelUnreachable: model 'm' at http://x did not answer after 1 attempt(s)"
    assert llm.calls[1]["problem_id"] == "HumanEval/0"
    assert len(list((tmp_path / "cache").glob("*.json"))) == 1  # only the answered call is cached


def test_generation_seeds_choose_scenarios_and_request_seeds(tmp_path, problem):
    llm, complete = recorded(tmp_path, **scripted())
    variants = [generate_variant(llm, problem, POOL, seed, PROMPTS) for seed in range(6)]
    assert [v.scenario for v in variants] == [random.Random(f"HumanEval/0:{s}").choice(POOL) for s in range(6)]
    assert len({v.scenario for v in variants}) > 1
    assert len({v.variant_id for v in variants}) == 6
    assert sorted({request[2] for request in complete.requests}) == list(range(6))


def test_empty_pool_and_negative_seed_are_refused(tmp_path, problem):
    llm, _ = recorded(tmp_path, **scripted())
    with pytest.raises(ValueError, match="scenario pool is empty"):
        generate_variant(llm, problem, [], 0, PROMPTS)
    with pytest.raises(ValueError, match=">= 0"):
        generate_variant(llm, problem, POOL, -1, PROMPTS)


# --- RecordedLLM -----------------------------------------------------------------------


def test_a_repeated_request_is_answered_from_the_disk_cache(tmp_path):
    llm, complete = recorded(tmp_path, **scripted())
    messages = PROMPTS.messages("validate_semantic", seed_prompt="a", variant_prompt="b")
    first = llm("validate_semantic", messages, seed=1, max_tokens=8, grammar=VERDICT_GRAMMAR)
    second = llm("validate_semantic", messages, seed=1, max_tokens=8, grammar=VERDICT_GRAMMAR)
    reopened = RecordedLLM(complete, model=MODEL, cache_dir=tmp_path / "cache")
    third = reopened("validate_semantic", messages, seed=1, max_tokens=8, grammar=VERDICT_GRAMMAR)
    assert first == second == third == YES
    assert len(complete.requests) == 1
    assert [call["cached"] for call in llm.calls] == [False, True]
    assert reopened.calls[0]["cached"] and reopened.calls[0]["request_hash"] == llm.calls[0]["request_hash"]


def test_seed_grammar_tokens_and_model_each_change_the_request(tmp_path):
    llm, complete = recorded(tmp_path, **scripted())
    messages = PROMPTS.messages("validate_semantic", seed_prompt="a", variant_prompt="b")
    llm("validate_semantic", messages, seed=1, max_tokens=8)
    llm("validate_semantic", messages, seed=2, max_tokens=8)
    llm("validate_semantic", messages, seed=1, max_tokens=9)
    llm("validate_semantic", messages, seed=1, max_tokens=8, grammar=VERDICT_GRAMMAR)
    RecordedLLM(complete, model="other/model", cache_dir=tmp_path / "cache")(
        "validate_semantic", messages, seed=1, max_tokens=8)
    assert len(complete.requests) == 5


def test_call_records_hold_tokens_time_and_a_shared_log(tmp_path):
    log: list[dict] = []
    complete = ScriptedComplete(**scripted())
    llm = RecordedLLM(complete, model=MODEL, cache_dir=tmp_path, log=log)
    llm("context", PROMPTS.messages("context", prompt="p", param_types={"x": "int"}, scenario="s"),
        seed=0, max_tokens=8, problem_id="HumanEval/9")
    assert llm.calls is log
    record = log[0]
    assert {key: record[key] for key in ("role", "problem_id", "cached", "ok", "error", "input_tokens",
                                         "output_tokens")} == {
        "role": "context", "problem_id": "HumanEval/9", "cached": False, "ok": True, "error": None,
        "input_tokens": 10, "output_tokens": 3}
    assert record["seconds"] >= 0 and len(record["request_hash"]) == 24


def test_a_failed_call_raises_llm_call_failed_after_recording_it(tmp_path):
    llm, complete = recorded(tmp_path, scenario=RuntimeError("boom"))
    with pytest.raises(LLMCallFailed) as caught:
        llm("scenario", PROMPTS.messages("scenario", domains=["x"], count=1, existing=[]), seed=0, max_tokens=4)
    assert str(caught.value) == "scenario: RuntimeError: boom"
    assert (caught.value.role, caught.value.problem_id) == ("scenario", None)
    assert llm.calls[0]["ok"] is False and llm.calls[0]["error"] == "RuntimeError: boom"


def test_an_empty_answer_is_an_answer_cached_and_refused_by_its_parser(tmp_path, problem):
    from raydist.models.completion import EmptyCompletion

    llm, complete = recorded(tmp_path, rewrite=EmptyCompletion("model 'm' returned an empty answer"))
    with pytest.raises(Rejected) as caught:
        rewrite_prompt(llm, problem, "bakery", {"numbers": "weights", "threshold": "tolerance"}, 0, prompts=PROMPTS)
    assert str(caught.value) == "rewrite: the rewrite is empty"
    assert llm.calls[-1]["ok"] is True and llm.calls[-1]["error"] is None
    again, _ = recorded(tmp_path, rewrite=RuntimeError("not asked: the empty answer is cached"))
    with pytest.raises(Rejected):
        rewrite_prompt(again, problem, "bakery", {"numbers": "weights", "threshold": "tolerance"}, 0, prompts=PROMPTS)
    assert again.calls[-1]["cached"] is True


def test_missing_template_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="dyc_scenario.j2 is missing"):
        load_dyc_prompts(tmp_path)


# --- tables and the human check --------------------------------------------------------


def some_variants(tmp_path, problem) -> list[Variant]:
    good, _ = recorded(tmp_path / "good", **scripted())
    failing, _ = recorded(tmp_path / "bad", **scripted(validate_solution=RuntimeError("server gone")))
    return ([generate_variant(good, problem, POOL, seed, PROMPTS) for seed in range(5)]
            + [generate_variant(failing, problem, POOL, 9, PROMPTS)])


def test_variants_table_round_trip(tmp_path, problem):
    variants = some_variants(tmp_path, problem)
    table = variants_table(variants)
    assert table.schema == VARIANTS_SCHEMA and table.num_rows == 6
    assert variants_from_table(table) == variants
    assert variants[-1].error == "validate_solution: RuntimeError: server gone"


def test_schema_columns_are_the_variant_fields_in_order():
    assert VARIANTS_SCHEMA.names == [f.name for f in fields(Variant)]


def test_a_variant_field_without_a_column_is_refused_naming_it():
    @dataclass(frozen=True)
    class Reviewed(Variant):
        reviewer: str = "ana"

    with pytest.raises(ValueError) as caught:
        variants_table([Reviewed("v", "s", "humaneval", 0, "gen", "x")])
    assert str(caught.value) == ("variants.parquet row 0 has key(s) 'reviewer', which are no columns of "
                                 "variants.parquet; the columns are " + ", ".join(VARIANTS_SCHEMA.names))


def test_human_check_csv_has_n_accepted_pairs_and_empty_reviewer_columns(tmp_path, problem):
    variants = some_variants(tmp_path, problem)
    path = export_for_human_check(variants, 3, 0, tmp_path / "check.csv")
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert tuple(rows[0]) == HUMAN_CHECK_COLUMNS
    assert len(rows) == 3
    accepted = {v.variant_id: v for v in variants if v.accepted}
    for row in rows:
        variant = accepted[row["variant_id"]]
        assert (row["seed_prompt"], row["variant_prompt"], row["scenario"]) == (
            problem.prompt, variant.prompt, variant.scenario)
        assert (row["semantic"], row["consistent"], row["human_verdict"], row["human_note"]) == ("YES", "YES", "", "")
        assert row["contexts"].startswith('{"numbers": ')
    again = export_for_human_check(list(reversed(variants)), 3, 0, tmp_path / "again.csv")
    assert again.read_text(encoding="utf-8") == path.read_text(encoding="utf-8")


def test_human_check_refuses_more_pairs_than_accepted(tmp_path, problem):
    with pytest.raises(ValueError, match="cannot sample 6 pairs .* from 5 accepted"):
        export_for_human_check(some_variants(tmp_path, problem), 6, 0, tmp_path / "check.csv")
