"""How the suite is split over pytest-xdist workers (tests/conftest.py, tests/README.md): a
shared fixture is made once, on one worker, however its tests are interleaved with others;
whole-machine tests share a worker; the rest spread over both. Checked by running a small
suite of its own under `-n 2 --dist loadgroup` with the suite's real grouping hook."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CONFTEST = f'''
import os, sys, time
import pytest
sys.path.insert(0, {str(ROOT)!r})
from tests.conftest import pytest_collection_modifyitems  # noqa: F401  the hook under test


def _record(what):
    with open(os.path.join(os.environ["GROUPS_LOG"], what), "a") as f:
        f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")


@pytest.fixture(scope="session")
def builtin_launch():
    _record("made")


@pytest.fixture(scope="module")
def per_module():
    _record("module_made")
'''

def _tests() -> str:
    """Readers of the shared fixture, whole-machine tests, users of a module fixture and plain
    tests, interleaved, each taking the same short time: spread test by test, each kind would
    land on both workers."""
    kinds = ("reader", "other", "machine", "other", "module", "other") * 4
    lines = ["import time", "import pytest", "from conftest import _record", ""]
    for i, kind in enumerate(kinds):
        if kind == "machine":
            lines.append("@pytest.mark.whole_machine")
        fixture = {"reader": "builtin_launch", "module": "per_module"}.get(kind, "")
        lines.append(f"def test_{kind}_{i}({fixture}):\n    _record({kind!r})\n    time.sleep(0.3)\n")
    return "\n".join(lines)


def test_a_shared_fixture_is_made_once_and_its_tests_whole_machine_tests_and_a_module_stay_together(tmp_path):
    suite, log = tmp_path / "suite", tmp_path / "log"
    suite.mkdir()
    log.mkdir()
    (suite / "conftest.py").write_text(CONFTEST)
    (suite / "test_mixed.py").write_text(_tests())
    (suite / "pytest.ini").write_text("[pytest]\nmarkers =\n    whole_machine: one group\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider",
                           "-q", str(suite)], cwd=suite, env={**_env(), "GROUPS_LOG": str(log)}, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "24 passed" in done.stdout

    def workers(what: str) -> list[str]:
        return (log / what).read_text().split()

    assert len(workers("made")) == 1  # one shared launch, not one per worker
    assert set(workers("reader")) == set(workers("made")) and len(workers("reader")) == 4
    assert len(workers("machine")) == 4 and len(set(workers("machine"))) == 1
    assert len(workers("module_made")) == 1 and len(set(workers("module"))) == 1
    assert set(workers("other")) == {"gw0", "gw1"}


def _env() -> dict:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
