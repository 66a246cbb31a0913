"""Level 4 splicing: one function of a module shown to a model, and its replacement put back.

The function is shown dedented to column 0 (``shown_function``); a candidate written at any
column is shifted back to the original's column (``splice_function``) and put in place of the
original with libcst, so every byte outside the function's lines (decorators to last statement,
as ``ast`` counts them) is unchanged, including the comments and blank lines around it.
Used by ``raydist.views.l4.llm`` (SchrodingerRepo §III-E).
"""

from __future__ import annotations

import ast
import re
import textwrap

import libcst as cst

from raydist.views.l4._passes import transformed
from raydist.views.l4.rewrite import QualnameTransformer, _functions

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")  # lines as ast numbers them


def source_lines(source: str) -> list[str]:
    """``source`` split into lines with their endings, numbered as ``ast`` numbers them
    (``\\r\\n``, ``\\r`` and ``\\n`` end a line; form feeds do not)."""
    return _LINE.findall(source)


def first_line(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """1-based line of the first decorator, else of ``def``."""
    return min([node.lineno, *(d.lineno for d in node.decorator_list)])


def find_function(tree: ast.Module, qualname: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    """The one function ``qualname`` (``f``, ``Cls.meth``, ``A.B.meth``) at module or class level.

    Raises ``KeyError`` when there is none, ``ValueError`` when several share the name (e.g. a
    property's getter and setter), since a rewrite must say which one it replaces.
    """
    found = [node for q, node in _functions(tree) if q == qualname]
    if not found:
        raise KeyError(f"no function {qualname!r} at module or class level")
    if len(found) > 1:
        raise ValueError(f"{len(found)} functions are named {qualname!r}; L4 rewrites one at a time")
    return found[0]


def function_text(module_source: str, qualname: str) -> tuple[str, str]:
    """``(text, indent)``: the function's lines exactly as in the module (decorators to last
    line, with their indentation and line endings) and the whitespace before its first line."""
    node = find_function(ast.parse(module_source), qualname)
    lines = source_lines(module_source)[first_line(node) - 1:node.end_lineno]
    return "".join(lines), _indent_of(lines[0])


def _indent_of(line: str) -> str:
    """The spaces and tabs ``line`` starts with."""
    return line[: len(line) - len(line.lstrip(" \t"))]


def shown_function(module_source: str, qualname: str) -> str:
    """The function as a model sees it: its text dedented (``textwrap.dedent``) to column 0."""
    return textwrap.dedent(function_text(module_source, qualname)[0])


def shift(text: str, old: str, new: str) -> str:
    """Each non-blank line of ``text`` that starts with ``old`` starts with ``new`` instead; blank
    lines and lines indented less than ``old`` (inside strings) are left as they are."""
    return "".join(new + line[len(old):] if line.startswith(old) and line.strip() else line
                   for line in source_lines(text))


def candidate_text(code: str, name: str, owners: list[str]) -> str | None:
    """The definition of function ``name`` in ``code`` (a model's code block), dedented: the first
    one at top level, else the first inside the class chain ``owners`` (e.g. ``["Cls"]``), from
    its first decorator to its last line. None when there is none. Raises ``SyntaxError`` when
    ``code`` does not parse."""
    code = textwrap.dedent(code)
    tree = ast.parse(code)
    scopes = [tree.body]
    for owner in owners:
        classes = [n for n in scopes[-1] if isinstance(n, ast.ClassDef) and n.name == owner]
        if not classes:
            break
        scopes.append(classes[0].body)
    for body in (scopes[0], scopes[-1]):
        defs = [n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name]
        if defs:
            lines = source_lines(code)[first_line(defs[0]) - 1:defs[0].end_lineno]
            return textwrap.dedent("".join(lines))
    return None


def _explicit_indents(func: cst.FunctionDef, default: str) -> cst.FunctionDef:
    """``func`` with every block's relative indentation spelled out, so it keeps its own
    indentation in a module whose default differs."""

    class Explicit(cst.CSTTransformer):
        def leave_IndentedBlock(self, original, updated):
            return updated if updated.indent is not None else updated.with_changes(indent=default)

    return transformed(func, Explicit())


def as_module(text: str) -> str:
    """``text`` (one definition, maybe indented) as a module that parses: under ``if True:``
    when indented, so its block sits at exactly that indentation and no scope is added."""
    return text if not text[:1].isspace() else "if True:\n" + text


def _parse_function(text: str) -> cst.FunctionDef:
    """``text`` (one definition at any column) as a libcst node; raises
    ``libcst.ParserSyntaxError``, or ValueError when it parses but is no function definition."""
    module = cst.parse_module(as_module(text))
    node: cst.CSTNode = module.body[0]
    if text[:1].isspace() and isinstance(node, cst.If) and isinstance(node.body, cst.IndentedBlock):
        node = node.body.body[0]  # under as_module's ``if True:``
    if not isinstance(node, cst.FunctionDef):
        raise ValueError(f"not one function definition: {text[:80]!r}")
    return _explicit_indents(node, module.default_indent)


class _Replace(QualnameTransformer):
    """Puts ``new`` in place of function ``qualname``, keeping the original's leading lines
    (comments and blank lines above it) and its body's footer (comments below it)."""

    def __init__(self, qualname: str, new: cst.FunctionDef) -> None:
        super().__init__(qualname)
        self.new = new

    def replace(self, original, updated):
        new = self.new.with_changes(leading_lines=original.leading_lines)
        if isinstance(original.body, cst.IndentedBlock) and isinstance(new.body, cst.IndentedBlock):
            new = new.with_changes(body=new.body.with_changes(footer=original.body.footer))
        return new


def splice_function(module_source: str, qualname: str, candidate: str) -> str:
    """``module_source`` with function ``qualname`` replaced by ``candidate`` (one definition,
    decorators included, at any column), shifted to the original's column and written with the
    module's line endings.

    Raises ``KeyError``/``ValueError`` as ``find_function``; ``libcst.ParserSyntaxError`` when the
    shifted candidate does not parse as one function definition there.
    """
    _, indent = function_text(module_source, qualname)
    module = cst.parse_module(module_source)
    own = _indent_of(candidate)
    candidate = re.sub(r"\r\n|\r|\n", module.default_newline, shift(candidate, own, indent))
    replace = _Replace(qualname, _parse_function(candidate))
    spliced = module.visit(replace)
    if replace.found != 1:
        raise ValueError(f"libcst finds {replace.found} functions {qualname!r} where ast finds one")
    return spliced.code
