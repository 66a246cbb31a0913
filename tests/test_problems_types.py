"""Input type inference (DyCodeEval §3.2) on single values, on synthetic problems and on real seeds."""

from pathlib import Path

import pytest

from raydist.problems import (
    Problem,
    SkippedArgument,
    abstract_type,
    infer_parameter_types,
    infer_types,
    load_humaneval,
    load_mbpp,
)

MBPP = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "mbpp" / "sanitized-mbpp.json"
MISSING_MBPP = f"MBPP-sanitized not found at {MBPP} (shared reference data)"


def needs_mbpp(test):
    return pytest.mark.shared_data(pytest.mark.skipif(not MBPP.is_file(), reason=MISSING_MBPP)(test))


def _problem(signature: str, *tests: str, examples: tuple[str, ...] = ()) -> Problem:
    name = signature.split("(")[0].removeprefix("def ")
    return Problem("t/1", "mbpp", "", name, signature, f"{signature}\n    pass\n", tests, "", examples)


# --- abstract_type -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, "int"),
        (1.5, "float"),
        ("a", "str"),
        (True, "bool"),
        (None, "None"),
        (b"x", "bytes"),
        (2j, "complex"),
        ([1, 2], "list[int]"),
        ([1, "a"], "list[int | str]"),
        (["a", 1, None, 2.0, True], "list[bool | int | float | str | None]"),
        ([], "list[Any]"),
        ({}, "dict[Any, Any]"),
        (set(), "set[Any]"),
        ({1, 2}, "set[int]"),
        (frozenset({"a"}), "frozenset[str]"),
        ({"a": [1, 2]}, "dict[str, list[int]]"),
        ([(1, "x"), (2, "y")], "list[tuple[int, str]]"),
        ([[1], [2, 3]], "list[list[int]]"),
    ],
)
def test_abstract_type_of_scalars_and_containers(value, expected):
    assert abstract_type(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ((), "tuple[()]"),
        ((1,), "tuple[int]"),
        ((1, 2), "tuple[int, int]"),
        ((1, "a", 2.0), "tuple[int, str, float]"),
        ((1, 2, 3), "tuple[int, ...]"),
        ((("a", 1), ("b", 2), ("c", 3)), "tuple[tuple[str, int], ...]"),
    ],
)
def test_abstract_type_of_tuples_keeps_positions_unless_three_or_more_share_one_type(value, expected):
    assert abstract_type(value) == expected


def test_abstract_type_merges_unions_structurally():
    # an empty list carries no element type, so it joins the non-empty one
    assert abstract_type([[], [1]]) == "list[list[int]]"
    # tuples of one length merge position by position
    assert abstract_type([(1, "a"), (2, 3)]) == "list[tuple[int, int | str]]"
    # a tuple[T, ...] absorbs the fixed tuples beside it
    assert abstract_type([(1, 2), (1, 2, 3)]) == "list[tuple[int, ...]]"
    assert abstract_type([(1, 2, 3), (1, None), ()]) == "list[tuple[int | None, ...]]"
    # dicts merge keys and values separately
    assert abstract_type([{"a": 1}, {2: "b"}]) == "list[dict[int | str, int | str]]"


def test_abstract_type_is_independent_of_element_order():
    assert abstract_type([None, "a", 1]) == abstract_type([1, "a", None]) == "list[int | str | None]"


# --- parameters and calls ------------------------------------------------------------


def test_types_merge_across_calls_per_parameter_in_signature_order():
    problem = _problem("def f(a, b):", "assert f(1, 'x') == 1", "assert f(2.5, 'y') == 2", "assert f(None, []) is None")
    types = infer_parameter_types(problem)
    assert types == {"a": "int | float | None", "b": "str | list[Any]"}
    assert list(types) == ["a", "b"]


def test_keywords_map_by_name_and_surplus_arguments_go_to_star_parameters():
    problem = _problem("def f(a, *rest, key=None, **options):", "assert f(1, 'x', 2.0, key=[1], color='red')")
    types = infer_parameter_types(problem)
    assert types == {"a": "int", "rest": "float | str", "key": "list[int]", "options": "str"}
    assert list(types) == ["a", "rest", "key", "options"]


def test_unobserved_parameter_is_any():
    assert infer_parameter_types(_problem("def f(a, b=3):", "assert f(1) == 1")) == {"a": "int", "b": "Any"}


def test_non_literal_arguments_are_skipped_and_reported():
    problem = _problem("def f(a, b):", "assert f(1, 2) == 3", "assert f(x + 1, *pair) == 3", "assert f(1, 2, 3) == 0")
    result = infer_types(problem)
    assert result.types == {"a": "int", "b": "int"}
    assert result.skipped == (
        SkippedArgument("test 2", "x + 1", "is not a literal, so it gives no type for 'a'"),
        SkippedArgument("test 2", "*pair", "unpacks a value into several arguments"),
        SkippedArgument("test 3", "3", "matches no parameter of the signature"),
    )


