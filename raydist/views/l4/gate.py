"""Level 4 static gate: what a model's answer must be before its tests are run (SchrodingerRepo
§III-E, §III-F).

``check_answer`` takes the function from the answer's first ```python block, splices it into
the module in place of the original (``raydist.views.l4.splice``) and accepts it only when
the new module compiles, ``same_interface`` holds and the body's AST differs. Behaviour is
left to the test gate (§III-F: PASS_TO_PASS pass, FAIL_TO_PASS still fail).

A rejected ``Proposal`` carries the first failing check's reason, in this order, starting with
one of ``REASONS``::

    no python code block                  no fenced block labelled python/py (or unlabelled)
    code block not closed                 the answer stopped inside the block (max_tokens)
    does not parse: <msg> (line N)        the block, or the function at the original's column
    defines no function named <name>      e.g. the model renamed it
    identical to the original             same text, up to trailing whitespace
    does not compile: <msg> (line N)      e.g. ``nonlocal`` without a binding
    interface changed: <what>             kind, decorators, signature, return annotation, docstring
    body unchanged after normalisation    same AST once the docstring is dropped (comments, layout)
    uses a name not defined in the module: <names>   new free names (skipped under ``import *``)
    imports a module the module does not import: <names>
"""

from __future__ import annotations

import ast
import builtins
import re
import symtable
import warnings
from dataclasses import dataclass

import libcst as cst

from raydist.views.l4.rewrite import same_interface
from raydist.views.l4.splice import (
    as_module,
    candidate_text,
    find_function,
    shown_function,
    source_lines,
    splice_function,
)

REASONS = (
    "no python code block", "code block not closed", "does not parse", "defines no function named",
    "identical to the original", "does not compile", "interface changed", "body unchanged after normalisation",
    "uses a name not defined in the module", "imports a module the module does not import",
)
"""How every rejection reason starts (the module doc says when each applies)."""

_Def = ast.FunctionDef | ast.AsyncFunctionDef
_FENCE = re.compile(r"[ \t]*```[ \t]*([\w+-]*)[ \t]*")
_PYTHON_LABELS = ("python", "py", "python3")
_MODULE_NAMES = {"__name__", "__file__", "__doc__", "__spec__", "__loader__", "__package__", "__builtins__",
                 "__path__", "__cached__", "__annotations__", "__class__"}


@dataclass(frozen=True)
class Proposal:
    """One model answer after the static gate.

    Attributes:
        module_source: the module with only the function replaced; None when rejected.
        function_source: the candidate definition as extracted, dedented (the whole code block
            when no definition was found in it; None without a code block).
        reason: None when accepted, else why not (starts with one of ``REASONS``).
        raw: the model's answer, verbatim.
    """

    module_source: str | None
    function_source: str | None
    reason: str | None
    raw: str

    @property
    def accepted(self) -> bool:
        return self.reason is None


def code_block(answer: str) -> tuple[str | None, str | None]:
    """``(code, None)`` for the first fenced block labelled python/py/python3 (else the first
    unlabelled one), or ``(None, reason)``."""
    blocks, opened, label = [], None, ""
    lines = [line.rstrip("\r\n") for line in source_lines(answer)]
    for i, line in enumerate(lines):
        fence = _FENCE.fullmatch(line)
        if fence is None:
            continue
        if opened is None:
            opened, label = i, fence.group(1).lower()
        else:
            blocks.append((label, "".join(f"{text}\n" for text in lines[opened + 1:i])))
            opened = None
    code = [c for lab, c in blocks if lab in _PYTHON_LABELS] or [c for lab, c in blocks if not lab]
    if code:
        return code[0], None
    if opened is not None and (label in _PYTHON_LABELS or not label):
        return None, "code block not closed (the answer may have run out of max_tokens)"
    return None, "no python code block"


def check_answer(module_source: str, qualname: str, answer: str) -> Proposal:
    """The static gate (module doc) on a model's ``answer`` for function ``qualname``.

    Raises ``KeyError``/``ValueError`` as ``find_function``; ``SyntaxError`` when
    ``module_source`` does not parse.
    """
    original = find_function(ast.parse(module_source), qualname)
    code, reason = code_block(answer)
    if code is None:
        return Proposal(None, None, reason, answer)
    owners, _, name = qualname.rpartition(".")
    try:
        candidate = candidate_text(code, name, owners.split(".") if owners else [])
    except SyntaxError as exc:
        return Proposal(None, code, f"does not parse: {exc.msg} (line {exc.lineno})", answer)
    if candidate is None:
        return Proposal(None, code, f"defines no function named {name}", answer)
    new_module, reason = _gate(module_source, qualname, original, candidate)
    return Proposal(new_module, candidate, reason, answer)


