"""A unit's files (trajectory, grading log) travel with its row and are written by the driver:
the size bound, the trajectory of a run that failed, and the store that writes them."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from raydist.agents.outcome import save_trajectory
from raydist.cluster.outputs import bounded, cut_marker, grading_log, trajectory_name
from raydist.cluster.unit import UnitSettings, execute_unit
from raydist.cluster.unit_key import RunUnit
from raydist.results import ResultStore
from raydist.sandbox.settings import SandboxSettings

UNIT = RunUnit("pkg__issue-7", "h", "-", "null", "L0", 3, "c")
SETTINGS = UnitSettings(agent_kind="null", agent_settings={}, view_options={}, cache_dir="/nonexistent",
                        run_dir="/nonexistent", sandbox=SandboxSettings(grading_timeout_s=60))


def test_a_text_within_the_bound_is_kept_whole():
    assert bounded("abcdef", 6) == "abcdef"


def test_a_text_over_the_bound_keeps_its_head_and_tail_around_the_marker():
    text = "H" * 500 + "m" * 1000 + "T" * 500
    marker = cut_marker(2000, 400)
    keep = 400 - len(marker)
    out = bounded(text, 400)
    assert len(out) == 400
    assert out == "H" * (keep // 2) + marker + "T" * (keep - keep // 2)
    assert marker == (
        "\n[raydist: the middle of this file was cut here: it had 2000 characters, a unit's file keeps 400]\n")


def test_a_bound_too_small_for_the_marker_is_refused():
    with pytest.raises(ValueError, match="cannot hold the truncation marker"):
        bounded("x" * 100, 50)


def test_a_huge_grading_log_is_cut_to_its_bound(monkeypatch):
    monkeypatch.setattr("raydist.cluster.outputs.GRADING_LOG_LIMIT", 300)
    [(name, text)] = grading_log(UNIT, "start\n" + "x" * 10_000 + "\nend").items()
    assert name == f"grading/pkg__issue-7__L0__s3__{UNIT.key[:8]}.grading.log"
    assert len(text) == 300 and text.startswith("start\n") and text.endswith("\nend")
    assert cut_marker(10_010, 300) in text


def test_the_trajectory_of_a_run_that_failed_after_saving_it_travels_with_the_error_row():
    seen = {}

    def run(unit, instance, settings, endpoint, prepared, trajectory_path):  # noqa: ARG001
        seen["path"] = trajectory_path
        save_trajectory({"messages": [{"role": "user", "content": "hi"}]}, trajectory_path)
        raise RuntimeError("after the first step")

    row = execute_unit(UNIT, None, SETTINGS, run=run)
    assert (row["outcome"], row["error_cause"]) == ("bug", "RuntimeError")
    assert row["files"] == {f"trajectories/{trajectory_name(UNIT)}":
                            json.dumps({"messages": [{"role": "user", "content": "hi"}]}, indent=2)}
    assert not seen["path"].parent.exists()  # the node's scratch copy is gone


def test_a_unit_that_saved_nothing_sends_no_files():
    row = execute_unit(UNIT, None, SETTINGS, run=lambda *args: {"outcome": "unresolved", "agent_exit": "submitted"})
    assert "files" not in row


def _row(**extra) -> dict:
    return {"key": UNIT.key, "instance_id": UNIT.instance_id, "model": "-", "agent": "null", "level": "L0",
            "seed": 3, "config_hash": "c", "resolved": False, "outcome": "unresolved", **extra}


def test_the_store_writes_a_units_files_and_points_the_row_at_its_trajectory(tmp_path):
    store = ResultStore(tmp_path)
    traj, log = f"trajectories/{trajectory_name(UNIT)}", "grading/u.grading.log"
    store.write_row(_row(files={traj: '{"a": 1}', log: "tests: 1 passed\n"}))
    assert (tmp_path / traj).read_text() == '{"a": 1}'
    assert (tmp_path / log).read_text() == "tests: 1 passed\n"
    [stored] = pq.read_table(store.row_path(UNIT.key)).to_pylist()
    assert stored["trajectory"] == str(tmp_path / traj)


@pytest.mark.parametrize("name", ["../escape.log", "trajectories/../../x", "rows/k.parquet", "grading/.hidden",
                                  "grading/", "trajectories/a/b.json"])
def test_the_store_refuses_a_unit_file_outside_its_folders_and_writes_nothing(tmp_path, name):
    store = ResultStore(tmp_path / "run")
    with pytest.raises(ValueError, match="is not <folder>/<file name>"):
        store.write_row(_row(files={name: "x"}))
    assert not store.row_path(UNIT.key).exists()
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == []
