"""Test infrastructure a patch must not change: what counts, and how it is detected.

A patch is graded by the repository's tests as the benchmark defines them. Files that decide
how pytest runs or reports (every ``conftest.py`` and ``pytest.ini``, the pytest sections of
``tox.ini`` / ``setup.cfg`` / ``pyproject.toml`` at any depth, since pytest takes its
configuration from the nearest one above its arguments, and top-level modules that shadow the
runner itself: ``pytest.py``, ``_pytest/``, ``pluggy/``, ``py.py``, ``sitecustomize.py``,
``usercustomize.py``) are put back to their base state before the tests run, and the row lists
them (``test_infra_changed``). So are packaging metadata files (``*.dist-info/``,
``*.egg-info/``, ``*.egg-link``, ``*.pth``, ``entry_points.txt``): ``importlib.metadata`` reads
them from every ``sys.path`` entry, ``/testbed`` included, and pytest loads every ``pytest11``
entry point they declare before any conftest. Most of these are build products absent from
git, so they are compared with the tree as it was before the patch, not with ``HEAD``. This goes
one step past SWE-bench, which only resets the files ``test_patch`` touches: a ``conftest.py``
hook can rewrite every report, so a patch that changes one cannot be graded by the reports it
produces. No gold patch of the SWE-bench sets in ``shared/data`` touches such a file.
"""
from __future__ import annotations

import configparser
import tomllib

CONFTEST = "conftest.py"
INI_FILES = ("pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml")
# Top-level names `python -m pytest` would import from the repository root before the real ones.
SHADOWS = ("pytest.py", "_pytest", "pluggy", "py.py", "sitecustomize.py", "usercustomize.py")
# file -> how to read its pytest section
SECTION_FILES = {"tox.ini": "ini:pytest", "setup.cfg": "ini:tool:pytest", "pyproject.toml": "toml"}
# Packaging metadata: directories whose every file counts, and single files.
PACKAGING_DIRS = (".dist-info", ".egg-info")
PACKAGING_FILES = (".egg-link", ".pth")
ENTRY_POINTS = "entry_points.txt"


def infra_kind(path: str) -> str | None:
    """``"always"`` when any change to ``path`` is a test-infrastructure change, ``"section"``
    when only a change to its pytest section is (``tox.ini``, ``setup.cfg``,
    ``pyproject.toml``, at any depth), else None. ``path`` is repository-relative POSIX.
    Packaging metadata is :func:`is_packaging`'s."""
    parts = path.split("/")
    if parts[-1] == CONFTEST or parts[-1] in INI_FILES or parts[0] in SHADOWS:
        return "always"
    if parts[-1] in SECTION_FILES:
        return "section"
    return None


def is_packaging(path: str) -> bool:
    """True when ``path`` (repository-relative POSIX) is packaging metadata that can register
    a pytest plugin: inside a ``*.dist-info`` / ``*.egg-info`` directory (or that directory
    itself), a ``*.egg-link`` or ``*.pth`` file, or an ``entry_points.txt`` anywhere."""
    parts = path.rstrip("/").split("/")
    return (any(p.endswith(PACKAGING_DIRS) for p in parts) or parts[-1].endswith(PACKAGING_FILES)
            or parts[-1] == ENTRY_POINTS)


def packaging_changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Sorted packaging paths whose entry differs between two listings of the tree (path ->
    a fingerprint: file digest, link target, ``dir``), added and removed ones included."""
    return sorted(p for p in set(before) | set(after) if is_packaging(p) and before.get(p) != after.get(p))


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
