"""The run tables are plain Parquet: pandas, polars and duckdb read runs.parquet, steps.parquet,
variants.parquet and completions.parquet as raydist writes them, row for row, and answer a
question on them without raydist. The tables are made by the writers a launch uses
(``ResultStore.write_row`` + ``compile``, ``variants_table``, ``completions_table``); the
launch tests (test_launch_e2e, test_problems_pipeline) call ``assert_read_alike`` on the
tables of their real runs too."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from raydist._util.files import atomic_write_parquet
from raydist.results import ResultStore

pd = pytest.importorskip("pandas")
pl = pytest.importorskip("polars")
duckdb = pytest.importorskip("duckdb")


def _plain(value):
    """A map as pyarrow gives it (a list of key/value tuples) as a dict, the way polars and
    duckdb give it; anything else as is."""
    if isinstance(value, list) and value and all(isinstance(v, tuple) and len(v) == 2 for v in value):
        return dict(value)
    return value


def rows_by_library(path: Path) -> dict[str, list[dict]]:
    """The rows of the Parquet file ``path`` as pyarrow, pandas, polars and duckdb read them,
    each as a list of ``{column: plain Python value}``."""
    relation = duckdb.sql(f"select * from read_parquet('{path}')")
    return {
        "pyarrow": [{k: _plain(v) for k, v in r.items()} for r in pq.read_table(path).to_pylist()],
        "pandas": [{k: _plain(v) for k, v in r.items()}
                   for r in pd.read_parquet(path, dtype_backend="pyarrow").to_dict("records")],
        "polars": pl.read_parquet(path).to_dicts(),
        "duckdb": [dict(zip(relation.columns, r)) for r in relation.fetchall()],
    }


def assert_read_alike(path: Path) -> list[dict]:
    """pandas, polars and duckdb read ``path`` with pyarrow's columns, in order, and values;
    returns pyarrow's rows."""
    read = rows_by_library(path)
    for library in ("pandas", "polars", "duckdb"):
        assert read[library] == read["pyarrow"], library
    return read["pyarrow"]


def _unit(key: str, level: str, resolved: bool, steps: int) -> dict:
    return {"key": key, "instance_id": f"inst-{key[0]}", "model": "m", "agent": "miniswe", "level": level, "seed": 0,
            "config_hash": "h", "resolved": resolved, "outcome": "resolved" if resolved else "unresolved",
            "steps": steps, "input_tokens": 100 * steps, "output_tokens": 10 * steps, "cost": 0.25 * steps,
            "model_patch": "diff --git a/x b/x\n" if resolved else None,
            "step_records": [{"step": i + 1, "command": f"cat f{i}", "executed": f"cat f{i}", "category": "read",
                              "returncode": 0, "seconds": 0.5, "timed_out": False, "input_tokens": 100,
                              "output_tokens": 10, "leak_count": 0} for i in range(steps)]}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A main-job run directory compiled by the result store: 4 units, 2 levels."""
    run = tmp_path_factory.mktemp("run")
    store = ResultStore(run)
    units = [_unit("a0", "L0", True, 2), _unit("b0", "L0", False, 3), _unit("a2", "L2", False, 1),
             _unit("b2", "L2", True, 2)]
    for unit in units:
        store.write_row(unit)
    store.compile([u["key"] for u in units])
    return run


def test_runs_parquet_reads_alike_and_answers_a_question_in_each_library(run_dir):
    rows = assert_read_alike(run_dir / "runs.parquet")
    assert [r["key"] for r in rows] == ["a0", "b0", "a2", "b2"]
    path = run_dir / "runs.parquet"
    # resolved rate and total cost per level: L0 1/2 and 1.25 USD, L2 1/2 and 0.75 USD
    expected = [("L0", 0.5, 1.25), ("L2", 0.5, 0.75)]
    frame = pd.read_parquet(path).groupby("level").agg(rate=("resolved", "mean"), cost=("cost", "sum"))
    assert list(frame.itertuples(name=None)) == expected
    polars = (pl.read_parquet(path).group_by("level").agg(pl.col("resolved").mean().alias("rate"),
                                                          pl.col("cost").sum()).sort("level"))
    assert polars.rows() == expected
    assert duckdb.sql(f"select level, avg(resolved::int), sum(cost) from '{path}' group by level order by level"
                      ).fetchall() == expected


def test_steps_parquet_reads_alike_and_joins_the_runs_table_in_duckdb(run_dir):
    steps = assert_read_alike(run_dir / "steps.parquet")
    assert [(s["key"], s["step"]) for s in steps] == [("a0", 1), ("a0", 2), ("b0", 1), ("b0", 2), ("b0", 3),
                                                      ("a2", 1), ("b2", 1), ("b2", 2)]
    joined = duckdb.sql(f"select r.resolved, count(*) from '{run_dir / 'steps.parquet'}' s "
                        f"join '{run_dir / 'runs.parquet'}' r using (key) group by r.resolved order by r.resolved")
    assert joined.fetchall() == [(False, 4), (True, 4)]


def test_problems_tables_read_alike_with_the_contexts_map_as_a_dict(tmp_path):
    from raydist.problems import load_seeds, variants_table
    from raydist.problems.generate import Variant
    from raydist.problems.report import completions_table

    seed = load_seeds("humaneval", ids=["HumanEval/0"])[0]
    variant = Variant(variant_id="v0", seed_id=seed.problem_id, dataset="humaneval", generation_seed=0,
                      generator_model="gen", scenario="bakery", contexts={"numbers": "loaf weights", "threshold": "t"},
                      prompt=seed.prompt, accepted=True, seed_prompt=seed.prompt, entry_point=seed.entry_point,
                      tests=seed.tests, canonical_solution=seed.canonical_solution, canonical_passed=True)
    atomic_write_parquet(tmp_path / "variants.parquet", variants_table([variant]))
    [row] = assert_read_alike(tmp_path / "variants.parquet")
    assert row["contexts"] == {"numbers": "loaf weights", "threshold": "t"} and row["tests"] == list(seed.tests)
    completions = [{"model": "m", "item_id": item, "seed_id": seed.problem_id, "variant_id": vid, "sample": s,
                    "passed": passed, "status": "passed" if passed else "failed", "seconds": 0.5,
                    "solution": "x", "error": None}
                   for item, vid, s, passed in (("HumanEval/0", None, 0, True), ("HumanEval/0", None, 1, True),
                                                ("HumanEval/0::v0", "v0", 0, False),
                                                ("HumanEval/0::v0", "v0", 1, True))]
    atomic_write_parquet(tmp_path / "completions.parquet", completions_table(completions))
    assert assert_read_alike(tmp_path / "completions.parquet") == completions
    # pass rate on the seed and on its variant
    assert duckdb.sql(f"select variant_id is null, avg(passed::int) from '{tmp_path / 'completions.parquet'}' "
                      "group by all order by 1").fetchall() == [(False, 0.5), (True, 1.0)]


def test_a_difference_between_libraries_is_caught(tmp_path, monkeypatch):
    """The comparison bites: a reader that drops a row is named."""
    from raydist.problems.report import completions_table

    rows = [{"model": "m", "item_id": "i", "seed_id": "s", "variant_id": None, "sample": n, "passed": True,
             "status": "passed", "seconds": None, "solution": None, "error": None} for n in range(2)]
    atomic_write_parquet(tmp_path / "c.parquet", completions_table(rows))
    real = pl.read_parquet
    monkeypatch.setattr(pl, "read_parquet", lambda path: real(path).head(1))
    with pytest.raises(AssertionError, match="polars"):
        assert_read_alike(tmp_path / "c.parquet")
