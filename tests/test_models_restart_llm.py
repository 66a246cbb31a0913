"""A real launch whose llama.cpp server is SIGKILLed twice: the supervisor restarts it, the
agents' model calls follow it, and no unit ends because the model was unreachable.

`python -m raydist.launch` runs in a subprocess with the production `local_models` entry of
the embedded Gemma 270M model; the test finds that launch's own llama.cpp server among its
descendant processes (other launches on the machine have theirs) and kills it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.docker, pytest.mark.ray, pytest.mark.llm, pytest.mark.slow]


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _llama_server(root: int) -> tuple[int, int] | None:
    """(pid, port) of the healthy llama.cpp server below process `root`, or None."""
    for pid in _descendants(root):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            continue
        if argv[0].endswith("llama-server") and "--port" in argv and state != "Z":
            port = int(argv[argv.index("--port") + 1])
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as response:
                    if response.status == 200:
                        return pid, port
            except OSError:
                pass
    return None


def _wait(what: str, check, launch: subprocess.Popen, log: Path, seconds: float):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        if launch.poll() is not None:
            pytest.fail(f"the launch ended (exit {launch.returncode}) before {what}:\n{log.read_text()[-3000:]}")
        time.sleep(0.5)
    pytest.fail(f"no {what} within {seconds} s:\n{log.read_text()[-3000:]}")


def test_a_launch_whose_model_server_is_killed_twice_finishes_every_unit(tmp_path):
    out = tmp_path / "runs"
    run_dir = out / "builtin" / "miniswe" / "gemma3-270m" / "L0__s0"
    log = tmp_path / "launch.log"
    # One unit at a time and short answers, so the kills land while work is left on a shared
    # 2-core machine where Gemma may write ~1 token/s; a generous request timeout, so slowness
    # alone never makes a call unreachable (the test is about kills).
    cmd = [sys.executable, "-m", "raydist.launch", f"output_root={out}", "benchmark.limit=2", "levels=[L0]",
           "agents.miniswe.step_limit=3", "agents.miniswe.max_tokens=64", "+agents.miniswe.request_timeout_s=900",
           "cluster.max_concurrency=1", "gate=false"]
    with open(log, "w") as sink:
        launch = subprocess.Popen(cmd, cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT)
    try:
        started = time.monotonic()
        first, port = _wait("llama.cpp server", lambda: _llama_server(launch.pid), launch, log, 900)
        # Kill 1: once the first unit has its row (its trajectory arrives with it), so the
        # second unit's calls are in flight or due.
        _wait("first unit", lambda: list((run_dir / "rows").glob("*.parquet")), launch, log, 900)
        os.kill(first, signal.SIGKILL)
        killed_first = time.monotonic()
        second, second_port = _wait("restarted server",
                                    lambda: (s := _llama_server(launch.pid)) and s[0] != first and s,
                                    launch, log, 300)
        restarted_after = time.monotonic() - killed_first
        # Kill 2, at another moment: right after the restart, while the agents' retried calls run.
        time.sleep(3)
        assert launch.poll() is None, "the run ended before the second kill: give it more work"
        os.kill(second, signal.SIGKILL)
        third, third_port = _wait("second restart",
                                  lambda: (s := _llama_server(launch.pid)) and s[0] not in (first, second) and s,
                                  launch, log, 300)
        launch.wait(timeout=1800)
    finally:
        if launch.poll() is None:
            launch.send_signal(signal.SIGINT)
            launch.wait(timeout=120)
    text = log.read_text()
    print(f"\nrestart after kill 1: {restarted_after:.1f} s; ports {port} -> {second_port} -> {third_port}; "
          f"launch {time.monotonic() - started:.0f} s")
    assert launch.returncode == 0, text[-3000:]
    rows = pq.read_table(run_dir / "runs.parquet").to_pylist()
    assert len(rows) == 2 and len({r["instance_id"] for r in rows}) == 2  # every planned unit has a row
    for row in rows:
        assert row["error"] in (None, ""), (row["instance_id"], row["error"])
        assert row["exit_status"] in {"Submitted", "LimitsExceeded", "TimeExceeded", "FormatError",
                                      "RepeatedFormatError"}, row
        assert row["outcome"] in ("resolved", "unresolved"), row
        assert row["error_cause"] is None and row["attempts"] == 1, row
        assert 1 <= row["steps"] <= 3
    assert not re.search(r"ModelUnreachable|model_unreachable|did not answer after", text), text[-3000:]
