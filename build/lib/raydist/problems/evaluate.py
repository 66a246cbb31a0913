"""Evaluation of a model under test on problems (DyCodeEval §4.1, §5): sample n completions
of a prompt, turn each into a program with the problem's tests, score it in the sandbox.

Plain Python: the LLM arrives as a ``complete`` callable (``raydist.models.completion``) and
programs run through a ``raydist.problems.execute.ProgramRunner``; the pipeline puts both on
Ray.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from raydist.problems._program_runner import Program

#: How a model under test is asked: the prompt as HumanEval/MBPP give it (a signature and a
#: description), the answer as one fenced block holding the whole function.
SYSTEM = "You are an expert Python programmer. Answer with code only."
INSTRUCTION = ("Complete the following Python function. Answer with the complete function (its `def` "
               "line included) in one ```python code block.\n\n{prompt}")
_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)


@dataclass(frozen=True)
class Item:
    """One prompt to evaluate: a seed problem (``variant_id`` None) or an accepted variant,
    with the seed's tests (variants keep the seed's signature, tests and solution)."""

    seed_id: str
    variant_id: str | None
    prompt: str
    entry_point: str
    tests: tuple[str, ...]
    test_setup: str

    @property
    def item_id(self) -> str:
        """``seed_id`` for a seed, ``seed_id::variant_id`` for a variant."""
        return self.seed_id if self.variant_id is None else f"{self.seed_id}::{self.variant_id}"


def messages_for(prompt: str) -> list[dict]:
    """The chat request that asks a model under test for a solution of ``prompt``."""
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": INSTRUCTION.format(prompt=prompt)}]


def extract_solution(answer: str, prompt: str, entry_point: str) -> str:
    """The program text of a model's ``answer``: the first fenced code block (or the whole
    answer when there is none).

    When the code defines ``entry_point`` itself, the prompt's own code before that ``def``
    (HumanEval's imports and helper functions, e.g. ``from typing import List``) comes first,
    as HumanEval's harness runs ``prompt + completion``: a model is not failed for leaving out
    an import its prompt already made. A prose preamble (MBPP's instruction) is not code and
    contributes only its ``import`` lines. Otherwise the code is taken as the function's body
    and appended to ``prompt`` (HumanEval's completion convention).
    """
    match = _FENCE.search(answer)
    code = match.group(1) if match else answer
    definition = re.compile(rf"^\s*def\s+{re.escape(entry_point)}\s*\(", re.MULTILINE)
    if not definition.search(code):
        return prompt + code
    found = definition.search(prompt)
    preamble = prompt[:found.start()] if found else ""
    try:
        ast.parse(preamble)
    except SyntaxError:
        preamble = "".join(line for line in preamble.splitlines(keepends=True) if _is_import(line))
    return (preamble.strip() + "\n\n\n" + code) if preamble.strip() else code


def _is_import(line: str) -> bool:
    try:
        tree = ast.parse(line.strip())
    except SyntaxError:
        return False
    return len(tree.body) == 1 and isinstance(tree.body[0], (ast.Import, ast.ImportFrom))


def program_for(item: Item, solution: str) -> Program:
    """``solution`` scored by the item's test set-up and asserts (``Program.script()`` is the
    same as one script)."""
    return Program(solution, tuple(item.tests), item.test_setup)


def sample(complete, item: Item, *, n: int, max_tokens: int, seed: int) -> list[str]:
    """``n`` answers of a model for ``item``: request seeds ``seed * 1000 + i`` so samples
    differ at temperature > 0 and repeat exactly on a second run (and in the request cache).
    Raises what ``complete`` raises (the pipeline records it as a failed item)."""
    return [complete(messages_for(item.prompt), seed=seed * 1000 + i, max_tokens=max_tokens) for i in range(n)]
