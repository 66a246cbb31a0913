"""An agent's empty patch is not graded (as SWE-bench's harness leaves empty predictions
out); any other patch is. Real Hydra, Ray, Docker and driver (``python -m raydist.launch``),
with a scripted OpenAI-compatible model: the first unit submits at once, the second edits a
file first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.openai_stub_server import reply, scripted_server

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.docker, pytest.mark.ray, pytest.mark.slow]

SUBMIT = "THOUGHT: done.\n\n```mswea_bash_command\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"
EDIT = "THOUGHT: note it.\n\n```mswea_bash_command\necho '# a note' >> \"$(git ls-files '*.py' | head -1)\"\n```"


def test_an_empty_patch_is_unresolved_without_a_test_run_and_an_edit_is_graded(client, tmp_path):
    script = [reply(SUBMIT, 10, 5), reply(EDIT, 10, 5), reply(SUBMIT, 10, 5)]
    with scripted_server(script) as (server, api_base):
        cmd = [sys.executable, "-m", "raydist.launch", f"output_root={tmp_path}", "model=stub",
               "+local_models.stub.litellm_model=openai/stub", f"+local_models.stub.api_base={api_base}",
               "gate=false", "levels=[L0]", "benchmark.limit=2", "cluster.max_concurrency=1"]
        res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        assert server.calls == 3
    run_dir = tmp_path / "builtin" / "miniswe" / "stub" / "L0__s0"
    empty, edited = sorted(pq.read_table(run_dir / "runs.parquet").to_pylist(), key=lambda r: r["steps"])

    assert empty["model_patch"] == ""
    assert (empty["outcome"], empty["resolved"], empty["apply_method"], empty["patch_applied"],
            empty["grading_channel"], empty["grading_seconds"], empty["fail_to_pass_passed"],
            empty["pass_to_pass_passed"], empty["tests_missing"]) == \
        ("unresolved", False, "empty", None, "none", 0.0, None, None, None)
    assert empty["fail_to_pass_total"] >= 1
    log = next((run_dir / "grading").glob(f"*{empty['key'][:8]}.grading.log")).read_text()
    assert log.startswith("model patch: empty\n\nnot graded:")

    assert edited["model_patch"].count("+# a note") == 1
    assert (edited["outcome"], edited["patch_applied"], edited["grading_channel"] in ("junit", "log")) == \
        ("unresolved", True, True)
    assert edited["grading_seconds"] > 0 and edited["pass_to_pass_passed"] == edited["pass_to_pass_total"]
    log = next((run_dir / "grading").glob(f"*{edited['key'][:8]}.grading.log")).read_text()
    assert "not graded" not in log and "passed" in log
