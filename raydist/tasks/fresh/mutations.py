"""Candidate bugs of a Python source file, enumerated deterministically with libcst.

Each operator is one kind of small defect that SWE-smith's procedural modifiers inject
(Yang et al. 2025, "SWE-smith", §2.2: flipped operators, removed conditionals, changed
constants, swapped arguments, inverted returns):

    flip_comparison   ``<`` <-> ``>=``, ``>`` <-> ``<=``, ``==`` <-> ``!=``, ``is`` <-> ``is not``,
                      ``in`` <-> ``not in``
    drop_branch       an ``else`` or ``elif`` branch removed, or an ``if`` without one removed
    off_by_one        an integer literal ``n`` made ``n + 1`` or ``n - 1`` (not inside a collection literal,
                      where integers are data tables, not logic)
    swap_arguments    two adjacent positional arguments of a call swapped
    swap_and_or       ``and`` <-> ``or``
    invert_return     ``return True`` <-> ``return False``

A candidate is a :class:`Mutation`: whole original lines replaced by new lines, so applying it
is a text splice that needs no parser, and its diff is exactly those lines. Enumeration keeps a
candidate only when the mutated file still compiles and its AST differs from the original's.
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

KINDS = ("flip_comparison", "drop_branch", "off_by_one", "swap_arguments", "swap_and_or", "invert_return")

_FLIP = {
    cst.LessThan: cst.GreaterThanEqual, cst.GreaterThanEqual: cst.LessThan,
    cst.GreaterThan: cst.LessThanEqual, cst.LessThanEqual: cst.GreaterThan,
    cst.Equal: cst.NotEqual, cst.NotEqual: cst.Equal,
    cst.Is: cst.IsNot, cst.IsNot: cst.Is, cst.In: cst.NotIn, cst.NotIn: cst.In,
}
_SKIPPED_DIRS = {"tests", "test", "testing", "docs", "doc", "documentation", "examples", "example",
                 "benchmarks", "bin", "scripts", "code_templates", "build", "dist"}


class MutationMismatch(ValueError):
    """The file's lines at a mutation's place are not the mutation's ``before`` text."""


@dataclass(frozen=True)
class Mutation:
    """One candidate bug: lines ``line``..``end_line`` (1-based, inclusive) of ``file`` (a POSIX
    path relative to the source root), whose exact text ``before`` (line ends kept) becomes
    ``after`` ("" when the lines are dropped)."""

    kind: str
    file: str
    line: int
    end_line: int
    before: str
    after: str

    def key(self) -> str:
        """16 hex chars naming this mutation (its kind, place and texts)."""
        text = "\0".join([self.kind, self.file, str(self.line), str(self.end_line), self.before, self.after])
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def record(self) -> dict:
        """The fields an instance records (``extra["mutation"]``)."""
        return {"kind": self.kind, "file": self.file, "line": self.line, "end_line": self.end_line,
                "before": self.before, "after": self.after, "key": self.key()}


@dataclass(frozen=True)
class Unparsed:
    """A source file libcst cannot parse: its path and the parser's first message line."""

    file: str
    error: str


def apply_mutation(source: str, mutation: Mutation) -> str:
    """``source`` with ``mutation``'s lines replaced; raises :class:`MutationMismatch` when those
    lines are not ``mutation.before`` (the file is not the one the mutation was found in)."""
    lines = source.splitlines(keepends=True)
    found = "".join(lines[mutation.line - 1:mutation.end_line])
    if found != mutation.before:
        raise MutationMismatch(f"{mutation.file}:{mutation.line}-{mutation.end_line} holds {found!r}, "
                               f"not the mutation's {mutation.before!r}")
    return "".join(lines[:mutation.line - 1]) + mutation.after + "".join(lines[mutation.end_line:])


def is_test_file(path: str) -> bool:
    """True for test modules (``test_*.py``, ``*_test.py``, ``conftest.py``) and files under a
    tests, docs, examples or scripts folder: mutations go into library code only."""
    parts = PurePosixPath(path).parts
    name = parts[-1]
    return (name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"
            or any(p in _SKIPPED_DIRS for p in parts[:-1]))


