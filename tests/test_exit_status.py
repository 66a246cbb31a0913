"""The launchers' exit status: 2 for a setting or input that is wrong, 1 (one line, no
traceback) when the machine or a service fails the launch (``infrastructure_error``)."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from raydist.cluster.execute import _server_failure
from raydist.driver.config import check_config
from raydist.driver.drive import _disk_failure
from raydist.driver.plan import JobError, plan_job
from raydist.models.process import ModelServerError
from raydist.outcomes import InfrastructureError

ROOT = Path(__file__).resolve().parents[1]
DEAD = "unix:///nonexistent.sock"


def _run(module: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "DOCKER_HOST": DEAD, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_unreachable_docker_exits_1_with_one_line_naming_it_and_no_traceback(tmp_path):
    res = _run("raydist.launch", f"output_root={tmp_path}", f"cache_dir={tmp_path / 'cache'}", "agent=null",
               "benchmark.limit=1", "levels=[L0]")
    assert res.returncode == 1, res.stderr[-3000:]
    assert "Traceback" not in res.stderr
    [line] = [line for line in res.stderr.splitlines() if line.startswith("raydist:")]
    assert line.startswith(f"raydist: error: cannot reach the Docker daemon at {DEAD} (")
    assert line.endswith("start it with `bash launch/setup.sh`, or set sandbox.docker_host")


def test_a_bad_setting_exits_2_before_docker_is_touched(tmp_path):
    res = _run("raydist.launch", f"output_root={tmp_path}", f"cache_dir={tmp_path / 'cache'}", "agent=null",
               "levels=[L9]")
    assert res.returncode == 2, res.stderr[-3000:]
    assert res.stderr.startswith("raydist: error: levels: unknown level 'L9' in 'L9'; implemented levels are ")
    assert "Docker" not in res.stderr


def test_the_problems_launcher_exits_1_when_docker_is_unreachable(tmp_path):
    res = _run("raydist.launch_problems", f"output_root={tmp_path}", f"cache_dir={tmp_path / 'cache'}",
               "benchmark.ids=[HumanEval/0]", "+local_models.scripted.litellm_model=openai/scripted",
               "+local_models.scripted.api_base=http://127.0.0.1:9/v1", "generation.model=scripted",
               "evaluation.models=[]")
    assert res.returncode == 1, res.stderr[-3000:]
    assert "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines()[-1].startswith(f"raydist: error: cannot reach the Docker daemon at {DEAD}")


def test_a_full_disk_is_an_infrastructure_error_that_says_to_free_space():
    failure = _disk_failure(OSError(errno.ENOSPC, "No space left on device"))
    assert (failure.outcome, failure.cause) == ("infrastructure_error", "disk_full")
    assert str(failure) == ("[Errno 28] No space left on device; free space or choose another output_root "
                            "(finished rows are kept)")


def test_a_model_server_that_did_not_start_is_one_line_naming_its_log():
    exc = ModelServerError("model server ['python', '-m', 'llama_cpp.server']... on 127.0.0.1:8080 exited with code 1 "
                           "during startup; log /tmp/server.log, last lines:\n"
                           "Traceback (most recent call last):\n  ...")
    failure = _server_failure(exc)
    assert isinstance(failure, InfrastructureError) and failure.cause == "model_server"
    assert str(failure) == ("the model server did not start: model server ['python', '-m', 'llama_cpp.server']... on "
                            "127.0.0.1:8080 exited with code 1 during startup; log /tmp/server.log; read its log, "
                            "then check the local_models entry's command (llama.cpp needs pip install "
                            "'raydist[local]')")


def test_a_bad_model_supervisor_setting_is_a_setting_error_named_in_the_plan(tmp_path):
    from hydra import compose, initialize_config_dir

    import raydist.launch  # noqa: F401 - registers the schema and the resolvers

    with initialize_config_dir(config_dir=str(ROOT / "raydist" / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[f"output_root={tmp_path}", f"cache_dir={tmp_path / 'cache'}",
                                           "+local_models.gemma3-270m.supervisor={restarts: 1}"])
    with pytest.raises(JobError, match=r"^local_models\.gemma3-270m\.supervisor=\{'restarts': 1\}: "):
        plan_job(check_config(cfg), tmp_path / "run")