def _gate(module_source: str, qualname: str, original: _Def, candidate: str) -> tuple[str | None, str | None]:
    """``(new_module, None)`` when ``candidate`` passes, else ``(None, reason)``."""
    if _lines_of(candidate) == _lines_of(shown_function(module_source, qualname)):
        return None, "identical to the original"
    try:
        new_module = splice_function(module_source, qualname, candidate)
    except cst.ParserSyntaxError as exc:
        return None, f"does not parse: {exc.message}"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. SyntaxWarning for `x is 1`; the tests judge it
            compile(new_module, "<l4>", "exec")
    except (SyntaxError, ValueError) as exc:
        return None, f"does not compile: {getattr(exc, 'msg', exc)} (line {getattr(exc, 'lineno', '?')})"
    new = find_function(ast.parse(new_module), qualname)
    if not same_interface(module_source, new_module, qualname):
        return None, f"interface changed: {interface_change(original, new)}"
    if _body_dump(original) == _body_dump(new):
        return None, "body unchanged after normalisation"
    unknown = _unknown_names(module_source, original, candidate)
    if unknown:
        return None, f"uses a name not defined in the module: {', '.join(unknown)}"
    added = sorted(_imports(ast.parse(as_module(candidate))) - _imports(ast.parse(module_source)))
    if added:
        return None, f"imports a module the module does not import: {', '.join(added)}"
    return new_module, None


def _lines_of(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip().splitlines()]


def _body_dump(node: _Def) -> str:
    body = node.body[1:] if ast.get_docstring(node, clean=False) is not None else node.body
    return ast.dump(ast.Module(body=body, type_ignores=[]))


def interface_change(before: _Def, after: _Def) -> str:
    """What differs between two definitions' interfaces, for a reason text (e.g. ``signature
    (seq) became (items)``; parts joined by ``; ``)."""
    def decorators(node) -> str:
        return ", ".join(f"@{ast.unparse(d)}" for d in node.decorator_list) or "none"

    def returns(node) -> str:
        return ast.unparse(node.returns) if node.returns else "none"

    kind = {ast.FunctionDef: "def", ast.AsyncFunctionDef: "async def"}
    parts = []
    if type(before) is not type(after):
        parts.append(f"{kind[type(before)]} became {kind[type(after)]}")
    if decorators(before) != decorators(after):
        parts.append(f"decorators {decorators(before)} became {decorators(after)}")
    if ast.dump(before.args) != ast.dump(after.args):
        parts.append(f"signature ({ast.unparse(before.args)}) became ({ast.unparse(after.args)})")
    if returns(before) != returns(after):
        parts.append(f"return annotation {returns(before)} became {returns(after)}")
    old_doc, new_doc = ast.get_docstring(before, clean=False), ast.get_docstring(after, clean=False)
    if old_doc != new_doc:
        parts.append("docstring removed" if new_doc is None else "docstring added" if old_doc is None
                     else "docstring changed")
    return "; ".join(parts) or "the definitions differ"


def _free_globals(function_source: str) -> set[str]:
    """Names the definition reads from module scope or builtins (not its decorators or defaults)."""
    top = symtable.symtable(as_module(function_source), "<l4>", "exec")
    names, tables = set(), list(top.get_children())
    while tables:
        table = tables.pop()
        names |= {s.get_name() for s in table.get_symbols() if s.is_global() and s.is_referenced()}
        tables.extend(table.get_children())
    return names


def _unknown_names(module_source: str, original: _Def, candidate: str) -> list[str]:
    """Names the candidate reads that neither the module binds or reads at top level, nor any
    ``global`` statement declares, nor builtins provide, nor the original function reads."""
    tree = ast.parse(module_source)
    if any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in ast.walk(tree)):
        return []
    known = set(symtable.symtable(module_source, "<module>", "exec").get_identifiers())
    known |= {name for n in ast.walk(tree) if isinstance(n, ast.Global) for name in n.names}
    known |= set(dir(builtins)) | _MODULE_NAMES | _free_globals(ast.unparse(original))
    return sorted(_free_globals(candidate) - known)


def _imports(tree: ast.AST) -> set[str]:
    """Modules imported anywhere in ``tree`` (``from . import x`` as ``.``)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            found.add("." * node.level + (node.module or ""))
    return found
