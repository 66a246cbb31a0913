"""Test infrastructure a patch must not change: what counts, and how it is detected.

A patch is graded by the repository's tests as the benchmark defines them. Files that decide
how pytest runs or reports (every ``conftest.py``, ``pytest.ini``, the pytest sections of
``tox.ini`` / ``setup.cfg`` / ``pyproject.toml``, and top-level modules that shadow the runner
itself: ``pytest.py``, ``_pytest/``, ``pluggy/``, ``py.py``, ``sitecustomize.py``,
``usercustomize.py``) are put back to their base state before the tests run, and the row lists
them (``test_infra_changed``). This goes one step past SWE-bench, which only resets the files
``test_patch`` touches: a ``conftest.py`` hook can rewrite every report, so a patch that
changes one cannot be graded by the reports it produces. No gold patch of the SWE-bench sets
in ``shared/data`` touches such a file.
"""
from __future__ import annotations

import configparser
import tomllib

CONFTEST = "conftest.py"
INI_FILES = ("pytest.ini", ".pytest.ini")
# Top-level names `python -m pytest` would import from the repository root before the real ones.
SHADOWS = ("pytest.py", "_pytest", "pluggy", "py.py", "sitecustomize.py", "usercustomize.py")
# file -> how to read its pytest section
SECTION_FILES = {"tox.ini": "ini:pytest", "setup.cfg": "ini:tool:pytest", "pyproject.toml": "toml"}


def infra_kind(path: str) -> str | None:
    """``"always"`` when any change to ``path`` is a test-infrastructure change, ``"section"``
    when only a change to its pytest section is (``tox.ini``, ``setup.cfg``,
    ``pyproject.toml`` at the root), else None. ``path`` is repository-relative POSIX."""
    parts = path.split("/")
    if parts[-1] == CONFTEST or parts[-1] in INI_FILES or parts[0] in SHADOWS:
        return "always"
    if len(parts) == 1 and parts[0] in SECTION_FILES:
        return "section"
    return None


def pytest_section(path: str, text: str | None) -> object:
    """The pytest configuration ``text`` (the content of ``path``) holds, comparable with
    ``==``; None when absent; the text itself when it does not parse (any change then counts)."""
    if text is None:
        return None
    kind = SECTION_FILES[path.rsplit("/", 1)[-1]]
    try:
        if kind == "toml":
            return tomllib.loads(text).get("tool", {}).get("pytest")
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        parser.read_string(text)
        name = kind.split(":", 1)[1]
        return dict(parser[name]) if parser.has_section(name) else None
    except (tomllib.TOMLDecodeError, configparser.Error, AttributeError):
        return text


def infra_changes(changed: dict[str, tuple[str | None, str | None]]) -> list[str]:
    """Sorted paths among ``changed`` (path -> (base text, patched text), None: absent or
    binary) whose change is a test-infrastructure change (see ``infra_kind``)."""
    out = []
    for path, (before, after) in changed.items():
        kind = infra_kind(path)
        if kind == "always" or (kind == "section" and pytest_section(path, before) != pytest_section(path, after)):
            out.append(path)
    return sorted(out)
