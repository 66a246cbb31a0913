"""The anatomy of a code-generation prompt (HumanEval style: imports, helpers, then the entry
function's signature and its description string) as the rule-based perturbations see it.

The description is the entry function's first string-literal statement (its docstring, or the
string after a leading ``import``, as in HumanEval/115). Its lines are prose or examples:

- a doctest example: a ``>>>`` line, its ``...`` continuations and the expected output lines
  below it, up to a blank line, the next ``>>>`` or a less indented line;
- a call example: a line that starts with ``name(`` (``f([1, 2]) == 3``, ``f(3) ➞ y``), with the
  more indented or ``#``-comment lines right below it; a run of such lines in which one calls
  with a bare name (``fib4(n) -> fib4(n-1) + ...``) defines the problem and is no example;
- an ``Input:`` block (with its ``Output:`` and ``Explanation:`` lines, and anything more
  indented), or a one-line ``For x = ...`` example.

Words the perturbations may touch are prose words: ASCII letters only, at least three of them,
not all capitals, outside quotes, examples and lines that start with a call or ``>>>``, and not a
name of the prompt's code, a keyword or a builtin, so that no identifier, literal or expected
output changes.
"""

from __future__ import annotations

import ast
import builtins
import io
import keyword
import re
import tokenize
from dataclasses import dataclass


class NotApplicable(ValueError):
    """The perturbation finds nothing to act on in this prompt (no description, no example, no
    prose word, no parameter)."""


_STOP_EDGE = "([{"
_STOP_TAIL = ".,;:!?)]}"
_QUOTES = "\"'`"
_CALL = re.compile(r"^[A-Za-z_]\w*\(")
_FOR_EXAMPLE = re.compile(r"^For\s+[A-Za-z_]\w*\s*=")
_IO_HEAD = re.compile(r"^(Input|Output|Explanation)\s*:", re.IGNORECASE)


def entry_function(tree: ast.Module, entry_point: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    """The last top-level function named ``entry_point``. Raises NotApplicable when there is none."""
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == entry_point]
    if not defs:
        raise NotApplicable(f"no top-level function {entry_point!r} in the prompt")
    return defs[-1]


def description_node(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.Expr:
    """The first string-literal statement of ``fn``'s body. Raises NotApplicable when there is none."""
    for stmt in fn.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
            return stmt
    raise NotApplicable(f"function {fn.name!r} has no description string")


def description_text(node: ast.Expr) -> str:
    """The string of a ``description_node`` statement."""
    if not (isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
        raise NotApplicable("the description is not a string literal")
    return node.value.value


def end_position(node: ast.Expr) -> tuple[int, int]:
    """``(end_lineno, end_col_offset)`` of a parsed node; raises NotApplicable for a node built by hand
    (no position), which no prompt parsed by ``ast.parse`` gives."""
    if node.end_lineno is None or node.end_col_offset is None:
        raise NotApplicable("the description has no end position")
    return node.end_lineno, node.end_col_offset


def char_offset(source: str, lineno: int, col: int) -> int:
    """Character offset in ``source`` of ast's (1-based line, UTF-8 byte column)."""
    starts = line_starts(source)
    line_start = starts[lineno - 1]
    line_end = source.find("\n", line_start)
    line = source[line_start:] if line_end < 0 else source[line_start:line_end]
    return line_start + len(line.encode()[:col].decode())


def line_starts(source: str) -> list[int]:
    """Offset of the first character of every line (lines end at ``\\n``, as ast counts them)."""
    return [0] + [i + 1 for i, c in enumerate(source) if c == "\n"]


@dataclass(frozen=True)
class Description:
    """The entry function's description string inside ``prompt``: the raw source text between
    its quotes is ``prompt[start:end]``."""

    prompt: str
    start: int
    end: int

    @property
    def text(self) -> str:
        """The raw text between the quotes, escapes as written."""
        return self.prompt[self.start : self.end]

    def replaced(self, text: str) -> str:
        """The prompt with the text between the quotes replaced by ``text``."""
        return self.prompt[: self.start] + text + self.prompt[self.end :]


def description(prompt: str, entry_point: str) -> Description:
    """Locate the entry function's description. Raises NotApplicable when the prompt does not
    parse, has no such function or description, or the description is not one plain (possibly
    r-prefixed) string literal."""
    try:
        tree = ast.parse(prompt)
    except SyntaxError as e:
        raise NotApplicable(f"prompt does not parse: {e}") from e
    node = description_node(entry_function(tree, entry_point))
    start = char_offset(prompt, node.lineno, node.col_offset)
    end = char_offset(prompt, *end_position(node))
    literal = prompt[start:end]
    prefix = literal[: len(literal) - len(literal.lstrip("rRuU"))]
    body = literal[len(prefix) :]
    quote = body[:3] if body[:3] in ('"""', "'''") else body[:1]
    inner = body[len(quote) : len(body) - len(quote)]
    if not body.endswith(quote) or _literal(prefix + quote + inner + quote) != description_text(node):
        raise NotApplicable("the description is not a single plain string literal")
    return Description(prompt, start + len(prefix) + len(quote), end - len(quote))


def _literal(source: str) -> object:
    try:
        return ast.literal_eval(source)
    except (SyntaxError, ValueError):
        return None


def code_names(prompt: str) -> frozenset[str]:
    """Every identifier the prompt's code uses or defines, with Python's keywords and builtins:
    the words no perturbation may alter or reuse. Raises SyntaxError when the prompt does not parse."""
    names: set[str] = set(keyword.kwlist) | set(keyword.softkwlist) | set(dir(builtins))
    for node in ast.walk(ast.parse(prompt)):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.alias):
            names.update(part for part in (node.name, node.asname or "") for part in part.split(".") if part)
    return frozenset(names)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def example_kind(line: str) -> str:
    """``doctest``, ``call``, ``io``, ``for`` or ``prose``: which example rule ``line`` opens."""
    stripped = line.strip()
    if stripped.startswith(">>>"):
        return "doctest"
    if _CALL.match(stripped):
        return "call"
    if stripped.lower().startswith("input") and _IO_HEAD.match(stripped):
        return "io"
    return "for" if _FOR_EXAMPLE.match(stripped) else "prose"


def example_units(lines: list[str]) -> list[range]:
    """Line ranges of the examples in a description's lines, in order (module docstring gives the rules)."""
    units: list[range] = []
    i = 0
    while i < len(lines):
        kind = example_kind(lines[i])
        if kind == "doctest":
            stop = _doctest_end(lines, i)
        elif kind == "call":
            run = _call_run_end(lines, i)
            if any(_calls_with_a_name(lines[j]) for j in range(i, run)):
                i = run
                continue
            stop = _block_end(lines, i, comments=True)
        elif kind == "io":
            stop = _io_end(lines, i)
        elif kind == "for":
            stop = _block_end(lines, i, comments=False)
        else:
            i += 1
            continue
        units.append(range(i, stop))
        i = stop
    return units


def _call_run_end(lines: list[str], i: int) -> int:
    j = i + 1
    while j < len(lines) and _CALL.match(lines[j].strip()):
        j += 1
    return j


def _calls_with_a_name(line: str) -> bool:
    """True when the first call on ``line`` has a bare name among its arguments (``f(n)``)."""
    depth = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(line.strip()).readline):
            if tok.type == tokenize.OP and tok.string in ("(", "[", "{"):
                depth += 1
            elif tok.type == tokenize.OP and tok.string in (")", "]", "}"):
                depth -= 1
                if depth == 0:
                    return False
            elif depth > 0 and tok.type == tokenize.NAME and tok.string not in ("True", "False", "None"):
                return True
    except (tokenize.TokenError, SyntaxError):
        pass
    return False


