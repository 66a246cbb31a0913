"""One row writer: every way a unit ends goes through ``RowSink``, and a row with a key the
schema lacks, or an outcome outside the taxonomy, is refused rather than written short."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from raydist.cluster.execute import RowSink
from raydist.cluster.failures import Failure, error_row, task_failure
from raydist.cluster.unit_key import RunUnit
from raydist.results import ResultStore
from raydist.results.schema import RUNS_SCHEMA, STEPS_SCHEMA, normalise_row, table_from_rows

UNIT = RunUnit("pkg-1", "h", "-", "oracle", "L0", 0, "c")


def test_a_row_with_a_key_the_schema_lacks_is_refused_naming_the_key_and_the_columns(tmp_path):
    row = {**error_row(UNIT, task_failure("x")), "gold_apply_methd": "git"}
    with pytest.raises(KeyError) as caught:
        normalise_row(row)
    message = caught.value.args[0]
    assert message == ("result row has key 'gold_apply_methd', which is no column of runs.parquet; the columns are "
                       + ", ".join(RUNS_SCHEMA.names))
    store = ResultStore(tmp_path)
    with pytest.raises(KeyError, match="gold_apply_methd"):
        RowSink(store).write(row)
    assert store.read_row(UNIT.key) is None


def test_the_keys_a_unit_row_carries_for_the_store_and_the_scheduler_are_not_columns_and_pass():
    row = {**error_row(UNIT, task_failure("x")), "retry_after": 3.0, "step_records": []}
    assert "retry_after" not in normalise_row(row) and "step_records" not in normalise_row(row)


def test_a_row_whose_outcome_is_outside_the_taxonomy_is_refused(tmp_path):
    row = {**error_row(UNIT, task_failure("x")), "outcome": "crashed"}
    with pytest.raises(ValueError, match="has outcome 'crashed'; one of resolved, unresolved, answered, input_error"):
        RowSink(ResultStore(tmp_path)).write(row)


def test_a_failure_outside_the_error_outcomes_is_refused():
    with pytest.raises(ValueError, match="Failure.outcome='resolved'"):
        Failure("resolved", "x", "y")


def test_the_sink_writes_an_error_row_once_and_counts_it(tmp_path):
    store = ResultStore(tmp_path)
    sink = RowSink(store)
    sink.fail(UNIT, Failure("input_error", "no_recipe", "instance 'pkg-1' has no build recipe"))
    row = store.read_row(UNIT.key)
    assert (row["outcome"], row["error_cause"], row["error"], row["attempts"], row["resolved"]) == (
        "input_error", "no_recipe", "instance 'pkg-1' has no build recipe", 1, False)
    assert sink.counts == {"input_error": 1}
    assert [p.name for p in store.rows_dir.iterdir()] == [f"{UNIT.key}.parquet"]


STEP = {"step": 1, "command": "ls", "executed": "ls", "category": "navigate", "returncode": 0, "seconds": 0.25,
        "timed_out": False, "input_tokens": 120, "output_tokens": 7, "leak_count": 1, "leaked_names": '["Foo"]',
        "memorised_count": 0, "memorised_names": "[]"}


def _unit_row(**extra) -> dict:
    return {**error_row(UNIT, task_failure("x")), "outcome": "unresolved", "error": None, "error_cause": None} | extra


def test_a_step_record_with_a_key_steps_parquet_lacks_is_refused_naming_it_and_nothing_is_written(tmp_path):
    store = ResultStore(tmp_path)
    with pytest.raises(ValueError) as caught:
        RowSink(store).write(_unit_row(step_records=[STEP | {"stdout_chars": 812}]))
    assert str(caught.value) == ("steps.parquet row 0 has key(s) 'stdout_chars', which are no columns of "
                                 "steps.parquet; the columns are " + ", ".join(STEPS_SCHEMA.names))
    assert store.read_row(UNIT.key) is None and list(store.steps_dir.iterdir()) == []


def test_a_step_record_that_carries_a_unit_field_is_refused_rather_than_overwritten(tmp_path):
    store = ResultStore(tmp_path)
    with pytest.raises(ValueError, match=r"step record 1 has key\(s\) 'level', which the unit's row gives"):
        store.write_row(_unit_row(step_records=[STEP | {"level": "L2"}]))
    assert store.read_row(UNIT.key) is None


def test_a_row_lacking_a_required_column_is_refused_naming_the_table_and_the_column():
    row = {name: value for name, value in ({"key": "k"} | STEP).items() if name != "command"}
    with pytest.raises(ValueError) as caught:
        table_from_rows([row], STEPS_SCHEMA, "steps.parquet")
    assert str(caught.value) == ("steps.parquet row 0 lacks required column(s) 'instance_id', 'model', 'agent', "
                                 "'level', 'seed', 'command'")


def test_step_records_of_known_keys_round_trip_with_exact_values_and_absent_optional_columns_null(tmp_path):
    store = ResultStore(tmp_path)
    short = {name: STEP[name] for name in ("step", "command", "executed", "category")} | {"step": 2}
    store.write_row(_unit_row(steps=2, step_records=[STEP, short]))
    unit = {"key": UNIT.key, "instance_id": "pkg-1", "model": "-", "agent": "oracle", "level": "L0", "seed": 0,
            "attempt": 0}
    absent = {name: None for name in STEPS_SCHEMA.names if name not in unit and name not in short}
    assert store.read_steps(UNIT.key) == [unit | STEP, unit | short | absent]
    store.compile([UNIT.key])
    assert pq.read_table(tmp_path / "steps.parquet").to_pylist() == [unit | STEP, unit | short | absent]
    assert pq.read_table(tmp_path / "runs.parquet").column("steps").to_pylist() == [2]
