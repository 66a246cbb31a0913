"""litellm's Router over replicas (``raydist.models.router``), against real HTTP servers: two
scripted OpenAI-compatible servers (``tests/openai_stub_server.py``, each its own process that
counts the chat requests it received). The test is about where requests go, not about the
model, and the replicas' supervisors are stood in for by the ``lookup`` the router is given."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import raydist.models.router as router_module
from raydist.models.completion import litellm_complete
from raydist.models.endpoint import ModelEndpoint
from raydist.models.process import free_port
from raydist.models.retry import ModelUnreachable
from raydist.models.router import (
    Replica,
    ReplicaRouter,
    conversation_key,
    model_list,
    pinned_replica,
)

STUB = Path(__file__).resolve().parent / "openai_stub_server.py"
MODEL = "openai/stub"


class Stub:
    """One scripted server process on loopback: ``api_base``, ``calls()``, ``kill()``."""

    def __init__(self, port: int | None = None):
        self.port = port or free_port()
        # its default answer: one mini-swe-agent action
        self.proc = subprocess.Popen([sys.executable, str(STUB), "127.0.0.1", str(self.port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                self.calls()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"stub server on port {self.port} did not start")

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def calls(self) -> int:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/calls", timeout=2) as response:
            return json.load(response)["calls"]

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def stubs():
    servers = {"replica-a": Stub(), "replica-b": Stub()}
    yield servers
    for server in servers.values():
        server.kill()


def _router(stubs: dict, restarts: dict | None = None) -> ReplicaRouter:
    """A router whose lookup reports every stub as ready (as supervisors that have not noticed
    anything), with the restart counts in ``restarts``."""
    restarts = restarts if restarts is not None else {}
    return ReplicaRouter(MODEL, lambda wait_s: [Replica(name, stub.api_base, restarts.get(name, 0))
                                                for name, stub in stubs.items()], restart_wait_s=1)


def _conversation(opening: str) -> list[dict]:
    return [{"role": "system", "content": "You are terse."}, {"role": "user", "content": opening}]


def _openings(pinned_to: str, names: list[str], count: int) -> list[str]:
    """The first ``count`` openings ``Task i.`` whose conversations are pinned to ``pinned_to``."""
    found = (f"Task {i}." for i in range(1000))
    return [o for o in found if pinned_replica(conversation_key(_conversation(o)), names) == pinned_to][:count]


def test_removing_a_replica_moves_only_the_conversations_pinned_to_it():
    keys = [conversation_key(_conversation(f"Task {i}.")) for i in range(300)]
    before = {key: pinned_replica(key, ["a", "b", "c"]) for key in keys}
    after = {key: pinned_replica(key, ["a", "c"]) for key in keys}

    assert {name: list(before.values()).count(name) > 50 for name in "abc"} == {"a": True, "b": True, "c": True}
    assert all(after[key] == before[key] for key in keys if before[key] != "b")
    assert {after[key] for key in keys if before[key] == "b"} == {"a", "c"}


def test_the_key_is_the_first_two_messages_only():
    first = _conversation("Fix the bug.")
    later = [*first, {"role": "assistant", "content": "ls"}, {"role": "user", "content": "a.py"}]

    assert conversation_key(later) == conversation_key(first)
    assert conversation_key(_conversation("Fix another bug.")) != conversation_key(first)


def test_each_replica_is_one_shared_and_one_pinned_deployment_named_by_its_restarts():
    deployments = model_list(MODEL, [Replica("r0", "http://10.0.0.1:8000/v1", 2)])

    assert [(d["model_name"], d["model_info"]["id"], d["litellm_params"]["api_base"]) for d in deployments] == [
        (MODEL, "r0/shared/2", "http://10.0.0.1:8000/v1"),
        (f"{MODEL}@r0", "r0/pinned/2", "http://10.0.0.1:8000/v1"),
    ]


def test_conversations_are_spread_over_the_replicas_by_their_pin(stubs):
    route = _router(stubs)
    names = sorted(stubs)
    plan = {name: _openings(name, names, 2) for name in names}
    answered = {}
    for opening in (o for openings in plan.values() for o in openings):
        route(model=MODEL, messages=_conversation(opening), max_tokens=4)
        answered[opening] = route.answered_by

    assert answered == {opening: name for name, openings in plan.items() for opening in openings}
    assert {name: stub.calls() for name, stub in stubs.items()} == {"replica-a": 2, "replica-b": 2}


def test_a_conversation_sticks_to_one_replica_through_litellm_complete(stubs, monkeypatch):
    route = _router(stubs)
    # The process's router asks the replicas' actors; here the stubs are the replicas.
    monkeypatch.setattr(router_module, "_actor_lookup", lambda model, names, namespace: route.lookup)
    endpoint = ModelEndpoint(MODEL, api_base=stubs["replica-a"].api_base, local=True,
                             replica_names=("stuck-a", "stuck-b"))
    complete = litellm_complete(endpoint, temperature=0.0, timeout=10, retries=1)
    messages = _conversation(_openings("replica-b", sorted(stubs), 1)[0])
    for turn in range(3):
        answer = complete(messages, seed=0, max_tokens=4)
        messages = [*messages, {"role": "assistant", "content": answer}, {"role": "user", "content": f"turn {turn}"}]
        assert router_module.completion_function(endpoint).answered_by == "replica-b"

    assert {name: stub.calls() for name, stub in stubs.items()} == {"replica-a": 0, "replica-b": 3}
    assert complete.usage == {"input_tokens": 21, "output_tokens": 15, "calls": 3}


def test_an_agents_steps_go_to_its_conversations_replica(stubs, monkeypatch):
    from raydist.agents.model import EndpointModel

    route = _router(stubs)
    monkeypatch.setattr(router_module, "_actor_lookup", lambda model, names, namespace: route.lookup)
    endpoint = ModelEndpoint(MODEL, api_base=stubs["replica-b"].api_base, local=True,
                             replica_names=("agent-a", "agent-b"))
    model = EndpointModel(endpoint, retries=1, model_kwargs=endpoint.request_kwargs() | {"max_tokens": 8})
    messages = _conversation(_openings("replica-a", sorted(stubs), 1)[0])
    for _ in range(3):
        message = model.query(messages)
        messages = [*messages, {"role": "assistant", "content": message["content"]},
                    {"role": "user", "content": "ok"}]

    assert message["extra"]["actions"] == [{"command": "ls"}]
    assert {name: stub.calls() for name, stub in stubs.items()} == {"replica-a": 3, "replica-b": 0}
    assert (model.input_tokens, model.output_tokens) == (21, 15)


def test_a_dead_replicas_conversation_is_answered_by_the_other_and_returns_after_its_restart(stubs):
    restarts = {}
    route = _router(stubs, restarts)
    messages = _conversation(_openings("replica-a", sorted(stubs), 1)[0])
    route(model=MODEL, messages=messages, max_tokens=4)
    assert route.answered_by == "replica-a"

    stubs["replica-a"].kill()  # its supervisor has not noticed yet: still reported ready
    for _ in range(3):
        route(model=MODEL, messages=messages, max_tokens=4)
        assert route.answered_by == "replica-b"
    assert stubs["replica-b"].calls() == 3

    stubs["replica-a"] = Stub()  # restarted, on a new port
    restarts["replica-a"] = 1
    route(model=MODEL, messages=messages, max_tokens=4)

    assert route.answered_by == "replica-a"
    assert [r.api_base for r in route.replicas] == [stubs["replica-a"].api_base, stubs["replica-b"].api_base]
    assert (stubs["replica-a"].calls(), stubs["replica-b"].calls()) == (1, 3)


def test_an_api_base_in_the_request_does_not_bypass_the_replicas(stubs):
    route = _router(stubs)
    route(model=MODEL, messages=_conversation("hi"), max_tokens=4, api_base="http://127.0.0.1:9/v1", api_key="k")

    assert sum(stub.calls() for stub in stubs.values()) == 1


def test_no_replica_answering_is_model_unreachable():
    def lookup(wait_s):
        raise ModelUnreachable("model 'openai/stub': no replica of the model answers (waited 1 s)")

    route = ReplicaRouter(MODEL, lookup, restart_wait_s=1)
    with pytest.raises(ModelUnreachable, match="no replica of the model answers"):
        route(model=MODEL, messages=_conversation("hi"), max_tokens=4)


def test_another_model_name_is_refused(stubs):
    with pytest.raises(ValueError, match="serves 'openai/stub', not 'openai/other'"):
        _router(stubs)(model="openai/other", messages=_conversation("hi"))
