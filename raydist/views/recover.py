"""Patch recovery and exact patch application on in-memory texts (SchrodingerRepo §III-G).

A submission is the diff from the original repository state to the final one, over the
files whose final content differs from the original, so it applies to the original
SWE-bench state whatever view the agent worked in. Texts are ``str`` per relative path;
``None`` means the file does not exist.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping

from unidiff import PatchSet, UnidiffParseError
from unidiff.constants import DEV_NULL, LINE_TYPE_ADDED, LINE_TYPE_CONTEXT, LINE_TYPE_NO_NEWLINE, LINE_TYPE_REMOVED

_NO_NEWLINE = "\\ No newline at end of file\n"
_UNSAFE_PATH_CHARS = set('\t\n\r"\\')


class PatchApplyError(ValueError):
    """A patch does not apply exactly; the message names the file and the hunk."""


def split_lines(text: str) -> list[str]:
    """Lines of ``text`` with their ``\\n`` kept; only ``\\n`` ends a line, as in git.

    (``str.splitlines`` would also split on form feeds and other separators.)
    """
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _check_path(path: str) -> None:
    if not path or path.startswith("/") or _UNSAFE_PATH_CHARS & set(path):
        raise ValueError(
            f"recover_patch: path {path!r} must be relative and free of tabs, newlines, quotes and backslashes"
        )


def _file_diff(path: str, old: str | None, new: str | None) -> Iterator[str]:
    yield f"diff --git a/{path} b/{path}\n"
    if old is None:
        yield "new file mode 100644\n"
    elif new is None:
        yield "deleted file mode 100644\n"
    old_lines, new_lines = split_lines(old or ""), split_lines(new or "")
    if not old_lines and not new_lines:
        return  # git records an empty added/removed file by its header alone
    hunks = difflib.unified_diff(
        old_lines,
        new_lines,
        fromfile=DEV_NULL if old is None else f"a/{path}",
        tofile=DEV_NULL if new is None else f"b/{path}",
        n=3,
    )
    for line in hunks:
        # Only a file's last line can lack "\n"; git marks it on the following line.
        yield line if line.endswith("\n") else line + "\n" + _NO_NEWLINE


def recover_patch(original: Mapping[str, str | None], final: Mapping[str, str | None]) -> str:
    """Git-style unified diff from ``original`` to ``final`` (SchrodingerRepo §III-G).

    Both map relative POSIX paths to text (``None`` or absent: no such file). Only paths
    whose content differs appear, sorted; added and deleted files carry ``/dev/null`` and
    ``new file mode 100644`` / ``deleted file mode 100644``; a missing final newline is
    marked ``\\ No newline at end of file``. ``git apply`` accepts the result on the
    original tree. Returns ``""`` when nothing changed. Raises ValueError on an absolute
    path or one git would need to quote.
    """
    chunks: list[str] = []
    for path in sorted(set(original) | set(final)):
        old, new = original.get(path), final.get(path)
        if old == new:
            continue
        _check_path(path)
        chunks.extend(_file_diff(path, old, new))
    return "".join(chunks)


def _strip_prefix(name: str | None) -> str | None:
    if name is None or name == DEV_NULL:
        return None
    return name[2:] if name[:2] in ("a/", "b/") else name


def _parse(patch: str) -> PatchSet:
    try:
        return PatchSet(patch)
    except UnidiffParseError as err:
        raise PatchApplyError(f"patch is not a unified diff: {err}") from err


def patched_paths(patch: str) -> list[str]:
    """Sorted relative paths a unified diff touches (sources and targets, no ``a/``/``b/``).

    Raises PatchApplyError when ``patch`` is not a unified diff.
    """
    paths: set[str] = set()
    for patched in _parse(patch):
        for name in (patched.source_file, patched.target_file):
            stripped = _strip_prefix(name)
            if stripped is not None:
                paths.add(stripped)
    return sorted(paths)


def _hunk_lines(hunk, kinds: tuple[str, ...]) -> list[str]:
    lines: list[str] = []
    kept = False
    for line in hunk:
        if line.line_type == LINE_TYPE_NO_NEWLINE:
            if kept and lines and lines[-1].endswith("\n"):
                lines[-1] = lines[-1][:-1]
            continue
        kept = line.line_type in kinds
        if kept:
            lines.append(line.value)
    return lines


def _find_hunk(lines: list[str], before: list[str], expected: int, cursor: int) -> int | None:
    """Where ``before`` matches ``lines`` exactly at or after ``cursor``, nearest to ``expected``
    (ties go to the earlier position), as ``git apply`` places a hunk whose line numbers moved."""
    if lines[expected : expected + len(before)] == before and expected >= cursor:
        return expected
    width = len(before)
    candidates = [i for i in range(cursor, len(lines) - width + 1) if lines[i : i + width] == before]
    if not candidates:
        return None
    return min(candidates, key=lambda i: (abs(i - expected), i))


def _apply_hunks(path: str, text: str, patched) -> str:
    lines = split_lines(text)
    out: list[str] = []
    cursor = 0
    offset = 0  # how far earlier hunks were found from their stated lines
    for number, hunk in enumerate(patched, start=1):
        before = _hunk_lines(hunk, (LINE_TYPE_CONTEXT, LINE_TYPE_REMOVED))
        after = _hunk_lines(hunk, (LINE_TYPE_CONTEXT, LINE_TYPE_ADDED))
        # A hunk with no source lines ("-N,0") inserts after line N.
        stated = hunk.source_start if hunk.source_length == 0 else hunk.source_start - 1
        expected = min(max(stated + offset, cursor), len(lines))
        start = expected if not before else _find_hunk(lines, before, expected, cursor)
        if start is None:
            raise PatchApplyError(
                f"{path}: hunk {number} (@@ -{hunk.source_start},{hunk.source_length} "
                f"+{hunk.target_start},{hunk.target_length} @@) matches nowhere in the file"
            )
        offset = start - stated
        out.extend(lines[cursor:start])
        out.extend(after)
        cursor = start + len(before)
    out.extend(lines[cursor:])
    return "".join(out)


def apply_patch_to_texts(files: Mapping[str, str | None], patch: str) -> dict[str, str | None]:
    """Apply unified diff ``patch`` to in-memory ``files`` without fuzz: every hunk's context
    and removed lines must match exactly, but, as with ``git apply``, a hunk whose line numbers
    moved (a patch written for a nearby revision) is placed at the nearest exact match.

    ``files`` maps relative paths to text (``None``/absent: no such file). Returns a new
    dict with every touched path updated (``None`` for a deleted file) and the other
    entries copied. Raises PatchApplyError naming the file and the hunk when a hunk's
    context differs, a modified file is missing, or an added file already exists.
    """
    result: dict[str, str | None] = dict(files)
    for patched in _parse(patch):
        source, target = _strip_prefix(patched.source_file), _strip_prefix(patched.target_file)
        old = None if source is None else result.get(source)
        if source is not None and old is None:
            raise PatchApplyError(f"{source}: the patch modifies it but it does not exist")
        if source is None and result.get(target) is not None:
            raise PatchApplyError(f"{target}: the patch adds it but it already exists")
        new = _apply_hunks(source or target, old or "", patched)
        if target is None:
            if new:
                raise PatchApplyError(f"{source}: the patch deletes it but leaves content behind")
            result[source] = None
            continue
        if source is not None and source != target:
            result[source] = None
        result[target] = new
    return result
