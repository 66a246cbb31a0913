"""One row writer: every way a unit ends goes through ``RowSink``, and a row with a key the
schema lacks, or an outcome outside the taxonomy, is refused rather than written short."""

from __future__ import annotations

import pytest

from raydist.cluster.plan import RunUnit
from raydist.results import ResultStore
from raydist.results.schema import RUNS_SCHEMA, normalise_row
from raydist.results.sink import Failure, RowSink, error_row, task_failure

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
    with pytest.raises(ValueError, match="has outcome 'crashed'; one of resolved, unresolved, input_error"):
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
