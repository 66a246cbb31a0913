"""Sweeps of thousands of units through the real driver (``raydist.driver.drive.run_job``):
planned from a benchmark file, scheduled on Ray, every row written, resumed, compiled and
reported by the production code. Only the unit body is a stand-in (``bench/cheap_sweep.py``:
``execute_unit`` with a scripted run that needs no container), so what is tested is what grows
with the number of units, not the sandbox.

Linearity is checked by counting (Parquet files read and written, keys hashed) at two sizes,
not by timing; ``bench/scheduling.py`` times it."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pyarrow.parquet as pq
import pytest
import ray
from ray.util.state import list_tasks

from raydist.cluster.scheduler import RayOptions, init_ray, run_units, unit_task_name
from raydist.cluster.unit_key import RunUnit
from raydist.driver.drive import run_job
from raydist.results import ResultStore
from raydist.tasks import load_instances

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import cheap_sweep

cheap_sweep.ship_by_value()
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray's workers cannot import tests/

FAST = ("cluster.max_concurrency=6", "cluster.cpus_per_unit=0.25")


def exploding_execute(unit, instance, settings, endpoint=None, prepared=None) -> dict:
    """A unit body that must never run: its row would be a ``bug``."""
    raise AssertionError(f"unit {unit.key} ran again")


def sweep(tmp_path: Path, n: int):
    source = cheap_sweep.write_instances(tmp_path / "instances.jsonl", n)
    return cheap_sweep.plan_sweep(source, tmp_path / "out", *FAST)


@pytest.mark.ray
@pytest.mark.docker
def test_2000_units_through_the_driver_each_run_once_and_a_resume_runs_none(tmp_path, capfd, client):
    if ray.is_initialized():
        ray.shutdown()  # the launch starts its own local Ray, as `raydist run` does
    job = sweep(tmp_path, 2000)
    assert len(job.units) == 2000 and len({u.key for u in job.units}) == 2000

    assert run_job(job, execute=cheap_sweep.cheap_execute) == 0
    out, err = capfd.readouterr()
    assert "2000 units planned, 0 finished before, 2000 to run" in out
    assert "2000/2000" in err and "failed=0" in err  # the progress bar's last state
    runs = pq.read_table(job.run_dir / "runs.parquet")
    assert runs.column("key").to_pylist() == [u.key for u in job.units]  # each once, in plan order
    assert set(runs.column("outcome").to_pylist()) == {"unresolved"}
    assert set(runs.column("attempts").to_pylist()) == {1}
    assert len(list((job.run_dir / "rows").iterdir())) == 2000
    assert len(list((job.run_dir / "trajectories").iterdir())) == 2000
    assert len(list((job.run_dir / "grading").iterdir())) == 2000
    assert "| - | null | L0 | 2000 | 0 | 0.0% |" in (job.run_dir / "summary.md").read_text()
    written = {p.name: p.stat().st_mtime_ns for p in (job.run_dir / "rows").iterdir()}

    # The same command again: every unit finished before, none runs (one that did would be a bug row).
    assert run_job(job, execute=exploding_execute) == 0
    out, _ = capfd.readouterr()
    assert "2000 units planned, 2000 finished before, 0 to run" in out
    assert {p.name: p.stat().st_mtime_ns for p in (job.run_dir / "rows").iterdir()} == written
    again = pq.read_table(job.run_dir / "runs.parquet")
    assert again.column("key").to_pylist() == [u.key for u in job.units]
    assert set(again.column("outcome").to_pylist()) == {"unresolved"}


class Counter:
    """Counts calls of a function it wraps (and passes them on)."""

    def __init__(self, function):
        self.function, self.calls = function, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.function(*args, **kwargs)


def store_work(tmp_path: Path, n: int, monkeypatch) -> dict[str, int]:
    """Parquet files opened for reading and tables written, and unit keys hashed, while ``n``
    cheap units' rows are written, then resumed (``finished_keys``) and compiled, as the driver
    does; no Ray, no Docker."""
    import raydist.cluster.unit_key as plan_module
    import raydist.results.store as store_module

    opened = Counter(pq.ParquetFile)
    written = Counter(pq.write_table)
    hashed = Counter(plan_module.stable_hash)
    monkeypatch.setattr(store_module.pq, "ParquetFile", opened)
    monkeypatch.setattr(store_module.pq, "write_table", written)
    monkeypatch.setattr(plan_module, "stable_hash", hashed)
    units = [RunUnit(f"cheap-{i:05d}", "h", "-", "null", "L0", 0, "c") for i in range(n)]
    store = ResultStore(tmp_path / f"n{n}")
    counts = {}
    for unit in units:
        store.write_row(cheap_sweep.sleeping_execute(unit, SimpleNamespace(extra={}), None))
    counts["writes"], written.calls = written.calls, 0
    assert store.finished_keys([u.key for u in units], retry_errors=True) == {u.key for u in units}
    counts["resume_reads"], opened.calls = opened.calls, 0
    assert store.compile([u.key for u in units]).num_rows == n
    counts["compile_reads"], counts["compile_writes"] = opened.calls, written.calls
    counts["hashes"] = hashed.calls
    return counts


def test_rows_written_read_and_keys_hashed_grow_linearly_with_the_units(tmp_path, monkeypatch):
    small, large = store_work(tmp_path, 50, monkeypatch), store_work(tmp_path, 200, monkeypatch)
    # One Parquet write per row; resume reads each row once (its outcome), compile once (whole);
    # compile writes runs.parquet (steps.parquet streams through a writer).
    assert small == {"writes": 50, "resume_reads": 50, "compile_reads": 50, "compile_writes": 1, "hashes": 50}
    assert large == {"writes": 200, "resume_reads": 200, "compile_reads": 200, "compile_writes": 1, "hashes": 200}


@pytest.mark.ray
def test_each_units_ray_task_is_named_after_the_unit_in_the_dashboards_task_list():
    if ray.is_initialized():
        ray.shutdown()  # another test's Ray, without a dashboard; ``ray_local`` starts one again when next used
    dashboard = init_ray(RayOptions(dashboard=True))
    try:
        assert dashboard is not None and dashboard.startswith("http://127.0.0.1:")
        instances = {i.instance_id: i for i in load_instances("builtin")}
        units = [RunUnit(iid, instances[iid].content_hash(), "-", "null", level, seed, "c")
                 for iid in list(instances)[:2] for level in ("L0", "L3") for seed in (0, 1)]
        rows: list[dict] = []
        run_units(units, instances, None, None, RayOptions(max_concurrency=4, cpus_per_unit=0.25), rows.append,
                  execute=cheap_sweep.sleeping_execute)
        assert sorted(r["key"] for r in rows) == sorted(u.key for u in units)
        names = {unit_task_name(u) for u in units}
        seen: dict = {}
        deadline = time.monotonic() + 60  # task events reach the state API within seconds
        while time.monotonic() < deadline:
            tasks = list_tasks(address=dashboard, filters=[("func_or_class_name", "=", "run_unit")], limit=10_000)
            seen = {t.name: t.state for t in tasks}
            if seen == dict.fromkeys(names, "FINISHED"):
                break
            time.sleep(0.5)
        assert seen == dict.fromkeys(names, "FINISHED")
    finally:
        ray.shutdown()
    first = units[0]
    assert unit_task_name(first) == f"{first.instance_id}/L0/s0/{first.key}"


def test_compile_takes_a_row_of_an_older_schema_with_nulls_and_refuses_one_with_an_unknown_column(tmp_path):
    import pyarrow as pa

    from raydist.results.schema import RUNS_SCHEMA

    old, new = RunUnit("a-1", "h", "-", "null", "L0", 0, "c"), RunUnit("a-2", "h", "-", "null", "L0", 0, "c")
    store = ResultStore(tmp_path)
    base = {"key": old.key, "instance_id": "a-1", "model": "-", "agent": "null", "level": "L0", "seed": 0,
            "config_hash": "c", "resolved": False, "outcome": "unresolved"}
    pq.write_table(pa.Table.from_pylist([base]), store.row_path(old.key))  # only the columns of its day
    [row] = store.compile([old.key]).to_pylist()
    assert row == {**dict.fromkeys(RUNS_SCHEMA.names), **base}
    pq.write_table(pa.Table.from_pylist([{**base, "key": new.key, "gold_apply_methd": "git"}]),
                   store.row_path(new.key))
    with pytest.raises(ValueError) as refused:
        store.compile([old.key, new.key])
    assert str(refused.value) == (f"runs.parquet row of unit {new.key} has column(s) 'gold_apply_methd', which are "
                                  f"no columns of the schema; the columns are {', '.join(RUNS_SCHEMA.names)}")
