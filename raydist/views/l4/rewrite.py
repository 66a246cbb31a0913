"""Level 4: deterministic behaviour-preserving rewrite of one function (SchrodingerRepo §III-E).

L4 restates the implementation near the eventual fix in an equivalent form. Here the
targets are the functions enclosing the gold patch's hunks (``functions_enclosing_patch``)
and the rewrite is a seeded sequence of transformations, each applied only where it is
provably safe, to the function body alone (name, signature, decorators and docstring
stay; the rest of the module is byte-identical):

``rename``   local variables (per ``symtable``; not parameters, globals, imports, nor any
             name appearing inside a nested def/lambda/class) get fresh names that occur
             nowhere in the module's text.
``alias``    a parameter the body reassigns (``word = f(word)``) is bound to a fresh local at
             entry (``text = word``) and the body uses the local; the signature is unchanged.
``invert``   ``if c: A else: B`` becomes ``if not c: B else: A`` (``not (c)`` for compound c).
``loops``    ``out = []; for t in it: [if c:] out.append(e)`` becomes
             ``out = [e for t in it [if c]]`` and back, when ``out`` is not used inside, the
             targets occur nowhere else in the function, the site is outside try/with (a
             partial list is then unobservable) and no yield/await/walrus/lambda/super is inside.
``swap``     ``x == 1`` becomes ``1 == x`` (also ``!=``) when one side is a name and the other a
             literal (the literal's ``__eq__`` defers to the name's, so dispatch is unchanged);
             ``a is b`` / ``is not`` when both sides are names or literals.
``augment``  ``n += 1`` <-> ``n = n + 1`` (``+``/``-`` with int literals) for locals every one of
             whose bindings is an int literal or such an update, so ``n`` is always an int.

A function that calls ``locals``/``vars``/``eval``/``exec``/``dir``/frame inspection, uses
``match`` or an ``f"{x=}"`` debug field is left unchanged. Each pass's output must compile,
else it is dropped.
"""

from __future__ import annotations

import ast
import hashlib
import random
import re
from collections import Counter
from collections.abc import Sequence

import libcst as cst

from raydist.views.l4._loops import LoopsPass, visible_names
from raydist.views.l4._passes import (
    PASSES,
    _alias,
    _Augment,
    _int_locals,
    _Invert,
    _rename,
    _Swap,
    code_of,
    is_dynamic,
    names_in,
    transformed,
)


def _function_seed(qualname: str, seed: int) -> int:
    return int.from_bytes(hashlib.sha256(f"L4\0{qualname}\0{seed}".encode()).digest()[:8], "big")


def apply_pass(func: cst.FunctionDef, name: str, rng: random.Random, p: float, taken: set[str]) -> cst.FunctionDef:
    """``func`` after pass ``name`` (one of ``PASSES``), each safe site taken with probability ``p``
    (drawn from ``rng``); fresh names avoid ``taken``."""
    if name == "rename":
        return _rename(func, rng, p, taken)
    if name == "alias":
        return _alias(func, rng, p, taken)
    body = func.body
    if name == "invert":
        body = transformed(body, _Invert(rng, p))
    elif name == "swap":
        body = transformed(body, _Swap(rng, p))
    elif name == "augment":
        body = transformed(body, _Augment(rng, p, _int_locals(func)))
    elif name == "loops":
        body = transformed(body, LoopsPass(rng, p, Counter(names_in(func.body)), visible_names(func.body)))
    return func.with_changes(body=body)


def _rewrite_function(func: cst.FunctionDef, qualname: str, seed: int, taken: set[str],
                      passes: tuple[str, ...]) -> cst.FunctionDef:
    if not isinstance(func.body, cst.IndentedBlock) or is_dynamic(func):
        return func
    rng = random.Random(_function_seed(qualname, seed))
    order = rng.sample(passes, len(passes))
    for p in (0.5, 1.0):  # a second, full attempt when the coin flips changed nothing
        current = func
        for name in order:
            candidate = apply_pass(current, name, rng, p, set(taken))
            if _compiles(candidate):
                current = candidate
        if not current.deep_equals(func):
            taken.update(names_in(current.body))
            return current
    return func


def _compiles(func: cst.FunctionDef) -> bool:
    try:
        compile(code_of(cst.Module(body=[func.with_changes(leading_lines=[])])), "<l4>", "exec")
    except SyntaxError:
        return False
    return True


