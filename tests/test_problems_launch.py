"""``python -m raydist.launch_problems`` refuses a bad setting of the groups it shares with the
main launcher (``cluster``, ``sandbox``) with exit status 2 and one line naming the key,
before Docker or Ray: the process never imports Ray."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Runs the launcher as ``python -m`` does, then says on stderr whether Ray was ever imported.
RUN = """import runpy, sys
sys.argv[0] = "raydist.launch_problems"
try:
    runpy.run_module("raydist.launch_problems", run_name="__main__", alter_sys=True)
finally:
    print("ray imported:", "ray" in sys.modules, file=sys.stderr)
"""


def _launch(tmp_path: Path, *overrides: str) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    res = subprocess.run([sys.executable, "-c", RUN, f"output_root={tmp_path}", f"cache_dir={tmp_path / 'cache'}",
                          f"sandbox.docker_host=unix://{tmp_path}/no-daemon.sock", *overrides],
                         cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    return res, time.monotonic() - started


def test_a_dashboard_address_exits_2_naming_cluster_address_and_starts_no_ray(tmp_path):
    res, elapsed = _launch(tmp_path, "cluster.address=http://127.0.0.1:8265")
    assert res.returncode == 2, res.stderr[-3000:]
    error, last = res.stderr.strip().splitlines()[-2:]
    assert error.startswith("raydist: error: cluster.address=http://127.0.0.1:8265: that is the Ray dashboard")
    assert "ray job submit --address http://127.0.0.1:8265" in error
    assert last == "ray imported: False"
    assert elapsed < 60  # the package imports litellm: seconds on an idle machine, more under load


def test_a_memory_limit_that_is_no_docker_size_exits_2_naming_the_key(tmp_path):
    res, _ = _launch(tmp_path, "sandbox.limits.memory=lots")
    assert res.returncode == 2, res.stderr[-3000:]
    assert res.stderr.strip().splitlines()[-2:] == [
        "raydist: error: sandbox.limits: sandbox limit memory='lots' is not a positive Docker size such as '512m' "
        "or '2g'; fix sandbox.limits", "ray imported: False"]


def test_a_benchmark_that_does_not_exist_exits_2_naming_the_options_before_any_job_starts(tmp_path):
    res = subprocess.run([sys.executable, "-c", RUN, "--multirun", f"output_root={tmp_path}",
                          f"cache_dir={tmp_path / 'cache'}", "benchmark=humaneval,nosuch"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 2, res.stderr[-3000:]
    error, last = res.stderr.strip().splitlines()[-2:]
    assert error.startswith("raydist: error: In 'problems': Could not find 'benchmark/nosuch'; Available options in "
                            "'benchmark': builtin, file, fresh, humaneval, mbpp, realfix, swe_qa, swebench, "
                            "swebench_offline (job ")
    assert error.endswith(" benchmark=nosuch)")
    assert last == "ray imported: False"
    assert not (tmp_path / "problems").exists()  # the valid first job did not start either
