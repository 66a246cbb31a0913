"""Patch recovery and exact patch application on in-memory texts (SchrodingerRepo §III-G).

A submission is the diff from the original repository state to the final one, over the
files whose final content differs from the original, so it applies to the original
SWE-bench state whatever view the agent worked in. Texts are ``str`` per relative path;
``None`` means the file does not exist.
"""

from __future__ import annotations

import difflib
import hashlib
import tarfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import IO

from unidiff import PatchSet, UnidiffParseError
from unidiff.constants import DEV_NULL, LINE_TYPE_ADDED, LINE_TYPE_CONTEXT, LINE_TYPE_NO_NEWLINE, LINE_TYPE_REMOVED

_NO_NEWLINE = "\\ No newline at end of file\n"


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
    if not path or path.startswith("/") or ".." in path.split("/"):
        raise ValueError(f"recover_patch: path {path!r} must be relative and stay inside the repository")


_C_ESCAPES = {7: "\\a", 8: "\\b", 9: "\\t", 10: "\\n", 11: "\\v", 12: "\\f", 13: "\\r",
              0x22: '\\"', 0x5C: "\\\\"}


def git_quote(name: str) -> str:
    """``name`` as git writes it in a diff header (``quote_c_style``, ``core.quotePath``
    on): unchanged when every byte is printable ASCII other than ``"`` and ``\\``, else in
    double quotes with C escapes and octal for control and non-ASCII bytes (UTF-8, or the
    original bytes of a name decoded with ``surrogateescape``)."""
    raw = name.encode("utf-8", "surrogateescape")
    if not any(b < 0x20 or b >= 0x7F or b in (0x22, 0x5C) for b in raw):
        return name
    out = []
    for b in raw:
        if b in _C_ESCAPES:
            out.append(_C_ESCAPES[b])
        elif b < 0x20 or b >= 0x7F:
            out.append(f"\\{b:03o}")
        else:
            out.append(chr(b))
    return '"' + "".join(out) + '"'


def _header_name(name: str) -> str:
    quoted = git_quote(name)
    # git ends a ---/+++ name that holds a space with a tab, so it is not read as a date
    return quoted + "\t" if quoted == name and " " in name else quoted


def _file_diff(path: str, old: str | None, new: str | None) -> Iterator[str]:
    yield f"diff --git {git_quote('a/' + path)} {git_quote('b/' + path)}\n"
    if old is None:
        yield "new file mode 100644\n"
    elif new is None:
        yield "deleted file mode 100644\n"
    old_lines, new_lines = split_lines(old or ""), split_lines(new or "")
    if not old_lines and not new_lines:
        return  # git records an empty added/removed file by its header alone
    yield f"--- {DEV_NULL if old is None else _header_name('a/' + path)}\n"
    yield f"+++ {DEV_NULL if new is None else _header_name('b/' + path)}\n"
    hunks = difflib.unified_diff(old_lines, new_lines, n=3)
    for number, line in enumerate(hunks):
        if number < 2:
            continue  # difflib's own ---/+++ lines
        # Only a file's last line can lack "\n"; git marks it on the following line.
        yield line if line.endswith("\n") else line + "\n" + _NO_NEWLINE


