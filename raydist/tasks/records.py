"""Records found in the wild -> :class:`Instance`, normalising their field forms.

SWE-bench datasets store ``FAIL_TO_PASS``/``PASS_TO_PASS`` as JSON strings, derived
sets store lists, and some dumps store Python literals (single quotes, from ``str(list)``);
``install`` pins appear in the same three forms. All become tuples of strings here.
"""

from __future__ import annotations

import ast
import json
import re
import unicodedata
from typing import Any

from unidiff import PatchSet, UnidiffParseError

from raydist.tasks.schema import (
    DEFAULT_INSTALL,
    DEFAULT_PYTHON,
    Instance,
    MalformedInstance,
    Recipe,
    Sdist,
    repeated_test_id,
)

REQUIRED_TEXT = ("instance_id", "repo", "base_commit", "patch", "test_patch", "problem_statement")
OPTIONAL_TEXT = ("version", "test_cmd")
TEST_LISTS = ("FAIL_TO_PASS", "PASS_TO_PASS")
RECIPE_FIELDS = ("sdist", "install", "install_repo", "injected_patch", "python")
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")
# An id names files and directories (run rows, logs, images) and is printed on one line.
_UNSAFE_ID = re.compile(r"[\x00-\x1f\x7f-\x9f/\\]")
# A file a diff names: `diff --git a/X b/Y`, `rename from X` / `copy to Y` (git's extended headers).
_GIT_PATHS = re.compile(r"^diff --git a/(\S+) b/(\S+)$|^(?:rename|copy) (?:from|to) (.+)$", re.MULTILINE)


def instance_from_record(
    record: dict, source: str, *, default_install: tuple[str, ...] = DEFAULT_INSTALL
) -> Instance:
    """Build an :class:`Instance` from one record (a JSON object / Parquet row / HF row).

    ``source`` locates the record in error messages (``file:line``). Test-id lists and
    ``install`` may be a list, a JSON string or a Python-literal string. A record with
    an ``sdist`` dict gets a :class:`Recipe` (``install`` absent -> ``default_install``,
    ``install_repo`` absent -> ``None``); without one the recipe is ``None`` and the
    recipe fields stay in ``extra``. ``test_cmd``/``version`` absent -> "". Every field
    not in the schema goes to ``extra``.

    Raises :class:`MalformedInstance` naming the field (and the id, once it is read) for a
    missing required field, a wrong type, a string holding a lone surrogate (``"\\udc80"``
    in JSON, which no file can be written with), an empty ``instance_id`` or one with a control
    character, a path separator or that is ``.``/``..`` (ids become file names), a blank
    ``problem_statement``, a ``test_cmd`` given but blank (absent is allowed: SWE-bench rows
    carry none), an empty ``FAIL_TO_PASS``, a blank test id or one listed twice (within a list
    or in both), a ``patch`` that is not a unified diff, a non-empty ``test_patch`` that is not
    one (empty is allowed: the tests may ship with the release), a diff naming a file outside
    the repository (``escaping_path``), or an sdist ``sha256`` that is not 64 hex digits.
    """
    if not isinstance(record, dict):
        raise MalformedInstance(source, None, f"is not a JSON object (got {type(record).__name__})")
    text = {name: _text(record, name, source, required=True) for name in REQUIRED_TEXT}
    text |= {name: _text(record, name, source, required=False) for name in OPTIONAL_TEXT}
    _check_id(text["instance_id"], source)
    tests = {name: _string_tuple(_required(record, name, source), name, source, "test ids") for name in TEST_LISTS}
    _check_content(record, text, tests, source)
    recipe = _recipe(record, source, default_install)
    consumed = set(REQUIRED_TEXT) | set(OPTIONAL_TEXT) | set(TEST_LISTS)
    if recipe is not None:
        consumed |= set(RECIPE_FIELDS)
    extra = {k: v for k, v in record.items() if k not in consumed}
    return Instance(**text, **tests, recipe=recipe, extra=extra)


def _check_id(instance_id: str, source: str) -> None:
    if not instance_id.strip():
        raise MalformedInstance(source, "instance_id", "is empty")
    if (_UNSAFE_ID.search(instance_id) or instance_id in (".", "..")
            or any(unicodedata.category(c) == "Cf" for c in instance_id)):
        raise MalformedInstance(source, "instance_id", f"{instance_id!r} holds a control or format character "
                                "(e.g. a right-to-left override) or a path separator, or is '.'/'..' (ids become "
                                "file names and are printed on one line)")