def library_files(root: Path) -> list[str]:
    """POSIX paths (relative to ``root``, sorted) of the ``.py`` files mutations may touch: not
    test files (``is_test_file``), not ``setup.py``, nothing under a hidden or ``*.egg-info`` folder."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        parts = PurePosixPath(rel).parts
        if rel == "setup.py" or is_test_file(rel) or any(p.startswith(".") or p.endswith(".egg-info") for p in parts):
            continue
        found.append(rel)
    return found


def scan_tree(root: Path, files: list[str] | None = None, *,
              check: bool = True) -> tuple[list[Mutation], list[Unparsed]]:
    """Every candidate of ``files`` (default ``library_files(root)``) in file order, and the
    files libcst could not parse (skipped, named, never raised); ``check`` as for
    ``enumerate_mutations``."""
    candidates: list[Mutation] = []
    unparsed: list[Unparsed] = []
    for rel in files if files is not None else library_files(root):
        text = (root / rel).read_text(encoding="utf-8", errors="replace")
        try:
            candidates.extend(enumerate_mutations(text, rel, check=check))
        except cst.ParserSyntaxError as exc:
            unparsed.append(Unparsed(rel, str(exc).strip().splitlines()[0]))
    return candidates, unparsed


def enumerate_mutations(source: str, file: str, *, check: bool = True) -> list[Mutation]:
    """The candidates of one file's text, sorted by (line, kind, after); raises
    ``libcst.ParserSyntaxError`` when libcst cannot parse it (``scan_tree`` records that).

    With ``check`` only candidates whose file still compiles and means something else
    (``changes_program``); without, that costs one parse per candidate later, when (and if) a
    candidate is tried: a large module has hundreds of candidates and a build tries a few."""
    wrapper = MetadataWrapper(cst.parse_module(source))
    finder = _Finder(wrapper.module)
    wrapper.visit(finder)
    lines = source.splitlines(keepends=True)
    original = ast.dump(ast.parse(source)) if check else ""
    found: dict[str, Mutation] = {}
    for kind, edit in finder.edits:
        mutation = _mutation(kind, file, lines, edit, finder.module)
        if mutation is None or mutation.key() in found:
            continue
        if not check or changes_program(source, mutation, original):
            found[mutation.key()] = mutation
    return sorted(found.values(), key=lambda m: (m.line, KINDS.index(m.kind), m.after))


def _mutation(kind: str, file: str, lines: list[str], edit, module: cst.Module) -> Mutation | None:
    span, replacement = edit
    before = "".join(lines[span.start.line - 1:span.end.line])
    if replacement is None:  # whole lines dropped
        return Mutation(kind, file, span.start.line, span.end.line, before, "")
    old_node, new_node = replacement
    first, last = lines[span.start.line - 1], lines[span.end.line - 1]
    inner = before[span.start.column:len(before) - len(last) + span.end.column]
    if inner != module.code_for_node(old_node):
        return None  # positions and text disagree (tabs, odd encodings): not spliced blindly
    after = first[:span.start.column] + module.code_for_node(new_node) + last[span.end.column:]
    return Mutation(kind, file, span.start.line, span.end.line, before, after)


def changes_program(source: str, mutation: Mutation, original: str | None = None) -> bool:
    """True when ``source`` with ``mutation`` applied parses and its AST differs from the
    original's (``original``: ``ast.dump`` of ``source``'s AST, computed when None)."""
    if original is None:
        original = ast.dump(ast.parse(source))
    try:
        return ast.dump(ast.parse(apply_mutation(source, mutation))) != original
    except SyntaxError:
        return False


class _Finder(cst.CSTVisitor):
    """Collects ``(kind, (CodeRange, (old node, new node) | None))`` edits; None drops the
    range's whole lines."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, module: cst.Module):
        super().__init__()
        self.module = module
        self.edits: list[tuple[str, tuple[CodeRange, tuple | None]]] = []
        self._literal_depth = 0
        self._elifs: set[int] = set()

    def _add(self, kind: str, node: cst.CSTNode, new: cst.CSTNode | None) -> None:
        span = self.get_metadata(PositionProvider, node)
        self.edits.append((kind, (span, None if new is None else (node, new))))

    def visit_Comparison(self, node: cst.Comparison) -> None:
        for i, target in enumerate(node.comparisons):
            flipped = _FLIP[type(target.operator)]
            op = flipped(whitespace_before=target.operator.whitespace_before,
                         whitespace_after=target.operator.whitespace_after)
            targets = [*node.comparisons[:i], target.with_changes(operator=op), *node.comparisons[i + 1:]]
            self._add("flip_comparison", node, node.with_changes(comparisons=targets))

    def visit_If(self, node: cst.If) -> None:
        if isinstance(node.orelse, cst.If):
            self._elifs.add(id(node.orelse))
        if isinstance(node.orelse, cst.Else):
            self._add("drop_branch", node.orelse, None)
        if id(node) in self._elifs:
            start = self.get_metadata(PositionProvider, node).start
            end = self.get_metadata(PositionProvider, node.body).end
            self.edits.append(("drop_branch", (CodeRange(start, end), None)))
        elif node.orelse is None:
            self._add("drop_branch", node, None)

    def visit_Integer(self, node: cst.Integer) -> None:
        if self._literal_depth or not re.fullmatch(r"[0-9]+", node.value):
            return
        value = int(node.value)
        for new in (value + 1, value - 1):
            if new >= 0:
                self._add("off_by_one", node, node.with_changes(value=str(new)))

    def visit_Call(self, node: cst.Call) -> None:
        args = node.args
        for i in range(len(args) - 1):
            a, b = args[i], args[i + 1]
            if (_positional(a) and _positional(b)
                    and self.module.code_for_node(a.value) != self.module.code_for_node(b.value)):
                swapped = [*args[:i], a.with_changes(value=b.value), b.with_changes(value=a.value), *args[i + 2:]]
                self._add("swap_arguments", node, node.with_changes(args=swapped))

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        other = cst.Or if isinstance(node.operator, cst.And) else cst.And
        op = other(whitespace_before=node.operator.whitespace_before, whitespace_after=node.operator.whitespace_after)
        self._add("swap_and_or", node, node.with_changes(operator=op))

    def visit_Return(self, node: cst.Return) -> None:
        if isinstance(node.value, cst.Name) and node.value.value in ("True", "False"):
            flipped = "False" if node.value.value == "True" else "True"
            self._add("invert_return", node.value, node.value.with_changes(value=flipped))

    # Integers inside collection literals are data (code-point tables, lookup lists), not logic.
    def visit_List(self, node) -> None:
        self._literal_depth += 1

    def leave_List(self, node) -> None:
        self._literal_depth -= 1

    visit_Tuple = visit_Set = visit_Dict = visit_List
    leave_Tuple = leave_Set = leave_Dict = leave_List


def _positional(arg: cst.Arg) -> bool:
    return arg.keyword is None and arg.star == ""


def iter_kinds(mutations: list[Mutation]) -> Iterator[tuple[str, int]]:
    """``(kind, count)`` for every kind of ``KINDS`` in order (0 for absent kinds)."""
    for kind in KINDS:
        yield kind, sum(1 for m in mutations if m.kind == kind)
