"""The launch's ledger covers every model call: L1/L4 view building in the main launcher and
DyCodeEval's generation in the problems launcher, each run for real (``raydist.launch``,
``raydist.launch_problems``) against a scripted model whose usage numbers are known."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from raydist.results.budget import EXIT_BUDGET_SPENT
from tests.openai_stub_server import reply, scripted_server

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.docker, pytest.mark.ray, pytest.mark.slow]

STUB = ("+local_models.stub.litellm_model=openai/stub", "+local_models.stub.api_base={api_base}")


def run(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=900, check=False)


def test_the_ledger_books_every_l1_and_l4_view_building_call(client, tmp_path):
    with scripted_server([reply("A paraphrase.", 40, 11)]) as (server, api_base):
        res = run("raydist.launch", f"output_root={tmp_path}", f"cache_dir={tmp_path / 'cache'}", "agent=null",
                  "levels=[L1,L4]", "benchmark.limit=1", "view.model=stub", "view.l1_attempts=1",
                  "view.l4_llm_attempts=1", *(s.format(api_base=api_base) for s in STUB))
        calls = server.calls
        prompts = list(server.prompts)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    spent = json.loads((tmp_path / "builtin" / "null" / "gemma3-270m" / "L1_L4__s0" / "budget.json").read_text())
    assert spent["totals"]["by_purpose"] == {"view": {"calls": calls, "input_tokens": 40 * calls,
                                                      "output_tokens": 11 * calls, "usd": 0.0}}
    assert (spent["totals"]["calls"], spent["stopped"]) == (calls, None)
    asked = {kind for p in prompts for kind, opening in (("L1", "Rewrite the software issue report"),
                                                         ("L4", "Rewrite the Python")) if opening in p}
    assert asked == {"L1", "L4"}  # the stub's paraphrase is refused before the verifier is asked


def test_a_dycodeeval_generation_books_every_call_and_a_spent_budget_starts_no_variant(client, tmp_path):
    common = (f"output_root={tmp_path}", f"cache_dir={tmp_path / 'cache'}", "benchmark=humaneval",
              "benchmark.limit=2", "generation.variants_per_seed=1", "generation.model=stub", "pipeline=generate",
              "cluster.max_concurrency=1")
    with scripted_server([reply("Nothing useful.", 25, 8)]) as (server, api_base):
        stub = [s.format(api_base=api_base) for s in STUB]
        res = run("raydist.launch_problems", *common, *stub, "budget.tokens=1")
        assert res.returncode == EXIT_BUDGET_SPENT, res.stdout[-3000:] + res.stderr[-3000:]
        run_dir = next(tmp_path.glob("problems/*/*/budget.json")).parent
        stopped = json.loads((run_dir / "budget.json").read_text())
        summary = (run_dir / "summary.md").read_text()
        first_calls = server.calls
        res = run("raydist.launch_problems", *common, *stub)
        assert res.returncode in (0, 1), res.stdout[-3000:] + res.stderr[-3000:]
        second_calls = server.calls - first_calls
        full = json.loads((run_dir / "budget.json").read_text())

    # Only the scenario proposer (it runs before any variant is scheduled) asked; no variant started.
    assert first_calls >= 1
    assert stopped["totals"]["by_purpose"] == {"generation": {"calls": first_calls, "input_tokens": 25 * first_calls,
                                                              "output_tokens": 8 * first_calls, "usd": 0.0}}
    assert stopped["stopped"] == f"budget.tokens=1 spent ({33 * first_calls} tokens)"
    assert [u["name"] for u in stopped["not_started"]] == ["variant of HumanEval/0, generation seed 0",
                                                           "variant of HumanEval/1, generation seed 0"]
    assert summary.startswith(f"Stopped by the budget (budget.tokens=1 spent ({33 * first_calls} tokens)): "
                              "2 not started: budget spent.")
    assert second_calls >= 2  # each variant asked at least once (the proposer answers from the request cache)
    assert full["totals"]["by_purpose"] == {"generation": {"calls": second_calls, "input_tokens": 25 * second_calls,
                                                           "output_tokens": 8 * second_calls, "usd": 0.0}}
    assert (full["stopped"], full["not_started"]) == (None, [])
