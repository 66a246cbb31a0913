"""What a probe answer is compared with: the hidden gold ``patch`` and ``test_patch`` of an
instance, read into files, symbols, changed lines, repair tokens and test names (pure).

Symbols are the functions and classes whose bodies a hunk changes: the name in the hunk
header (``@@ -242,7 +242,7 @@ def _cstack(left, right):``, git's nearest enclosing
definition line), replaced by a ``def``/``class`` line met inside the hunk before the change,
plus the names a changed line itself defines. Test names are the ``test*`` functions the test
patch adds or changes and the last component of each ``FAIL_TO_PASS`` id, parameters dropped
(``a/b.py::TestX::test_y[1-2]`` -> ``test_y``; Django's ``test_y (app.tests.TestX)`` -> ``test_y``).
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

__all__ = ["Gold", "code_of", "gold_of", "name_of_test", "normalise_line", "read_diff", "repair_tokens", "tokens"]

_DEFINITION = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)")
_HEADER_NAME = re.compile(r"(?:def|class)\s+([A-Za-z_]\w*)")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STRING = re.compile(r"\"((?:[^\"\\\n]|\\.)*)\"|'((?:[^'\\\n]|\\.)*)'")
_NUMBER = re.compile(r"(?<![\w.])\d{2,}(?:\.\d+)?(?![\w.])")

MIN_LINE_CHARS = 8
"""A changed line counts for line overlap when it has at least this many characters besides
white space (and a letter or digit): ``else:``, ``)``, ``return`` say nothing of a patch."""
MIN_IDENTIFIER_CHARS = 3
"""Identifiers shorter than this (``i``, ``x``, ``df``) are no evidence of recall."""
COMMON_NAMES = frozenset({"self", "cls", "args", "kwargs", "None", "True", "False", "print", "len", "str", "int",
                          "list", "dict", "set", "tuple", "return", "value", "name"})
"""Names too common in any Python fix to count as its distinctive repair tokens (with the keywords)."""


@dataclass(frozen=True)
class Gold:
    """The hidden reference of one instance.

    Attributes:
        files: paths the gold patch changes (new path; old path for a deletion), sorted.
        symbols: function and class names whose bodies the gold patch changes, sorted.
        added_lines / removed_lines: the patch's non-trivial changed lines, normalised
            (``normalise_line``), sorted.
        repair: the repair tokens (``repair_tokens``): what the fix brings in or takes out.
        test_files: paths the test patch changes.
        test_names: gold test names (module docstring), sorted.
        test_lines: the test patch's non-trivial added lines, normalised.
    """

    files: tuple[str, ...]
    symbols: tuple[str, ...]
    added_lines: tuple[str, ...]
    removed_lines: tuple[str, ...]
    repair: tuple[str, ...]
    test_files: tuple[str, ...]
    test_names: tuple[str, ...]
    test_lines: tuple[str, ...]

    @property
    def fix_lines(self) -> tuple[str, ...]:
        """The lines line overlap is measured on: the added ones (what the fix writes), or the
        removed ones for a fix that only deletes."""
        return self.added_lines or self.removed_lines


@dataclass(frozen=True)
class _Diff:
    files: tuple[str, ...]
    symbols: tuple[str, ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]


def normalise_line(line: str) -> str:
    """``line`` with runs of white space made one space and both ends stripped; "" when the
    line is trivial (fewer than ``MIN_LINE_CHARS`` non-space characters, or no letter or digit)."""
    text = " ".join(line.split())
    if len(text.replace(" ", "")) < MIN_LINE_CHARS or not any(c.isalnum() for c in text):
        return ""
    return text


def tokens(text: str) -> set[str]:
    """The distinctive tokens of ``text``: identifiers of at least ``MIN_IDENTIFIER_CHARS``
    characters that are no keyword or ``COMMON_NAMES``, string literals of 3+ characters (their
    content, quoted as ``"..."``) and numbers of 2+ digits."""
    found = {t for t in _IDENTIFIER.findall(text)
             if len(t) >= MIN_IDENTIFIER_CHARS and not keyword.iskeyword(t) and t not in COMMON_NAMES}
    found |= {f'"{a or b}"' for a, b in _STRING.findall(text) if len(a or b) >= 3}
    found |= set(_NUMBER.findall(text))
    return found


def code_of(line: str) -> str:
    """``line`` without a trailing ``#`` comment (a ``#`` outside quotes): a reworded comment
    is no repair."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote and line[i - 1] != "\\" else quote
        elif char in "\"'":
            quote = char
        elif char == "#":
            return line[:i]
    return line


def repair_tokens(added: list[str], removed: list[str]) -> set[str]:
    """Tokens (``tokens``) of the added lines' code (``code_of``) that no removed line has, and
    of the removed lines that no added line keeps: what the fix brings in or takes out, not the
    code around it."""
    plus = tokens("\n".join(map(code_of, added)))
    minus = tokens("\n".join(map(code_of, removed)))
    return plus ^ minus


