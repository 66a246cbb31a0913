"""One unpacked source release on the host, whose tests run with and without a patch.

The tree is unpacked once; a patch is applied with ``git apply`` (the command the instance
image and the grader use), the test command runs with the pins' virtualenv first on ``PATH``,
and the patch is reverted before the next run. Bytecode is never written: a mutation may keep a
file's size and land within the same second, and Python would then trust a stale ``.pyc``.
"""

from __future__ import annotations

import difflib
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from raydist.tasks.measure import make_venv, parse_statuses


class PatchError(RuntimeError):
    """A patch does not apply (or revert) with ``git apply``."""


@dataclass(frozen=True)
class TestRun:
    """One run of the test command: ``statuses`` (test id -> PASSED/FAILED/ERROR/SKIPPED/XFAIL,
    by SWE-bench's pytest log parser), the combined ``log``, whether it ``timed_out``, its wall ``seconds``."""

    statuses: dict = field(default_factory=dict)
    log: str = ""
    timed_out: bool = False
    seconds: float = 0.0

    def passing(self) -> frozenset[str]:
        """The ids of the tests that PASSED."""
        return frozenset(t for t, s in self.statuses.items() if s == "PASSED")


def make_diff(path: str, old: str, new: str) -> str:
    """A git-style unified diff (3 lines of context) turning ``old`` into ``new`` at ``path``;
    "" when they are equal. A last line without a newline is marked as git marks it."""
    body = []
    for line in difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                     fromfile=f"a/{path}", tofile=f"b/{path}", n=3):
        body.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return f"diff --git a/{path} b/{path}\n" + "".join(body) if body else ""


def git_apply(root: Path, diff: str, *, reverse: bool = False) -> None:
    """``git apply`` (``-R`` with ``reverse``) ``diff`` at ``root``; :class:`PatchError` with git's message."""
    argv = ["git", "apply", "--whitespace=nowarn", *(["-R"] if reverse else []), "-"]
    done = subprocess.run(argv, cwd=root, input=diff, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise PatchError(f"the patch does not {'revert' if reverse else 'apply'} at {root}: {done.stderr.strip()}")


class SourceTree:
    """``root`` (an unpacked sdist) with a virtualenv holding ``install`` (made under ``work``)
    and its ``test_cmd``; ``timeout`` seconds per run."""

    def __init__(self, root: Path, install: tuple[str, ...], test_cmd: str, work: Path, timeout: float = 300):
        self.root, self.test_cmd, self.timeout = Path(root), test_cmd, timeout
        self.venv = make_venv(install, Path(work))

    def run(self, patch: str = "") -> TestRun:
        """The test command's outcome with ``patch`` applied (then reverted); raises
        :class:`PatchError` when it does not apply."""
        if patch:
            git_apply(self.root, patch)
        try:
            return self._run_tests()
        finally:
            if patch:
                git_apply(self.root, patch, reverse=True)

    def _run_tests(self) -> TestRun:
        env = dict(os.environ, PATH=f"{self.venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
                   PYTHONDONTWRITEBYTECODE="1")
        env.pop("PYTHONPATH", None)  # the library under test comes from the tree, never from raydist's path
        start = time.monotonic()
        proc = subprocess.Popen(self.test_cmd, shell=True, cwd=self.root, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            log, _ = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the shell's children too (pytest, its workers)
            log, _ = proc.communicate()
            return TestRun({}, log or "", True, time.monotonic() - start)
        return TestRun(parse_statuses(log), log, False, time.monotonic() - start)


PYTEST = 'python -m pytest -rA -p no:cacheprovider -o addopts=""'
"""The test command's prefix: every result line (``-rA``) for SWE-bench's log parser, no cache
written into the tree, the project's own ``addopts`` (coverage, xdist) off."""


def detect_test_cmd(root: Path) -> str:
    """``PYTEST`` on the release's tests: its ``tests``/``test`` folder, else its top-level
    ``test_*.py`` files, else ``<package>/tests``; ``FileNotFoundError`` when it ships none."""
    for folder in ("tests", "test"):
        if (root / folder).is_dir():
            return f"{PYTEST} {folder}"
    top = sorted(p.name for p in root.glob("test_*.py"))
    if top:
        return f"{PYTEST} {' '.join(top)}"
    nested = sorted(p.relative_to(root).as_posix() for p in root.glob("*/tests") if p.is_dir())
    if nested:
        return f"{PYTEST} {' '.join(nested)}"
    raise FileNotFoundError(f"{root.name} ships no tests (no tests/, test/, test_*.py or */tests); "
                            "give its test command with --test-cmd NAME=COMMAND")
