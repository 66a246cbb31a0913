"""How a model's answer becomes the program that is scored (pure: the programs run here are
the datasets' own canonical solutions, executed in-process)."""

from __future__ import annotations

from raydist.problems import load_seeds
from raydist.problems.evaluate import Item, extract_solution, program_for

HE = {p.problem_id: p for p in load_seeds("humaneval", ids=["HumanEval/0", "HumanEval/10"])}


def item_of(problem) -> Item:
    return Item(problem.problem_id, None, problem.prompt, problem.entry_point, tuple(problem.tests), problem.test_setup)


def passes(problem, solution: str) -> bool:
    try:
        exec(compile(program_for(item_of(problem), solution).script(), "<program>", "exec"), {})  # noqa: S102
    except AssertionError:
        return False
    return True


def test_a_whole_function_without_the_prompts_import_gets_it():
    problem = HE["HumanEval/0"]
    function = problem.canonical_solution[problem.canonical_solution.index("def has_close_elements"):]
    assert "List" in function and "import" not in function
    solution = extract_solution(f"Here it is:\n```python\n{function}```\nDone.", problem.prompt, problem.entry_point)
    assert solution == f"from typing import List\n\n\n{function}"
    assert passes(problem, solution)


def test_the_prompts_helper_function_comes_with_it():
    problem = HE["HumanEval/10"]  # make_palindrome calls the prompt's is_palindrome
    function = problem.canonical_solution[problem.canonical_solution.index("def make_palindrome"):]
    solution = extract_solution(f"```python\n{function}```", problem.prompt, problem.entry_point)
    assert solution.startswith("def is_palindrome(string: str) -> bool:")
    assert passes(problem, solution)


def test_a_body_only_answer_is_appended_to_the_prompt():
    problem = HE["HumanEval/0"]
    body = problem.canonical_solution[len(problem.prompt):]
    assert extract_solution(f"```\n{body}```", problem.prompt, problem.entry_point) == problem.prompt + body
    assert extract_solution(body, problem.prompt, problem.entry_point) == problem.prompt + body  # no fence


def test_a_prose_preamble_contributes_only_its_imports():
    prompt = "Write a function to add two numbers.\nimport math is not needed.\n\ndef add(a, b):\n"
    code = "def add(a, b):\n    return a + b\n"
    assert extract_solution(f"```python\n{code}```", prompt, "add") == code
    prompt = "Write a function to find the root.\nimport math\n\ndef root(x):\n"
    code = "def root(x):\n    return math.sqrt(x)\n"
    assert extract_solution(f"```py\n{code}```", prompt, "root") == f"import math\n\n\n{code}"