class QualnameTransformer(cst.CSTTransformer):
    """Calls ``replace(original, updated)`` for each definition of the function ``qualname``
    (``Class.method`` or ``function``; nested functions are not entered) and puts its result in
    place; ``found`` counts the definitions replaced so far."""

    def __init__(self, qualname: str) -> None:
        self.qualname, self.found = qualname, 0
        self.stack: list[str] = []

    def visit_ClassDef(self, node) -> bool:
        self.stack.append(node.name.value)
        return True

    def leave_ClassDef(self, original, updated):
        self.stack.pop()
        return updated

    def visit_FunctionDef(self, node) -> bool:
        return False

    def leave_FunctionDef(self, original, updated):
        if ".".join([*self.stack, original.name.value]) != self.qualname:
            return updated
        self.found += 1
        return self.replace(original, updated)

    def replace(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        raise NotImplementedError


class _Target(QualnameTransformer):
    def __init__(self, qualname: str, seed: int, taken: set[str], passes: tuple[str, ...]) -> None:
        super().__init__(qualname)
        self.seed, self.taken, self.passes = seed, taken, passes

    def replace(self, original, updated):
        return _rewrite_function(updated, self.qualname, self.seed * 1000 + self.found, self.taken,
                                 self.passes)


def rewrite_function_source(module_source: str, qualname: str, seed: int, passes: Sequence[str] = PASSES) -> str:
    """``module_source`` with every function named ``qualname`` (``f``, ``Cls.meth``,
    ``Outer.Inner.meth``) rewritten as the module doc describes, chosen by ``seed``.

    ``passes`` restricts the transformations (names from ``PASSES``). Everything outside
    those functions' bodies is byte-identical. A function with nothing safe to change comes
    back unchanged. Raises ``libcst.ParserSyntaxError`` on unparsable source, ``KeyError``
    when no function has that qualified name, ``ValueError`` on an unknown pass.
    """
    unknown = sorted(set(passes) - set(PASSES))
    if unknown:
        raise ValueError(f"unknown L4 passes {unknown}; known: {', '.join(PASSES)}")
    module = cst.parse_module(module_source)
    taken = set(re.findall(r"[A-Za-z_]\w*", module_source))
    target = _Target(qualname, seed, taken, tuple(passes))
    new = module.visit(target)
    if not target.found:
        raise KeyError(f"no function {qualname!r} at module or class level")
    return new.code


def _functions(tree: ast.AST, prefix: str = ""):
    """``(qualname, node)`` for each def at module or class level, in source order."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While, ast.ExceptHandler)):
            yield from _functions(node, prefix)


def same_interface(before: str, after: str, qualname: str) -> bool:
    """Whether every function ``qualname`` keeps its name, kind, signature, decorators,
    return annotation and docstring from module ``before`` to module ``after``.

    False when either module has no such function or their counts differ; raises
    ``SyntaxError`` when either does not parse.
    """
    def interface(source: str) -> list[str]:
        return [
            ast.dump(ast.Module(body=[*n.decorator_list, n.args, *([n.returns] if n.returns else [])],
                                type_ignores=[])) + f"|{type(n).__name__}|{n.name}|{ast.get_docstring(n, False)}"
            for q, n in _functions(ast.parse(source)) if q == qualname
        ]

    old = interface(before)
    return bool(old) and old == interface(after)


def functions_enclosing_patch(module_source: str, patch_hunks: list[tuple[int, int]]) -> list[str]:
    """Qualified names of the module- or class-level functions whose lines (decorators to
    last line) enclose a hunk, for hunks given as 1-based inclusive ``(first, last)`` line
    ranges of the original file (pass the changed lines, not the diff context). Innermost
    enclosing function per hunk, each name once, in hunk order; hunks outside any function
    contribute nothing. Raises ``SyntaxError`` on unparsable source.
    """
    spans = [(q, min([n.lineno, *(d.lineno for d in n.decorator_list)]), n.end_lineno)
             for q, n in _functions(ast.parse(module_source))]
    found: list[str] = []
    for first, last in patch_hunks:
        inside = [(end - start, q) for q, start, end in spans if start <= first and last <= end]
        if inside and min(inside)[1] not in found:
            found.append(min(inside)[1])
    return found
