"""The units phase says what it ran, and compile checks that against the rows it reads back
from the run directory (those of earlier launches included). No Ray, no Docker."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from raydist.cluster import execute as phases
from raydist.cluster.unit_key import RunUnit, build_plan
from raydist.driver.report import compile_tables
from raydist.results import ResultStore
from raydist.results.sink import RowSink


class FakeInstance:
    def __init__(self, instance_id: str) -> None:
        self.instance_id = instance_id

    def content_hash(self) -> str:
        return "h-" + self.instance_id


def _units() -> tuple[RunUnit, ...]:
    instances = [FakeInstance("a__x-1"), FakeInstance("b__y-2")]
    return tuple(build_plan(instances, model="-", agent="null", levels=["L0"], seeds=[0, 1], config_hash="c"))


def _row(unit: RunUnit, outcome: str) -> dict:
    return {"key": unit.key, "instance_id": unit.instance_id, "model": unit.model, "agent": unit.agent,
            "level": unit.level, "seed": unit.seed, "config_hash": unit.config_hash,
            "resolved": outcome == "resolved", "outcome": outcome}


def _job(units, run_dir) -> SimpleNamespace:
    return SimpleNamespace(units=units, run_dir=run_dir, instances={}, ray=None, retry=None)


def test_the_units_phase_returns_the_units_it_ran_and_the_last_outcome_of_each(tmp_path, monkeypatch):
    units = _units()
    ready = phases.Runnable(units[:3], {})

    def fake_run_units(todo, instances, settings, endpoint, options, on_row, progress, prepared, stop, retry):
        on_row(_row(todo[0], "infrastructure_error"))  # retried: its last row counts
        on_row(_row(todo[0], "resolved"))
        on_row(_row(todo[1], "unresolved"))
        on_row(_row(todo[2], "bug"))
        return []  # every unit started

    monkeypatch.setattr("raydist.cluster.execute.run_units", fake_run_units)
    sink = RowSink(ResultStore(tmp_path))
    ran = phases.units(_job(units, tmp_path), ready, None, None, sink)
    assert ran == phases.Ran(tuple(u.key for u in units[:3]), {"resolved": 1, "unresolved": 1, "bug": 1})
    assert sink.counts == {"infrastructure_error": 1, "resolved": 1, "unresolved": 1, "bug": 1}


def test_compile_counts_the_rows_of_an_earlier_launch_besides_those_this_launch_ran(tmp_path):
    units = _units()
    store = ResultStore(tmp_path)
    store.write_row(_row(units[0], "resolved"))  # an earlier launch
    store.write_row(_row(units[1], "unresolved"))  # this one
    table = compile_tables(_job(units, tmp_path), store, phases.Ran((units[1].key,), {"unresolved": 1}))
    assert table.column("key").to_pylist() == [units[0].key, units[1].key]


def test_compile_refuses_a_unit_this_launch_ran_that_has_no_row(tmp_path):
    units = _units()
    store = ResultStore(tmp_path)
    store.write_row(_row(units[0], "resolved"))
    with pytest.raises(RuntimeError, match=f"1 units ran in this launch but have no row in .*: {units[1].key}"):
        compile_tables(_job(units, tmp_path), store, phases.Ran((units[0].key, units[1].key), {"resolved": 2}))