def name_of_test(test_id: str) -> str:
    """The function name of a test id: the last ``::`` component without ``[params]``;
    Django's ``test_y (app.tests.TestX)`` form gives ``test_y``."""
    text = test_id.strip()
    if " (" in text and text.endswith(")"):
        text = text.split(" (", 1)[0]
    text = text.split("[", 1)[0]
    return text.rsplit("::", 1)[-1].rsplit(".", 1)[-1].strip() if "::" in text else text.strip()


def _strip_prefix(path: str | None) -> str | None:
    if path is None or path == "/dev/null":
        return None
    return path[2:] if path.startswith(("a/", "b/")) else path


def read_diff(text: str) -> _Diff:
    """Files, symbols and raw changed lines of a unified diff (``git diff`` output). A diff
    ``unidiff`` refuses (a model's patch with wrong hunk counts) is read loosely: every line
    after a ``@@`` header up to the next file header is a hunk line, whatever the counts say."""
    try:
        files = [(_strip_prefix(p.target_file) or _strip_prefix(p.source_file),
                  [(h.section_header or "", [(_kind(line), line.value.rstrip("\n")) for line in h]) for h in p])
                 for p in PatchSet(text or "")]
    except UnidiffParseError:
        files = _loose_hunks(text or "")
    found, symbols, added, removed = set(), set(), [], []
    for path, hunks in files:
        if path:
            found.add(path)
        for header, lines in hunks:
            symbols |= _hunk_symbols(header, lines)
            added += [value for kind, value in lines if kind == "+"]
            removed += [value for kind, value in lines if kind == "-"]
    return _Diff(tuple(sorted(found)), tuple(sorted(symbols)), tuple(added), tuple(removed))


def _kind(line) -> str:
    return "+" if line.is_added else "-" if line.is_removed else " "


_FILE_HEADER = re.compile(r"^(?:\+\+\+ |diff --git a/\S+ )(\S+)")
_HUNK_HEADER = re.compile(r"^@@[^@]*@@ ?(.*)$")


def _loose_hunks(text: str) -> list[tuple[str | None, list]]:
    files: list[tuple[str | None, list]] = []
    hunk = None
    for line in text.splitlines():
        header, start = _FILE_HEADER.match(line), _HUNK_HEADER.match(line)
        if header or line.startswith(("--- ", "diff --git")):
            if header and not (files and files[-1][0] == _strip_prefix(header.group(1))):
                files.append((_strip_prefix(header.group(1)), []))
            hunk = None
        elif start:
            if not files:
                files.append((None, []))
            hunk = (start.group(1), [])
            files[-1][1].append(hunk)
        elif hunk is not None and line[:1] in ("+", "-", " "):
            hunk[1].append((line[0], line[1:]))
    return files


def _hunk_symbols(header: str, lines: list[tuple[str, str]]) -> set[str]:
    """The definitions a hunk changes (module docstring)."""
    match = _HEADER_NAME.search(header)
    current = match.group(1) if match else None
    symbols = set()
    for kind, value in lines:
        defined = _DEFINITION.match(value)
        if _module_level(value) and not defined:
            current = None  # back at module level: the header's definition has ended
        if kind == " ":
            current = defined.group(1) if defined else current
            continue
        if current and not _dunder(current):
            symbols.add(current)
        if defined and not _dunder(defined.group(1)):
            symbols.add(defined.group(1))
            if kind == "+":
                current = defined.group(1)
    return symbols


def _module_level(text: str) -> bool:
    return bool(text.strip()) and not text[0].isspace() and not text.lstrip().startswith(("@", "#", ")", "]", "}"))


def _dunder(name: str) -> bool:
    # __init__, __eq__...: every class has them; naming one recalls nothing of this fix.
    return name.startswith("__") and name.endswith("__")


def _normalised(lines) -> tuple[str, ...]:
    return tuple(sorted({n for n in map(normalise_line, lines) if n}))


def gold_of(patch: str, test_patch: str, fail_to_pass=()) -> Gold:
    """The :class:`Gold` of an instance's ``patch``, ``test_patch`` and ``FAIL_TO_PASS`` ids."""
    fix, tests = read_diff(patch), read_diff(test_patch)
    names = {s for s in tests.symbols if s.startswith("test")}
    names |= {name_of_test(t) for t in fail_to_pass if name_of_test(t)}
    return Gold(
        files=fix.files, symbols=fix.symbols,
        added_lines=_normalised(fix.added), removed_lines=_normalised(fix.removed),
        repair=tuple(sorted(repair_tokens(list(fix.added), list(fix.removed)))),
        test_files=tests.files, test_names=tuple(sorted(names)), test_lines=_normalised(tests.added),
    )