def _doctest_end(lines: list[str], i: int) -> int:
    indent = _indent(lines[i])
    j = i + 1
    while j < len(lines) and lines[j].strip().startswith("..."):
        j += 1
    while j < len(lines):
        s = lines[j].strip()
        if not s or s.startswith(">>>") or _indent(lines[j]) < indent:
            break
        j += 1
    return j


def _block_end(lines: list[str], i: int, comments: bool) -> int:
    indent = _indent(lines[i])
    j = i + 1
    while j < len(lines):
        s = lines[j].strip()
        if not s or not (_indent(lines[j]) > indent or (comments and s.startswith("#"))):
            break
        j += 1
    return j


def _io_end(lines: list[str], i: int) -> int:
    indent = _indent(lines[i])
    j = i + 1
    while j < len(lines):
        s = lines[j].strip()
        if not s or _indent(lines[j]) < indent:
            break
        if _indent(lines[j]) == indent and not (_IO_HEAD.match(s) and not s.lower().startswith("input")):
            break
        j += 1
    return j


@dataclass(frozen=True)
class Word:
    """A prose word of a description: ``line`` index, character span within the line, text."""

    line: int
    start: int
    end: int
    text: str


def prose_words(lines: list[str], protected: frozenset[str]) -> list[Word]:
    """The words of ``lines`` a perturbation may alter, in reading order (module docstring gives
    the rules). ``protected``: identifiers that must stay as they are (see :func:`code_names`)."""
    in_example = {i for unit in example_units(lines) for i in unit}
    example_words = {w for i in in_example for w in re.findall(r"[A-Za-z_]\w*", lines[i])}
    blocked = protected | example_words
    words = []
    for i, line in enumerate(lines):
        if i in in_example or example_kind(line) in ("doctest", "call") or line.strip().startswith("#"):
            continue
        quoted = _quoted_spans(line)
        for m in re.finditer(r"\S+", line):
            token = m.group()
            lead = len(token) - len(token.lstrip(_STOP_EDGE))
            core = token.strip(_STOP_EDGE).rstrip(_STOP_TAIL)
            start = m.start() + lead
            end = start + len(core)
            if not _is_plain_word(core) or core in blocked or core.lower() in blocked:
                continue
            if any(a <= start < b or a < end <= b for a, b in quoted):
                continue
            words.append(Word(i, start, end, core))
    return words


def _is_plain_word(core: str) -> bool:
    return len(core) >= 3 and core.isascii() and core.isalpha() and not core.isupper()


def _quoted_spans(line: str) -> list[tuple[int, int]]:
    """Spans of text in quotes; a quote opens only at the start of a word (so ``let's`` opens
    nothing) and an unclosed one runs to the end of the line."""
    spans = []
    i = 0
    while i < len(line):
        c = line[i]
        if c in _QUOTES and (i == 0 or not line[i - 1].isalnum()):
            close = line.find(c, i + 1)
            stop = len(line) if close < 0 else close + 1
            spans.append((i, stop))
            i = stop
        else:
            i += 1
    return spans
