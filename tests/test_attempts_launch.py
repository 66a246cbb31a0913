"""``attempts=k`` through a real launch: every attempt is its own unit with its own key, row and
trajectory, and raising ``attempts`` resumes: the attempts that have a row are not run again."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from tests.launches import launch

pytestmark = [pytest.mark.docker, pytest.mark.ray]


def test_raising_attempts_runs_only_the_new_attempts_each_its_own_unit(tmp_path, client):
    base = ("agent=null", "benchmark.limit=1", "levels=[L0]")
    first = launch(tmp_path, *base)
    assert first.returncode == 0, first.stderr[-3000:]
    run_dir = tmp_path / "builtin" / "null" / "gemma3-270m" / "L0__s0"
    [before] = pq.read_table(run_dir / "runs.parquet").to_pylist()

    second = launch(tmp_path, *base, "attempts=3")
    assert second.returncode == 0, second.stderr[-3000:]
    assert "3 units planned, 1 finished before, 2 to run" in second.stdout
    rows = pq.read_table(run_dir / "runs.parquet").to_pylist()
    assert [r["attempt"] for r in rows] == [0, 1, 2]
    assert rows[0]["key"] == before["key"] and rows[0]["finished_at"] == before["finished_at"]  # not run again
    assert len({r["key"] for r in rows}) == 3
    assert {(r["instance_id"], r["level"], r["seed"], r["outcome"]) for r in rows} == {
        (before["instance_id"], "L0", 0, "unresolved")}
    trajectories = sorted(p.name for p in (run_dir / "trajectories").iterdir())
    assert len(trajectories) == 3 and sum("__a1__" in n for n in trajectories) == 1
    steps = pq.read_table(run_dir / "steps.parquet").to_pylist()
    assert sorted({s["attempt"] for s in steps}) == [0, 1, 2]

    refused = launch(tmp_path, *base, "attempts=0")
    assert refused.returncode == 2
    assert "attempts=0: give a whole number >= 1" in refused.stderr
