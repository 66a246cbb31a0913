"""What the host runs in a program sandbox: a completion and the tests that score it.

The sandbox side, which executes a :class:`Program` and proves that every test ran, is
``_program_runner.py`` (copied into each sandbox by :class:`raydist.problems.execute.ProgramRunner`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

__all__ = ["Program", "assert_sites"]


@dataclass(frozen=True)
class Program:
    """A completion and the tests that score it: ``solution`` runs first (as ``__main__``),
    then ``setup`` and each of ``tests`` (Python statements holding ``assert`` statements) in
    the tests' own namespace. It passes only when every test returned normally and every
    ``assert`` in ``tests`` executed at least once (:func:`assert_sites` counts them)."""

    solution: str
    tests: tuple[str, ...]
    setup: str = ""

    def script(self) -> str:
        """The same program as one script (solution, set-up, tests), as
        :func:`raydist.problems.assemble_program` writes it."""
        parts = [self.solution.rstrip("\n"), self.setup.strip("\n"), *self.tests]
        return "\n\n".join(part for part in parts if part) + "\n"


def assert_sites(tests) -> int:
    """How many ``assert`` statements ``tests`` (a sequence of source texts) hold; -1 when
    one is not valid Python (such tests can never be proved to have run)."""
    try:
        return sum(isinstance(node, ast.Assert) for test in tests for node in ast.walk(ast.parse(test)))
    except (SyntaxError, ValueError):
        return -1
