"""A launch's budget end to end: real Hydra, Ray, Docker and driver (``python -m
raydist.launch``), with a scripted OpenAI-compatible model whose usage numbers fix what each
unit spends, so the unit after which the budget stops the launch is known exactly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from raydist.results.budget import EXIT_BUDGET_SPENT
from tests.openai_stub_server import refuse, reply, scripted_server

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.docker, pytest.mark.ray, pytest.mark.slow]

SUBMIT = "THOUGHT: done.\n\n```mswea_bash_command\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"
PER_UNIT = 70 + 30  # one call per unit: the agent submits at once


def launch(out: Path, api_base: str, *overrides: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "raydist.launch", f"output_root={out}", "model=stub",
           "+local_models.stub.litellm_model=openai/stub", f"+local_models.stub.api_base={api_base}",
           "gate=false", "levels=[L0]", "benchmark.limit=3", "cluster.max_concurrency=1", *overrides]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)


def test_a_budget_stops_the_launch_after_the_unit_that_spends_it_and_the_next_launch_runs_the_rest(client,
                                                                                                 tmp_path):
    # The first request is rate limited for 2 s: the call waits it out, the unit is not retried.
    script = [refuse(429, retry_after=2), reply(SUBMIT, 70, 30)]
    run_dir = tmp_path / "builtin" / "miniswe" / "stub" / "L0__s0"
    with scripted_server(script) as (server, api_base):
        budget = PER_UNIT + 50  # spent by the 2nd unit: 200 >= 150, so unit 3 never starts
        res = launch(tmp_path, api_base, f"budget.tokens={budget}")
        assert res.returncode == EXIT_BUDGET_SPENT, res.stdout[-3000:] + res.stderr[-3000:]
        first = pq.read_table(run_dir / "runs.parquet").to_pylist()
        record = json.loads((run_dir / "budget.json").read_text())
        summary = (run_dir / "summary.md").read_text()
        assert server.log[1][0] - server.log[0][0] >= 2.0
        assert [status for _, status, _ in server.log] == [429, 200, 200]

        res = launch(tmp_path, api_base, "budget.tokens=1000")
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        second = pq.read_table(run_dir / "runs.parquet").to_pylist()
        assert server.calls == 3 + 1

    assert len(first) == 2 and {r["outcome"] for r in first} == {"unresolved"}
    assert [r["attempts"] for r in first] == [1, 1]
    assert [(r["input_tokens"], r["output_tokens"]) for r in first] == [(70, 30)] * 2
    assert record["stopped"] == "budget.tokens=150 spent (200 tokens)"
    assert (record["totals"]["calls"], record["totals"]["tokens"]) == (2, 200)
    left = [u["name"].split()[0] for u in record["not_started"]]
    assert len(left) == 1 and not set(left) & {r["instance_id"] for r in first}
    assert "2 of 3 units ran" in summary
    assert "Stopped by the budget (budget.tokens=150 spent (200 tokens)): 1 not started: budget spent." \
        in summary
    assert all(f"- {i} L0 seed 0" in summary for i in left)

    assert len(second) == 3 and {r["instance_id"] for r in second} - {r["instance_id"] for r in first} == set(left)
    assert {r["key"]: r["finished_at"] for r in second if r["instance_id"] not in left} == \
        {r["key"]: r["finished_at"] for r in first}  # the first three were not run again
    after = json.loads((run_dir / "budget.json").read_text())
    assert (after["stopped"], after["not_started"], after["totals"]["tokens"]) == (None, [], 100)

    report = subprocess.run([sys.executable, "-m", "raydist.cli", "report", str(run_dir)], cwd=ROOT,
                            capture_output=True, text=True, timeout=120, check=False)
    assert "1 model calls: 70 input + 30 output tokens, 0.0000 USD (budget.tokens=1000)." in report.stdout
