"""Fresh instances end to end: built from three real PyPI releases with statements by the
embedded model, then run by the main job, where the oracle must resolve every one and the null
agent none (the validity gate's two halves)."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from raydist.models.completion import litellm_complete
from raydist.models.endpoint import ModelEndpoint
from raydist.tasks import load_instances
from raydist.tasks.fresh.build import BuildSettings, StatementModel, build_library
from raydist.tasks.fresh.mutations import Mutation
from raydist.tasks.fresh.statement import check_statement, load_template
from raydist.tasks.measure import docker_runner, statuses

ROOT = Path(__file__).resolve().parents[1]
LIBRARIES = ("inflection==0.5.1", "wcwidth==0.2.13", "six==1.17.0")
PER_LIBRARY = 7

pytestmark = [pytest.mark.docker, pytest.mark.ray, pytest.mark.llm, pytest.mark.slow]


def launch(out: Path, *overrides: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "raydist.launch", f"output_root={out}", *overrides]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800, check=False)


def test_fresh_instances_from_three_libraries_are_resolved_by_the_oracle_and_by_no_null_agent(tmp_path, client, llama):
    _, api_base = llama
    endpoint = ModelEndpoint(litellm_model="openai/gemma3-270m", api_base=api_base, local=True)
    model = StatementModel(litellm_complete(endpoint, timeout=60, min_tokens_per_s=1, retries=2), "gemma3-270m",
                           load_template())
    settings = BuildSettings(released_after=date(2020, 1, 1), per_library=PER_LIBRARY, seed=0, statement_attempts=2,
                             work=tmp_path / "work")
    out = tmp_path / "fresh.jsonl"
    run = docker_runner(tmp_path / "work")
    started = time.monotonic()
    reports = [build_library(spec, settings, model, out, lambda i: statuses(run, i, ""), say=lambda _: None)
               for spec in LIBRARIES]
    built_s = time.monotonic() - started

    assert [(r.release.name, r.kept) for r in reports] == [("inflection", 7), ("wcwidth", 7), ("six", 7)]
    instances = load_instances(str(out))
    assert len(instances) == 3 * PER_LIBRARY >= 20
    for inst in instances:
        mutation = Mutation(**{k: v for k, v in inst.extra["mutation"].items() if k != "key"})
        assert inst.recipe.injected_patch and inst.patch and inst.test_patch == ""
        assert inst.FAIL_TO_PASS and inst.PASS_TO_PASS and not set(inst.FAIL_TO_PASS) & set(inst.PASS_TO_PASS)
        assert inst.extra["fresh"]["release"]["sha256"] == inst.recipe.sdist.sha256
        assert inst.extra["created_at"] >= "2026"
        statement = inst.extra["statement"]
        if statement["source"] == "model":
            assert statement["model"] == "gemma3-270m" and 1 <= statement["attempt"] <= 2
            assert check_statement(inst.problem_statement, mutation, inst.recipe.injected_patch) is None
        else:
            assert (statement["source"], statement["model"], statement["attempt"]) == ("fallback_test_output", None, 0)
            assert len(statement["rejected"]) == 2
    assert any(i.extra["statement"]["source"] == "model" for i in instances)

    for agent, resolved in (("oracle", True), ("null", False)):
        res = launch(tmp_path / "runs", f"agent={agent}", "benchmark=fresh", f"benchmark.source={out}", "levels=[L0]")
        assert res.returncode == 0, res.stderr[-3000:]
        run_dir = tmp_path / "runs" / "fresh" / agent / "gemma3-270m" / "L0__s0"
        rows = pq.read_table(run_dir / "runs.parquet").to_pylist()
        assert sorted(r["instance_id"] for r in rows) == sorted(i.instance_id for i in instances)
        assert [r["instance_id"] for r in rows if r["resolved"] is not resolved] == []
    print(f"built {len(instances)} instances in {built_s:.0f} s; "
          + "; ".join(f"{r.release.name}: tried {r.tried}, rejected {r.rejected}" for r in reports))
