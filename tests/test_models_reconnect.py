"""Model calls follow a supervised server across restarts (`serve_model` -> named ModelServer
actor -> `ModelEndpoint.server_name` -> `EndpointModel`), and a server that stays unreachable
ends the call as `ModelUnreachable` (the exit status the outcome taxonomy counts as an
infrastructure error, cause model_unreachable), never as the model's own failure. The server is the
OpenAI-compatible stub process of tests/openai_stub_server.py."""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from pathlib import Path

import pytest
import ray

from raydist.agents import AgentSettings
from raydist.agents.loop import build_model
from raydist.agents.settings import load_prompts
from raydist.cluster.serving import serve_model
from raydist.models import ModelEndpoint, ModelUnreachable
from raydist.models.process import free_port

# Ray workers cannot import this test module: ship its functions by value.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

STUB = ["{python}", str(Path(__file__).with_name("openai_stub_server.py")), "{host}", "{port}"]
FAST = {"check_interval_s": 0.2, "health_timeout_s": 0.5, "hang_checks": 2, "start_attempts": 2,
        "backoff_s": 0.1, "max_restarts": 3}
SETTINGS = AgentSettings(grammar=False, model_retries=2, request_timeout_s=10)
ASK = [{"role": "user", "content": "List the files."}]


def stub_cfg(command=STUB, **policy) -> dict:
    return {"litellm_model": "openai/stub", "command": command, "num_cpus": 0, "startup_timeout_s": 20,
            "grammar_server": "none", "supervisor": FAST | policy}


def _model(endpoint: ModelEndpoint):
    return build_model(endpoint, SETTINGS, load_prompts(SETTINGS.prompts_dir))


@ray.remote(num_cpus=0)
def ask_in_a_task(endpoint: ModelEndpoint) -> tuple[str, str]:
    """One agent model call inside a Ray task, as a unit makes it: (command, api_base used)."""
    model = _model(endpoint)
    message = model.query(ASK)
    return message["extra"]["actions"][0]["command"], model.endpoint.api_base


def _actor(endpoint: ModelEndpoint):
    return ray.get_actor(endpoint.server_name, namespace=endpoint.server_namespace)


def _wait_state(actor, state: str, restarts: int, seconds: float = 15) -> dict:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status = ray.get(actor.status.remote())
        if (status["state"], status["restarts"]) == (state, restarts):
            return status
        time.sleep(0.1)
    pytest.fail(f"server not {state} after {restarts} restart(s): {ray.get(actor.status.remote())}")


def _port(api_base: str) -> int:
    return int(api_base.rsplit(":", 1)[1].split("/")[0])


def test_an_unsupervised_unreachable_endpoint_is_model_unreachable_after_its_attempts():
    endpoint = ModelEndpoint("openai/stub", api_base=f"http://127.0.0.1:{free_port()}/v1", local=True)
    with pytest.raises(ModelUnreachable, match=r"did not answer after 2 attempt\(s\): .*Connection error\.$"):
        _model(endpoint).query(ASK)


@pytest.mark.ray
@pytest.mark.slow  # ~50 s on a loaded 2-core machine: two Ray workers import litellm, plus a restart
def test_a_call_in_a_ray_task_follows_the_server_to_its_new_port(ray_local):
    # Checks 2 s apart leave the test time to take the port before the restart.
    with serve_model("stub", stub_cfg(check_interval_s=2)) as endpoint:
        assert endpoint.server_name.startswith("raydist-model-server-") and endpoint.local
        assert ray.get(ask_in_a_task.remote(endpoint)) == ("ls", endpoint.api_base)
        actor = _actor(endpoint)
        old_port = _port(endpoint.api_base)
        os.kill(ray.get(actor.pid.remote()), signal.SIGKILL)
        squatter = socket.socket()
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # keep-alive traces of the dead server
        deadline = time.monotonic() + 2
        while True:
            try:
                squatter.bind(("127.0.0.1", old_port))
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.005)
        squatter.listen()
        try:
            # The endpoint travels by value with the old address; the call asks the actor.
            command, used = ray.get(ask_in_a_task.remote(endpoint))
            assert command == "ls" and _port(used) != old_port
            assert used == ray.get(actor.api_base.remote()) and ray.get(actor.restarts.remote()) == 1
        finally:
            squatter.close()


@pytest.mark.ray
def test_a_server_that_cannot_come_back_ends_the_call_as_model_unreachable(ray_local, tmp_path):
    flag = tmp_path / "started-once"
    command = ["bash", "-c", f"if [ -e {flag} ]; then echo weights are gone; exit 3; fi; touch {flag}; "
                             f"exec {sys.executable} {' '.join(STUB[1:])}"]
    with serve_model("stub", stub_cfg(command)) as endpoint:
        actor = _actor(endpoint)
        os.kill(ray.get(actor.pid.remote()), signal.SIGKILL)
        _wait_state(actor, "failed", 1)
        with pytest.raises(ray.exceptions.RayTaskError) as err:
            ray.get(ask_in_a_task.remote(endpoint))
    cause = err.value.cause
    assert isinstance(cause, ModelUnreachable)
    assert "could not be started in 2 attempt(s)" in str(cause) and "weights are gone" in str(cause)


@pytest.mark.ray
def test_a_call_after_the_launch_ended_is_model_unreachable(ray_local):
    with serve_model("stub", stub_cfg()) as endpoint:
        pass
    with pytest.raises(ModelUnreachable, match="model 'openai/stub': model server actor .* is gone"):
        _model(endpoint).query(ASK)


@pytest.mark.ray
def test_a_bad_supervisor_setting_is_named_before_any_server_starts(ray_local):  # placement is asked of Ray first
    from raydist.models.server import ModelServerError

    with pytest.raises(ModelServerError, match=r"local_models.stub.supervisor=.*hang_checks must be >= 1"):
        with serve_model("stub", stub_cfg(hang_checks=0)):
            pass
    with pytest.raises(ModelServerError, match=r"unexpected keyword argument 'restarts'.*SupervisorPolicy"):
        with serve_model("stub", stub_cfg(restarts=3)):
            pass


@pytest.mark.ray
def test_an_alive_server_that_does_not_serve_gets_no_extra_rounds(ray_local):
    """503 on every call from a server that stays up: the supervisor, checking at once, finds
    the same process, so the call fails after its own attempts, not after `reconnects` more."""
    import json
    import urllib.request

    with serve_model("stub", stub_cfg([*STUB, "status:503"])) as endpoint:
        model = _model(endpoint)
        with pytest.raises(ModelUnreachable, match=r"did not answer after 2 attempt\(s\).*restarted 0 time"):
            model.query(ASK)
        with urllib.request.urlopen(f"{endpoint.api_base[:-3]}/calls", timeout=5) as response:
            calls = json.load(response)["calls"]
    assert (calls, model.reconnects) == (2, 2)
