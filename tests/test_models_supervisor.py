"""The model-server supervisor: a killed, hung or unstartable server, with a real server
process (tests/openai_stub_server.py, an OpenAI-compatible stub that starts in a fraction of
a second) so each restart takes moments. The same code runs llama.cpp in a launch
(tests/test_models_restart_llm.py)."""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from raydist.models.process import ModelServerError, ServerProcess, port_is_free
from raydist.models.supervisor import FAILED, READY, Supervisor, SupervisorPolicy

STUB = [sys.executable, str(Path(__file__).with_name("openai_stub_server.py")), "{host}", "{port}"]
FAST = SupervisorPolicy(check_interval_s=0.2, health_timeout_s=0.5, hang_checks=2, start_attempts=3,
                        backoff_s=0.1, max_restarts=5)


def _port(api_base: str) -> int:
    return int(api_base.rsplit(":", 1)[1].split("/")[0])


def _answers(api_base: str) -> bool:
    with urllib.request.urlopen(f"{api_base}/models", timeout=5) as response:
        return response.status == 200


def _wait_for(supervisor: Supervisor, restarts: int, state: str, seconds: float) -> float:
    """Seconds until `supervisor` reports `restarts` and `state`; fails the test after `seconds`."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        status = supervisor.status()
        if status["restarts"] == restarts and status["state"] == state:
            return time.monotonic() - started
        time.sleep(0.05)
    pytest.fail(f"supervisor not {state} after {restarts} restart(s) within {seconds} s: {supervisor.status()}")


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"


@pytest.fixture
def supervised(tmp_path):
    supervisors = []

    def make(command=STUB, policy=FAST, **kwargs):
        supervisor = Supervisor(ServerProcess(command, startup_timeout=20, log_path=tmp_path / "server.log",
                                              **kwargs), policy)
        supervisors.append(supervisor)
        return supervisor

    yield make
    for supervisor in supervisors:
        supervisor.stop(grace=2)


def test_a_killed_server_is_restarted_on_its_own_port(supervised):
    supervisor = supervised()
    api_base = supervisor.start()
    first = supervisor.process.pid
    os.kill(first, signal.SIGKILL)
    _wait_for(supervisor, 1, READY, 10)
    assert supervisor.api_base() == api_base and _answers(api_base)
    assert supervisor.process.pid != first and _gone(first)
    assert f"on port {_port(api_base)} exited with code -9; restarting (1/5)" in supervisor.status()["events"]


def test_a_killed_server_whose_port_was_taken_moves_to_a_free_port(supervised):
    supervisor = supervised(policy=SupervisorPolicy(check_interval_s=2, health_timeout_s=0.5, hang_checks=2,
                                                    backoff_s=0.1))
    api_base = supervisor.start()
    old_port = _port(api_base)
    os.kill(supervisor.process.pid, signal.SIGKILL)
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do: FIN_WAIT traces are no obstacle
    deadline = time.monotonic() + 2
    while True:  # the port frees once the kernel has closed the dead server's socket
        try:
            squatter.bind(("127.0.0.1", old_port))
            break
        except OSError:
            assert time.monotonic() < deadline, "the dead server's port never became free"
            time.sleep(0.005)
    squatter.listen()
    try:
        _wait_for(supervisor, 1, READY, 10)
        new_base = supervisor.api_base()
        assert _port(new_base) != old_port and _answers(new_base)
        assert new_base == f"http://127.0.0.1:{_port(new_base)}/v1"
        assert not port_is_free(old_port)  # still ours: the server did not steal it back
        assert f"port {old_port} is taken or failed: moving to port {_port(new_base)}" in supervisor.process.log_tail()
    finally:
        squatter.close()


def test_a_hung_server_is_detected_within_the_bound_and_restarted(supervised):
    supervisor = supervised()
    api_base = supervisor.start()
    stopped = supervisor.process.pid
    os.kill(stopped, signal.SIGSTOP)  # alive to poll(), silent to HTTP: a hang
    # Bound: hang_checks x (health_timeout + check_interval) = 1.4 s to notice, plus a restart.
    seconds = _wait_for(supervisor, 1, READY, 10)
    assert seconds < 5, seconds
    assert _answers(supervisor.api_base()) and supervisor.api_base() == api_base
    assert _gone(stopped)  # SIGKILLed although stopped (SIGTERM would wait for SIGCONT)
    assert any("did not answer /v1/models within 0.5 s 2 times in a row (hung)" in e
               for e in supervisor.status()["events"])


def test_a_server_that_cannot_start_fails_after_the_bounded_attempts(supervised):
    supervisor = supervised(command=["bash", "-c", "echo cannot load model {port}; exit 2"])
    started = time.monotonic()
    with pytest.raises(ModelServerError, match=r"(?s)could not be started in 3 attempt\(s\).*"
                                               r"exited with code 2 during startup.*cannot load model"):
        supervisor.start()
    assert time.monotonic() - started < 10
    assert supervisor.status()["state"] == FAILED
    assert supervisor.process.log_tail().count("--- raydist: starting") == 3
    with pytest.raises(ModelServerError, match="could not be started in 3 attempt"):
        supervisor.api_base(wait_s=30)  # at once: a failed server is not waited for


def test_a_server_that_dies_and_cannot_come_back_fails_clearly(supervised, tmp_path):
    flag = tmp_path / "started-once"
    command = ["bash", "-c", f"if [ -e {flag} ]; then echo model file is gone; exit 3; fi; touch {flag}; "
                             f"exec {' '.join(STUB)}"]
    supervisor = supervised(command=command)
    supervisor.start()
    os.kill(supervisor.process.pid, signal.SIGKILL)
    _wait_for(supervisor, 1, FAILED, 10)
    with pytest.raises(ModelServerError, match=r"(?s)could not be started in 3 attempt.*model file is gone"):
        supervisor.api_base(wait_s=30)


def test_a_server_dying_more_often_than_max_restarts_is_given_up(supervised):
    supervisor = supervised(policy=SupervisorPolicy(check_interval_s=0.2, health_timeout_s=0.5, max_restarts=1))
    supervisor.start()
    os.kill(supervisor.process.pid, signal.SIGKILL)
    _wait_for(supervisor, 1, READY, 10)
    os.kill(supervisor.process.pid, signal.SIGKILL)
    _wait_for(supervisor, 1, FAILED, 10)
    with pytest.raises(ModelServerError, match=r"exited with code -9 after 1 restart\(s\), the most max_restarts=1"):
        supervisor.api_base()


def test_stop_ends_the_server_and_later_calls_are_told_so(supervised):
    supervisor = supervised()
    supervisor.start()
    pid = supervisor.process.pid
    supervisor.stop(grace=2)
    assert _gone(pid)
    with pytest.raises(ModelServerError, match="is stopped: its launch ended"):
        supervisor.api_base(wait_s=5)


def test_policy_values_out_of_range_are_refused():
    with pytest.raises(ValueError, match="hang_checks must be >= 1"):
        SupervisorPolicy(hang_checks=0)
    with pytest.raises(ValueError, match="check_interval_s must be > 0"):
        SupervisorPolicy(check_interval_s=0)


def test_the_liveness_path_is_the_health_path_unless_an_entry_names_one(gemma_entry):
    from raydist.cluster.serving import server_arguments, server_command

    process = ServerProcess(server_command(gemma_entry), **{
        key: value for key, value in server_arguments("gemma3-270m", gemma_entry).items()
        if key in ("host", "health_path", "liveness_path")})
    assert (process.health_path, process.liveness_path) == ("/health", "/health")
    assert ServerProcess(["vllm", "serve", "m"], liveness_path="/ping").liveness_path == "/ping"


def test_a_client_reporting_failure_gets_the_server_checked_at_once(supervised):
    supervisor = supervised(policy=SupervisorPolicy(check_interval_s=60, health_timeout_s=0.5, backoff_s=0.1))
    api_base = supervisor.start()
    first = supervisor.process.pid
    os.kill(first, signal.SIGKILL)
    while not _gone(first):  # dead, as it is by the time a client's retries ran out
        time.sleep(0.01)
    assert supervisor.api_base(wait_s=10) == api_base and supervisor.restarts == 0  # not checked yet
    started = time.monotonic()
    assert supervisor.api_base(wait_s=10, recheck=True) == api_base
    assert time.monotonic() - started < 5 and supervisor.restarts == 1
    assert supervisor.process.pid not in (None, first) and _answers(api_base)


def test_a_server_bound_to_a_node_address_is_advertised_and_checked_there(supervised):
    supervisor = supervised(host="127.0.0.2")
    api_base = supervisor.start()
    assert api_base == f"http://127.0.0.2:{_port(api_base)}/v1" and _answers(api_base)
    assert supervisor.process.probe_host == "127.0.0.2" and supervisor.process.alive()


def test_a_server_bound_to_all_interfaces_is_checked_through_loopback_and_restarted(supervised):
    supervisor = supervised(host="0.0.0.0", advertise_host="127.0.0.3")
    api_base = supervisor.start()
    assert api_base == f"http://127.0.0.3:{_port(api_base)}/v1" and _answers(api_base)
    assert supervisor.process.probe_host == "127.0.0.1" and supervisor.process.alive()
    os.kill(supervisor.process.pid, signal.SIGKILL)
    _wait_for(supervisor, 1, READY, 10)
    assert supervisor.api_base() == api_base and _answers(api_base)
