"""Small readers of Python source shared by the seed loaders and the type inference."""

from __future__ import annotations

import ast
import io
import re
import tokenize
import warnings

_OPENING, _CLOSING = "([{", ")]}"


def parse(source: str) -> ast.Module:
    """``ast.parse`` without the warnings that dataset code triggers (``"\\w"`` in a plain string).

    Raises ``SyntaxError`` as ``ast.parse`` does.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (SyntaxWarning, DeprecationWarning))
        return ast.parse(source)


def function_node(source: str, name: str) -> ast.FunctionDef | None:
    """The last top-level ``def name`` in ``source`` (the one a call would reach), or ``None``."""
    found = None
    for node in parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            found = node
    return found


def def_header(source: str, node: ast.FunctionDef) -> str:
    """The text of top-level ``node``'s header, from ``def`` to the colon that ends it, verbatim.

    A header that spans several lines keeps its line breaks; decorators are not part of it.
    The header ends at the first ``:`` outside brackets, so a default such as
    ``key=lambda x: x`` inside the parentheses does not end it.
    """
    text = "".join(_physical_lines(source)[node.lineno - 1:])
    depth = 0
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type != tokenize.OP:
            continue
        if token.string in _OPENING:
            depth += 1
        elif token.string in _CLOSING:
            depth -= 1
        elif token.string == ":" and depth == 0:
            row, col = token.end
            header_lines = _physical_lines(text)[:row]
            header_lines[-1] = header_lines[-1][:col]
            return "".join(header_lines)
    raise ValueError(f"the header of def {node.name} has no closing ':'")


def _physical_lines(text: str) -> list[str]:
    # Split only where the tokenizer ends a line; str.splitlines also splits at \f, \v...
    return re.split(r"(?<=\n)|(?<=\r)(?!\n)", text)


def doctest_examples(docstring: str) -> tuple[str, ...]:
    """The ``>>>`` examples of a docstring, each as its source and expected output lines.

    An example is a ``>>>`` line, its ``...`` continuation lines and the lines after them up
    to a blank line or the next ``>>>``, dedented and joined by newlines, for instance
    ``">>> add(2, 3)\\n5"``. Examples written in other styles (``f(x) ==> y``, ``Input: ...``)
    are not recognised.
    """
    examples: list[list[str]] = []
    current: list[str] | None = None
    for raw in docstring.splitlines():
        line = raw.strip()
        if line.startswith(">>>"):
            current = [line]
            examples.append(current)
        elif current is not None and line:
            current.append(line)
        else:
            current = None
    return tuple("\n".join(example) for example in examples)


def example_source(example: str) -> str:
    """The Python source of one :func:`doctest_examples` entry (its ``>>>`` and ``...`` lines)."""
    lines = [line[3:].removeprefix(" ") for line in example.splitlines() if line.startswith((">>>", "..."))]
    return "\n".join(lines)


def called_names(tree: ast.AST) -> list[str]:
    """Names of the plain-name calls in ``tree`` (``f(...)``, not ``m.f(...)``), outermost first."""
    return [node.func.id for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)]