def _check_content(record: dict, text: dict[str, str], tests: dict[str, tuple[str, ...]], source: str) -> None:
    """The row-level rules of :func:`instance_from_record` once its fields have their types."""
    instance_id = text["instance_id"]

    def refuse(field: str, problem: str) -> MalformedInstance:
        return MalformedInstance(source, field, problem, instance_id=instance_id)

    surrogate = _field_with_surrogate(record)
    if surrogate is not None:
        raise refuse(surrogate, "holds a lone surrogate (an escape such as \\udc80), which is not text")
    if not text["problem_statement"].strip():
        raise refuse("problem_statement", "is blank: the agent would be given no task")
    if record.get("test_cmd") is not None and not text["test_cmd"].strip():
        raise refuse("test_cmd", "is blank; give the command that runs the tests, or leave the field out")
    if not tests["FAIL_TO_PASS"]:
        # With no test that the fix must turn green, every patch (even an empty one) "resolves".
        raise refuse("FAIL_TO_PASS", "is empty: an instance needs at least one test its fix makes pass")
    for name in TEST_LISTS:
        if any(not test.strip() for test in tests[name]):
            raise refuse(name, "lists a blank test id")
    repeated = repeated_test_id(tests["FAIL_TO_PASS"], tests["PASS_TO_PASS"])
    if repeated is not None:
        raise refuse(*repeated)
    for name in ("patch", "test_patch"):
        if (text[name] or name == "patch") and not is_unified_diff(text[name]):
            raise refuse(name, f"is not a unified diff (starts {text[name][:40]!r})")
        escaping = escaping_path(text[name]) if text[name] else None
        if escaping is not None:
            raise refuse(name, f"changes {escaping!r}, outside the repository (an absolute path or a '..' part)")


def escaping_path(diff: str) -> str | None:
    """The first file ``diff`` (a unified diff) names that lies outside the repository it
    applies to: an absolute path or one with a ``..`` part, after git's ``a/`` / ``b/``
    prefix; None when every path stays inside. Read from the file headers ``unidiff`` parses
    and git's ``diff --git`` / ``rename`` / ``copy`` lines (a hunk line never starts with those)."""
    paths: list[str] = []
    try:
        for patched in PatchSet(diff):
            paths += [patched.source_file, patched.target_file]
    except UnidiffParseError:
        pass
    for match in _GIT_PATHS.finditer(diff):
        paths += [group for group in match.groups() if group]
    for path in paths:
        if path == "/dev/null":
            continue
        relative = path[2:] if path.startswith(("a/", "b/")) else path
        if relative.startswith("/") or ".." in relative.split("/"):
            return path
    return None


def is_unified_diff(text: str) -> bool:
    """True when ``text`` is a unified diff of at least one file, as ``git diff`` / ``diff -u``
    write it: ``unidiff`` parses it, or (for what it reads too strictly, e.g. binary or mode-only
    changes) it has a ``diff --git`` header line."""
    if re.search(r"^diff --git ", text, re.MULTILINE):
        return True
    try:
        return len(PatchSet(text)) > 0
    except UnidiffParseError:
        return False


def _field_with_surrogate(record: dict) -> str | None:
    """The first field whose string (or a string in its list / object) cannot be UTF-8 encoded."""
    for name, value in record.items():
        if isinstance(value, dict):
            value = list(value.values())
        strings = value if isinstance(value, (list, tuple)) else [value]
        if any(isinstance(s, str) and not _encodes(s) for s in strings):
            return name
    return None


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _required(record: dict, name: str, source: str) -> Any:
    if record.get(name) is None:
        raise MalformedInstance(source, name, "is missing")
    return record[name]


def _text(record: dict, name: str, source: str, *, required: bool) -> str:
    value = _required(record, name, source) if required else record.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise MalformedInstance(source, name, f"is not a string (got {type(value).__name__})")
    return value


def _string_tuple(value: Any, name: str, source: str, what: str) -> tuple[str, ...]:
    """A list of strings given as a list, a JSON string or a Python-literal string."""
    if isinstance(value, str):
        value = _parse_list_text(value)
    if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        return tuple(value)
    got = type(value).__name__ if not isinstance(value, (list, tuple)) else "a list with non-string items"
    raise MalformedInstance(source, name, f"is not a list of {what} (got {got})")


def _parse_list_text(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _recipe(record: dict, source: str, default_install: tuple[str, ...]) -> Recipe | None:
    raw = record.get("sdist")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise MalformedInstance(source, "sdist",
                                f"is not an object with name, version, sha256 (got {type(raw).__name__})")
    install = record.get("install")
    return Recipe(
        sdist=_sdist(raw, source),
        install=default_install if install is None else _string_tuple(install, "install", source, "requirement pins"),
        install_repo=_text(record, "install_repo", source, required=False) or None,
        injected_patch=_text(record, "injected_patch", source, required=False),
        python=_text(record, "python", source, required=False) or DEFAULT_PYTHON,
    )


def _sdist(raw: dict, source: str) -> Sdist:
    parts = {}
    for key in ("name", "version", "sha256"):
        value = raw.get(key)
        if not isinstance(value, str) or not value:
            raise MalformedInstance(source, f"sdist.{key}", f"is missing or not a string (got {type(value).__name__})")
        parts[key] = value
    if not _SHA256.fullmatch(parts["sha256"]):
        raise MalformedInstance(source, "sdist.sha256", f"is not 64 hex digits (got {parts['sha256']!r})")
    filename = raw.get("filename")
    if filename is not None and not isinstance(filename, str):
        raise MalformedInstance(source, "sdist.filename", f"is not a string (got {type(filename).__name__})")
    return Sdist(name=parts["name"], version=parts["version"], sha256=parts["sha256"].lower(), filename=filename)
