"""The recall probe end to end: ``python -m raydist.launch_recall`` on shared SWE-bench Lite rows with
the embedded Gemma 3 270M (its real llama.cpp server, grammar-constrained), writing a leakage
level per instance, the transcripts and the records a second run resumes from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from raydist.recall import LEVELS, NO_ANSWER

LITE = Path(__file__).resolve().parents[2] / "shared" / "data" / "swebench" / "swebench_lite.jsonl"
# Three of Lite's shortest problem statements (230-262 characters): the probe stays ~1-2 minutes on 2 cores.
IDS = ["pallets__flask-4045", "pytest-dev__pytest-5221", "django__django-14999"]
ROUNDS = ("[{name: statement, reveals: [problem_statement]},"
          " {name: failing_tests, reveals: [problem_statement, repo, version, FAIL_TO_PASS]}]")


def _probe(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "raydist.launch_recall", f"output_root={tmp_path / 'runs'}",
               f"cache_dir={tmp_path / 'cache'}", f"benchmark.path={LITE}", *overrides]
    return subprocess.run(command, capture_output=True, text=True, timeout=900, env=os.environ.copy(),
                          check=False)


def test_a_round_that_reveals_the_patch_is_refused_naming_it(tmp_path):
    done = _probe(tmp_path, "rounds=[{name: a, reveals: [problem_statement, patch]}]")
    assert done.returncode == 2
    assert "rounds[0].reveals: 'patch' cannot be revealed" in done.stderr


@pytest.mark.llm
@pytest.mark.ray
@pytest.mark.shared_data
@pytest.mark.skipif(not LITE.is_file(), reason=f"{LITE} (shared reference data) is absent")
def test_the_probe_writes_a_leakage_level_per_instance_and_its_transcripts(tmp_path, llama):
    _, api_base = llama
    model = ["model=gemma-under-test", "+local_models.gemma-under-test.litellm_model=openai/gemma3-270m",
             f"+local_models.gemma-under-test.api_base={api_base}",
             "+local_models.gemma-under-test.grammar_server=llama_cpp",
             f"benchmark.ids=[{','.join(IDS)}]", f"rounds={ROUNDS}", "max_tokens=120", "answer.max_items=2",
             "answer.max_name_chars=40", "answer.max_text_chars=60", "answer.max_patch_chars=80"]
    done = _probe(tmp_path, *model)
    assert done.returncode == 0, done.stderr[-2000:]
    run_dir = tmp_path / "runs" / "recall" / "swebench" / "gemma-under-test"
    rows = pq.read_table(run_dir / "recall.parquet").to_pylist()
    levels = {r["instance_id"]: r["instance_level"] for r in rows}
    assert sorted(levels) == sorted(IDS)
    assert set(levels.values()) <= {*LEVELS, NO_ANSWER}
    for row in rows:  # a round's level is its own; the instance's is the highest of its rounds
        assert row["level"] in {*LEVELS, NO_ANSWER}
        assert row["answered"] == (row["level"] != NO_ANSWER)
    by_round = {(r["instance_id"], r["round"]): r for r in rows}
    assert by_round[(IDS[0], "statement")]["revealed"] == ["problem_statement"]
    if (IDS[0], "failing_tests") in by_round:
        assert by_round[(IDS[0], "failing_tests")]["revealed"] == ["problem_statement", "repo", "version",
                                                                   "FAIL_TO_PASS"]

    transcripts = [json.loads(line) for line in (run_dir / "transcripts.jsonl").read_text().splitlines()]
    assert [(t["instance_id"], t["round"]) for t in transcripts] == [(r["instance_id"], r["round"]) for r in rows]
    assert all(t["ok"] and t["grammar"] and t["messages"][-1]["role"] == "user" for t in transcripts)
    assert all(isinstance(t["reply"], str) for t in transcripts)
    assert sum(1 for _ in (run_dir / "records").rglob("*.json")) == len(rows)

    summary = json.loads((run_dir / "summary.json").read_text())["models"][0]
    assert summary["model"] == "gemma-under-test" and summary["instances"] == len(IDS)
    assert sum(summary["counts"].values()) + summary["no_answer"] == len(IDS)

    again = _probe(tmp_path, *model)  # everything answered is read back: no request is made again
    assert again.returncode == 0, again.stderr[-2000:]
    assert len((run_dir / "transcripts.jsonl").read_text().splitlines()) == len(transcripts)
    assert pq.read_table(run_dir / "recall.parquet").to_pylist() == rows
