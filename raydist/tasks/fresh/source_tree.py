"""One unpacked source release on the host, whose tests run with and without a patch.

The tree is unpacked once; each run is the test-execution service's host runner
(``raydist.grading.HostRunner.run_in``): the patch applied with ``git apply`` (the command the
instance image and the grader use), the test command run with the pins' virtualenv first on
``PATH`` and bytecode never written, the patch reverted before the next run. A run is a
``raydist.grading.TestRun`` (``tests``, ``log``, ``timed_out``, ``seconds``, ``passing()``).
"""

from __future__ import annotations

from pathlib import Path

from raydist.grading import HostRunner, PatchError, TestRun

__all__ = ["PYTEST", "PatchError", "SourceTree", "TestRun", "detect_test_cmd"]


class SourceTree:
    """``root`` (an unpacked sdist) with a virtualenv holding ``install`` (made under ``work``)
    and its ``test_cmd``; ``timeout`` seconds per run."""

    def __init__(self, root: Path, install: tuple[str, ...], test_cmd: str, work: Path, timeout: float = 300):
        self.root, self.install, self.test_cmd, self.timeout = Path(root), install, test_cmd, timeout
        self._runner = HostRunner(Path(work), timeout=timeout)

    def run(self, patch: str = "") -> TestRun:
        """The test command's outcome with ``patch`` applied (then reverted); raises
        :class:`PatchError` when it does not apply."""
        return self._runner.run_in(self.root, self.install, self.test_cmd, patch)


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
