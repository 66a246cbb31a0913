"""Outcomes through the real launcher (Hydra, Ray, Docker, a built-in repository): an instance
that cannot be run is an input error, counted apart from the rates, and the exit status says
that a unit errored."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.docker, pytest.mark.ray]


def _instances(tmp_path: Path) -> Path:
    """A good built-in instance, the same with a gold patch that modifies a file the repository
    lacks (no method of SWE-bench's applies it, not even `patch --fuzz=5`, which does apply a
    hunk whose context merely drifted), and the same with a test patch that modifies a file the
    repository lacks."""
    lines = (ROOT / "raydist" / "tasks" / "builtin" / "instances.jsonl").read_text().splitlines()
    good = next(json.loads(line) for line in lines if "underscore-dashes" in line)
    bad_gold = dict(good, instance_id="bad-gold",
                    patch=good["patch"].replace("inflection/__init__.py", "inflection/not_there.py"))
    bad_tests = dict(good, instance_id="bad-tests",  # modifies a test file the repository does not have
                     test_patch=good["test_patch"].replace("test_inflection.py", "test_not_there.py"))
    assert bad_gold["patch"] != good["patch"] and bad_tests["test_patch"] != good["test_patch"]
    source = tmp_path / "instances.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in (good, bad_gold, bad_tests)))
    return source


def _launch(tmp_path: Path, agent: str, source: Path) -> tuple[subprocess.CompletedProcess, list[dict]]:
    res = subprocess.run([sys.executable, "-m", "raydist.launch", f"output_root={tmp_path}", f"agent={agent}",
                          "benchmark=file", f"benchmark.source={source}", "levels=[L0]"],
                         cwd=ROOT, capture_output=True, text=True, timeout=1500, check=False)
    rows = pq.read_table(tmp_path / "file" / agent / "gemma3-270m" / "L0__s0" / "runs.parquet").to_pylist()
    return res, rows


@pytest.mark.slow
def test_instances_that_cannot_run_are_input_errors_out_of_the_rates_and_the_launch_exits_1(tmp_path):
    source = _instances(tmp_path)
    good_id = json.loads(source.read_text().splitlines()[0])["instance_id"]

    res, rows = _launch(tmp_path, "oracle", source)
    assert res.returncode == 1, res.stderr[-3000:]
    got = {r["instance_id"]: (r["outcome"], r["agent_exit"], r["error_cause"]) for r in rows}
    assert got == {good_id: ("resolved", "submitted", None),
                   "bad-gold": ("input_error", None, "gold_patch_does_not_apply"),
                   # the gold patch of bad-tests applies; its test patch does not
                   "bad-tests": ("input_error", "submitted", "test_patch_does_not_apply")}
    # The rate is over the one finished unit: 100%, not 1 of 3.
    assert "| - | oracle | L0 | 1 | 1 | 100.0% | 33.3% | 2.0 | 0 | 0 | 0.0000 | 2 | 0 | 0 |" in res.stdout
    assert "| input_error | gold_patch_does_not_apply | 1 | bad-gold L0 seed 0: UnitInputError: " in res.stdout
    assert "| input_error | test_patch_does_not_apply | 1 | bad-tests L0 seed 0: " in res.stdout

    # Input errors never run again: the same command finds all three done.
    res, again = _launch(tmp_path, "oracle", source)
    assert res.returncode == 1
    assert "3 units planned, 3 finished before, 0 to run" in res.stdout
    assert [r["finished_at"] for r in again] == [r["finished_at"] for r in rows]

    res, rows = _launch(tmp_path, "null", source)
    assert res.returncode == 1, res.stderr[-3000:]
    got = {r["instance_id"]: (r["outcome"], r["agent_exit"], r["error_cause"]) for r in rows}
    assert got == {good_id: ("unresolved", "submitted", None), "bad-gold": ("unresolved", "submitted", None),
                   "bad-tests": ("input_error", "submitted", "test_patch_does_not_apply")}
    assert "| - | null | L0 | 2 | 0 | 0.0% | 0.0% | 1.0 | 0 | 0 | 0.0000 | 1 | 0 | 0 |" in res.stdout
