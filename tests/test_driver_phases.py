"""The executor's units phase says what it ran, and compile checks that against the rows it
reads back from the run directory (those of earlier launches included). A real ``Job``
planned from the shipped config (three built-in instances, L0, the null agent) runs on a real
local Ray; each unit's task body is scripted (a row per attempt), because what is tested is
the phase's bookkeeping of retries and outcomes, not the agent."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import ray
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from raydist.cluster import execute as phases
from raydist.cluster.execute import RowSink
from raydist.cluster.job import Job
from raydist.cluster.serving import ModelServers
from raydist.cluster.unit_key import RunUnit
from raydist.driver.config import check_config
from raydist.driver.plan import plan_job
from raydist.driver.report import compile_tables
from raydist.results import ResultStore

ROOT = Path(__file__).resolve().parents[1]

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray's workers cannot import tests/


def _job(tmp_path: Path) -> Job:
    """The plan of ``agent=null levels=[L0] benchmark.limit=3`` with retries after 0 s."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(ROOT / "raydist" / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[f"output_root={tmp_path / 'runs'}", f"cache_dir={tmp_path / 'cache'}",
                                           "agent=null", "benchmark.limit=3", "levels=[L0]", "seeds=[0]",
                                           "resume.max_attempts=2", "resume.backoff_s=0"])
    GlobalHydra.instance().clear()
    OmegaConf.resolve(cfg)
    return plan_job(check_config(cfg), tmp_path / "runs" / "job")


def _row(unit: RunUnit, outcome: str) -> dict:
    return {"key": unit.key, "instance_id": unit.instance_id, "model": unit.model, "agent": unit.agent,
            "level": unit.level, "seed": unit.seed, "config_hash": unit.config_hash,
            "resolved": outcome == "resolved", "outcome": outcome}


#: What each unit's task returns, attempt by attempt, by its place in the plan: the first
#: fails its first attempt on the machine (an infrastructure error, retried) and resolves on
#: the second.
SCRIPT = (("infrastructure_error", "resolved"), ("unresolved",), ("bug",))


def scripted_unit(unit, instance, settings, endpoint, prepared) -> dict:  # noqa: ARG001 - execute_unit's signature
    """The row of this attempt of ``unit``: ``script.json`` of the run directory gives each
    instance's outcomes; attempts are counted in files there, which every Ray worker of this
    machine sees."""
    run_dir = Path(settings.run_dir)
    outcomes = json.loads((run_dir / "script.json").read_text())[unit.instance_id]
    marks = run_dir / "attempts"
    marks.mkdir(parents=True, exist_ok=True)
    attempt = len(list(marks.glob(f"{unit.key}.*")))
    (marks / f"{unit.key}.{attempt}").touch()
    return _row(unit, outcomes[min(attempt, len(outcomes) - 1)])


def test_the_units_phase_returns_the_units_it_ran_and_the_last_outcome_of_each(tmp_path, ray_local):
    job = _job(tmp_path)
    units = job.units
    assert len(units) == 3 and job.retry.max_attempts == 2
    job.run_dir.mkdir(parents=True)
    (job.run_dir / "script.json").write_text(json.dumps({u.instance_id: s for u, s in zip(units, SCRIPT, strict=True)}))
    sink = RowSink(ResultStore(job.run_dir))
    with ModelServers() as servers:  # the null agent calls no model: nothing is served
        ran = phases.units(job, phases.Runnable(units, {}), job.settings, servers, sink, execute=scripted_unit)
    assert ran == phases.Ran(tuple(u.key for u in units), {"resolved": 1, "unresolved": 1, "bug": 1})
    # every attempt's row went to the run directory: the retried infrastructure error too
    assert sink.counts == {"infrastructure_error": 1, "resolved": 1, "unresolved": 1, "bug": 1}
    assert ResultStore(job.run_dir).read_row(units[0].key)["outcome"] == "resolved"
    assert sorted(p.name for p in (job.run_dir / "attempts").iterdir()) == sorted(
        [f"{units[0].key}.0", f"{units[0].key}.1", f"{units[1].key}.0", f"{units[2].key}.0"])


def test_compile_counts_the_rows_of_an_earlier_launch_besides_those_this_launch_ran(tmp_path):
    job = _job(tmp_path)
    units = job.units
    store = ResultStore(job.run_dir)
    store.write_row(_row(units[0], "resolved"))  # an earlier launch
    store.write_row(_row(units[1], "unresolved"))  # this one
    table = compile_tables(job, store, phases.Ran((units[1].key,), {"unresolved": 1}))
    assert table.column("key").to_pylist() == [units[0].key, units[1].key]


def test_compile_refuses_a_unit_this_launch_ran_that_has_no_row(tmp_path):
    job = _job(tmp_path)
    units = job.units
    store = ResultStore(job.run_dir)
    store.write_row(_row(units[0], "resolved"))
    with pytest.raises(RuntimeError, match=f"1 units ran in this launch but have no row in .*: {units[1].key}"):
        compile_tables(job, store, phases.Ran((units[0].key, units[1].key), {"resolved": 2}))