def recover_patch(original: Mapping[str, str | None], final: Mapping[str, str | None]) -> str:
    """Git-style unified diff from ``original`` to ``final`` (SchrodingerRepo §III-G).

    Both map relative POSIX paths to text (``None`` or absent: no such file). Only paths
    whose content differs appear, sorted; added and deleted files carry ``/dev/null`` and
    ``new file mode 100644`` / ``deleted file mode 100644``; a missing final newline is
    marked ``\\ No newline at end of file``; names are quoted as git quotes them (spaces,
    quotes, newlines, non-ASCII). ``git apply`` and ``patch`` accept the result on the
    original tree. Returns ``""`` when nothing changed. Raises ValueError on an absolute path
    or one that leaves the repository.
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


def terminated(patch: str) -> str:
    """``patch`` with a final ``\\n`` when it lacks one: a diff cut after its last line (an
    output stripped on its way, mini-swe-agent#305) means the same diff, whereas git calls it
    corrupt and the file would lose its last newline. A last line without a newline of its own
    is marked by ``\\ No newline at end of file`` inside the diff, never by the diff's end."""
    return patch if not patch or patch.endswith("\n") else patch + "\n"


def _parse(patch: str) -> PatchSet:
    try:
        return PatchSet(terminated(patch))
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
        path = source or target
        if path is None:
            raise PatchApplyError("the patch has a file entry from /dev/null to /dev/null")
        old = None if source is None else result.get(source)
        if source is not None and old is None:
            raise PatchApplyError(f"{source}: the patch modifies it but it does not exist")
        if source is None and result.get(path) is not None:
            raise PatchApplyError(f"{path}: the patch adds it but it already exists")
        new = _apply_hunks(path, old or "", patched)
        if target is None:
            if new:
                raise PatchApplyError(f"{path}: the patch deletes it but leaves content behind")
            result[path] = None
            continue
        if source is not None and source != target:
            result[source] = None
        result[target] = new
    return result


# -- the agent's final tree, read without the agent's git ----------------------------------

MAX_TEXT_BYTES = 4 * 1024 * 1024  # a changed file above this is not put in a text patch
_SKIPPED_PARTS = {".git", "__pycache__", ".pytest_cache", ".mypy_cache"}


def _skipped(path: str) -> bool:
    parts = path.split("/")
    return bool(_SKIPPED_PARTS & set(parts)) or path.endswith(".pyc") or any(p.endswith(".egg-info") for p in parts)


def tree_entries(tar: IO[bytes], *, baseline: Mapping[str, tuple] | None = None,
                 root: str = "testbed") -> tuple[dict[str, tuple], dict[str, bytes]]:
    """Read a tar stream of a work tree (Docker's ``get_archive`` of ``/<root>``) into
    ``({path: entry}, {path: content})``.

    An entry is ``("file", sha256 hex, size)``, ``("symlink", target)`` or ``("other", type)``;
    paths are relative to ``root`` (members outside it are ignored), and ``.git``, caches,
    ``*.pyc`` and ``*.egg-info`` are skipped (they are never part of a submission). With a
    ``baseline`` (an earlier call's entries), the contents of the regular files whose entry
    differs from it and that are at most ``MAX_TEXT_BYTES`` long are returned too.
    Pure: reads the stream only, whatever the agent did to the repository's ``.git``.
    """
    entries: dict[str, tuple] = {}
    contents: dict[str, bytes] = {}
    with tarfile.open(fileobj=tar, mode="r|") as archive:
        for member in archive:
            name = member.name.lstrip("./")
            if name != root and not name.startswith(root + "/"):
                continue
            path = name[len(root) + 1:]
            if not path or member.isdir() or _skipped(path):
                continue
            if member.issym() or member.islnk():
                entries[path] = ("symlink", member.linkname)
                continue
            if not member.isfile():
                entries[path] = ("other", member.type.decode("ascii", "replace"))
                continue
            stream = archive.extractfile(member)
            if stream is None:  # a regular member always has a stream; no content, no entry
                entries[path] = ("other", member.type.decode("ascii", "replace"))
                continue
            data = stream.read()
            entry = ("file", hashlib.sha256(data).hexdigest(), len(data))
            entries[path] = entry
            if baseline is not None and baseline.get(path) != entry and len(data) <= MAX_TEXT_BYTES:
                contents[path] = data
    return entries, contents


@dataclass(frozen=True)
class FinalTree:
    """What the agent changed, ready for :func:`recover_patch`: ``final`` (path -> text, or
    None for a deleted file) and ``dropped`` (path -> why the change cannot be part of a text
    patch: ``binary``, ``symlink``, ``special file``, ``too large``)."""

    final: dict[str, str | None]
    dropped: dict[str, str]


def changed_files(before: Mapping[str, tuple], after: Mapping[str, tuple], contents: Mapping[str, bytes],
                  read_original: Callable[[str], str | None]) -> FinalTree:
    """The changes from ``before`` to ``after`` (entries of :func:`tree_entries`) as text.

    Rule: a regular text file (UTF-8) added, changed or deleted is a change; a change that
    involves a symlink, a special file, a file that is not UTF-8 (on either side: the final
    content, or ``read_original(path)`` raising ``ValueError``) or one over ``MAX_TEXT_BYTES``
    is dropped from the patch and named in ``dropped``. Never raises for what the agent wrote.
    """
    final: dict[str, str | None] = {}
    dropped: dict[str, str] = {}
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        kinds = {e[0] for e in (old, new) if e is not None}
        if kinds - {"file"}:
            dropped[path] = "symlink" if "symlink" in kinds else "special file"
            continue
        if any(ch in path for ch in "\0"):
            dropped[path] = "unrepresentable name"
            continue
        try:
            read_original(path)
        except ValueError:
            dropped[path] = "binary"
            continue
        if new is None:
            final[path] = None
            continue
        data = contents.get(path)
        if data is None:
            dropped[path] = "too large"
            continue
        try:
            final[path] = data.decode("utf-8")
        except UnicodeDecodeError:
            dropped[path] = "binary"
    return FinalTree(final, dropped)
