"""HumanEval's ``check(candidate)`` tests as standalone asserts on the entry point.

A HumanEval test is a module that defines ``check(candidate)`` (plus, often, a
``METADATA`` dict); the harness runs ``check(entry_point)``. When the body of ``check``
is nothing but ``assert`` statements (and no-op expressions such as a bare ``print``),
each assert becomes one test with ``candidate`` renamed to the entry point, and asserts
that never call it (the 48 ``assert True`` lines of HumanEval 1.0.3) are dropped.
Otherwise (loops, local variables, imports inside ``check``) the whole ``check`` function
followed by ``check(<entry_point>)`` is kept as a single test: the fallback, which runs
exactly what HumanEval runs.

In HumanEval 1.0.3 the fallback is needed by HumanEval/32, /38, /44, /50, /53 and /151.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from raydist.problems._source import called_names, parse

CANDIDATE = "candidate"
CHECK = "check"


@dataclass(frozen=True)
class ConvertedTests:
    """The tests of one HumanEval problem: asserts, setup code, and whether the fallback was used."""

    tests: tuple[str, ...]
    setup: str
    fallback: bool


class _RenameCandidate(ast.NodeTransformer):
    def __init__(self, entry_point: str):
        self.entry_point = entry_point

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id == CANDIDATE:
            return ast.copy_location(ast.Name(id=self.entry_point, ctx=node.ctx), node)
        return node


def convert_tests(test: str, prompt: str, entry_point: str) -> ConvertedTests:
    """Standalone asserts (or the fallback) and ``test_setup`` for one HumanEval record.

    ``test_setup`` is the test module without ``check`` (``METADATA``...), preceded by the
    prompt's imports and helper functions when the tests call a helper defined in the prompt
    (``poly`` in HumanEval/32, ``encode_cyclic`` in /38, ``encode_shift`` in /50), so that a
    program defining only the entry point can run the tests. Raises ``ValueError`` when the
    test module has no ``check`` function.
    """
    module = parse(test)
    checks = [node for node in module.body if isinstance(node, ast.FunctionDef) and node.name == CHECK]
    if not checks:
        raise ValueError("the test code defines no check(candidate) function")
    check = checks[-1]
    rest = "\n\n".join(ast.get_source_segment(test, node) for node in module.body if node is not check)
    setup = _join(_prompt_helpers(prompt, entry_point, check), rest)
    if _only_asserts(check):
        return ConvertedTests(_standalone_asserts(check, entry_point), setup, fallback=False)
    whole = f"{ast.get_source_segment(test, check)}\n\n\n{CHECK}({entry_point})"
    return ConvertedTests((whole,), setup, fallback=True)


def _only_asserts(check: ast.FunctionDef) -> bool:
    return all(isinstance(node, ast.Assert) or _is_no_op(node) for node in check.body)


def _is_no_op(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, (ast.Constant, ast.Name))


def _standalone_asserts(check: ast.FunctionDef, entry_point: str) -> tuple[str, ...]:
    rename = _RenameCandidate(entry_point)
    asserts = [node for node in check.body if isinstance(node, ast.Assert) and CANDIDATE in called_names(node)]
    return tuple(ast.unparse(rename.visit(node)) for node in asserts)


def _prompt_helpers(prompt: str, entry_point: str, check: ast.FunctionDef) -> str:
    """The prompt's imports and the helper functions ``check`` refers to, as source text."""
    module = parse(prompt)
    used = {node.id for node in ast.walk(check) if isinstance(node, ast.Name)}
    helpers = [
        node
        for node in module.body
        if isinstance(node, ast.FunctionDef) and node.name != entry_point and node.name in used
    ]
    if not helpers:
        return ""
    imports = [node for node in module.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    return "\n\n".join(ast.get_source_segment(prompt, node) for node in imports + helpers)


def _join(*parts: str) -> str:
    return "\n\n".join(part.strip("\n") for part in parts if part.strip())
