"""Records found in the wild -> :class:`Instance`, normalising their field forms.

SWE-bench datasets store ``FAIL_TO_PASS``/``PASS_TO_PASS`` as JSON strings, derived
sets store lists, and some dumps store Python literals (single quotes, from ``str(list)``);
``install`` pins appear in the same three forms. All become tuples of strings here.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from raydist.tasks.schema import (
    DEFAULT_INSTALL,
    DEFAULT_PYTHON,
    Instance,
    MalformedInstance,
    Recipe,
    Sdist,
)

REQUIRED_TEXT = ("instance_id", "repo", "base_commit", "patch", "test_patch", "problem_statement")
OPTIONAL_TEXT = ("version", "test_cmd")
TEST_LISTS = ("FAIL_TO_PASS", "PASS_TO_PASS")
RECIPE_FIELDS = ("sdist", "install", "install_repo", "injected_patch", "python")
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")


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

    Raises :class:`MalformedInstance` for a missing required field, a wrong type, an
    empty ``instance_id`` or an sdist ``sha256`` that is not 64 hex digits.
    """
    if not isinstance(record, dict):
        raise MalformedInstance(source, None, f"is not a JSON object (got {type(record).__name__})")
    text = {name: _text(record, name, source, required=True) for name in REQUIRED_TEXT}
    text |= {name: _text(record, name, source, required=False) for name in OPTIONAL_TEXT}
    if not text["instance_id"].strip():
        raise MalformedInstance(source, "instance_id", "is empty")
    tests = {name: _string_tuple(_required(record, name, source), name, source, "test ids") for name in TEST_LISTS}
    if not tests["FAIL_TO_PASS"]:
        # With no test that the fix must turn green, every patch (even an empty one) "resolves".
        raise MalformedInstance(source, "FAIL_TO_PASS",
                                "is empty: an instance needs at least one test its fix makes pass")
    recipe = _recipe(record, source, default_install)
    consumed = set(REQUIRED_TEXT) | set(OPTIONAL_TEXT) | set(TEST_LISTS)
    if recipe is not None:
        consumed |= set(RECIPE_FIELDS)
    extra = {k: v for k, v in record.items() if k not in consumed}
    return Instance(**text, **tests, recipe=recipe, extra=extra)


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