def test_calls_through_a_check_function_parameter_are_calls_of_the_entry_point():
    test = ("def check(candidate):\n    assert candidate([1, 2]) == 3\n    for x in range(3):\n"
            "        assert candidate([x])\n\ncheck(f)")
    result = infer_types(_problem("def f(xs):", test))
    assert result.types == {"xs": "list[int]"}
    assert result.skipped == (SkippedArgument("test 1", "[x]", "is not a literal, so it gives no type for 'xs'"),)


def test_docstring_examples_fill_parameters_the_tests_leave_untyped():
    problem = _problem("def f(xs):", "assert f(make()) == 1", examples=(">>> round(f([1, 2]), 2)\n-0.5",))
    assert infer_parameter_types(problem) == {"xs": "list[int]"}


def test_a_signature_that_does_not_parse_is_a_value_error():
    with pytest.raises(ValueError, match="does not parse"):
        infer_parameter_types(_problem("def f(a", "assert f(1)"))


# --- real seeds ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def humaneval() -> dict[str, Problem]:
    return {problem.problem_id: problem for problem in load_humaneval()}


@pytest.mark.parametrize(
    ("problem_id", "expected"),
    [
        ("HumanEval/0", {"numbers": "list[float]", "threshold": "float"}),
        ("HumanEval/22", {"values": "list[int | float | str | dict[Any, Any] | list[Any]]"}),
        ("HumanEval/87", {"lst": "list[list[int]]", "x": "int"}),
        ("HumanEval/95", {"dict": "dict[int | str, str]"}),
        ("HumanEval/127", {"interval1": "tuple[int, int]", "interval2": "tuple[int, int]"}),
        ("HumanEval/137", {"a": "int | str", "b": "int | float | str"}),
        ("HumanEval/160", {"operator": "list[str]", "operand": "list[int]"}),
    ],
)
def test_humaneval_parameter_types(humaneval, problem_id, expected):
    assert infer_parameter_types(humaneval[problem_id]) == expected


def test_humaneval_53_keeps_the_literal_calls_of_its_fallback_test(humaneval):
    result = infer_types(humaneval["HumanEval/53"])
    assert result.types == {"x": "int", "y": "int"}
    assert [skipped.argument for skipped in result.skipped] == ["x", "y"]


def test_humaneval_32_takes_its_type_from_the_docstring_examples(humaneval):
    # its only test calls find_zero(copy.deepcopy(coeffs)) with random coefficients
    assert infer_parameter_types(humaneval["HumanEval/32"]) == {"xs": "list[int]"}


def test_humaneval_38_and_50_have_no_literal_input_anywhere(humaneval):
    assert infer_parameter_types(humaneval["HumanEval/38"]) == {"s": "Any"}
    assert infer_parameter_types(humaneval["HumanEval/50"]) == {"s": "Any"}


def test_humaneval_has_a_type_for_every_parameter_but_two(humaneval):
    untyped = [pid for pid, p in humaneval.items() if "Any" in infer_parameter_types(p).values()]
    assert untyped == ["HumanEval/38", "HumanEval/50"]


@pytest.fixture(scope="module")
def mbpp() -> dict[str, Problem]:
    if not MBPP.is_file():
        pytest.skip(MISSING_MBPP)
    return {problem.problem_id: problem for problem in load_mbpp(MBPP)}


@needs_mbpp
@pytest.mark.parametrize(
    ("problem_id", "expected"),
    [
        ("Mbpp/2", {"test_tup1": "tuple[int, ...]", "test_tup2": "tuple[int, ...]"}),
        ("Mbpp/63", {"test_list": "list[tuple[int, int]]"}),
        ("Mbpp/65", {"data_list": "list[int | list[int]]"}),
        ("Mbpp/585", {"items": "list[dict[str, float | str]]", "n": "int"}),
        ("Mbpp/722", {"students": "dict[str, tuple[float, int]]", "h": "float", "w": "int"}),
        ("Mbpp/744", {"test_tup": "tuple[int | None, ...]"}),
    ],
)
def test_mbpp_parameter_types(mbpp, problem_id, expected):
    assert infer_parameter_types(mbpp[problem_id]) == expected


@needs_mbpp
def test_mbpp_parameters_without_any_literal_are_only_never_passed_defaults(mbpp):
    untyped = {pid: infer_parameter_types(p) for pid, p in mbpp.items() if "Any" in infer_parameter_types(p).values()}
    assert untyped == {"Mbpp/627": {"array": "list[int]", "start": "Any", "end": "Any"}}
