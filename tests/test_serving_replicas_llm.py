"""Two replicas of the embedded Gemma on a two-node Ray cluster built in this process
(``ray.cluster_utils.Cluster``, nodes at 127.0.0.2 and 127.0.0.3), served as a launch serves
them (``serve_model`` with the shipped ``local_models.gemma3-270m`` entry, ``replicas: 2``,
``host: 0.0.0.0``, one llama.cpp thread each), and called from Ray tasks on both nodes the way
units call them (``litellm_complete`` on the endpoint, from a long-lived client actor per node,
so a call is made the moment the test asks for it). Where each request went is read from each
llama.cpp server's own log."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest
import ray
from ray.cluster_utils import Cluster

from raydist.cluster.serving import serve_model
from raydist.models.completion import litellm_complete
from raydist.models.router import completion_function, conversation_key, pinned_replica

pytestmark = [pytest.mark.ray, pytest.mark.llm]

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray's workers cannot import tests/

HEAD_IP, WORKER_IP = "127.0.0.2", "127.0.0.3"
NODE_RESOURCE = {HEAD_IP: "head_node", WORKER_IP: "far_node"}
"""A custom resource per node: a task asking for one runs on that node."""
FINISHED = " total time ="
"""The line llama-server logs for every generation it finished (one per chat request)."""


def _conversation(opening: str) -> list[dict]:
    return [{"role": "system", "content": "Answer in one word."}, {"role": "user", "content": opening}]


@ray.remote(num_cpus=0)
class Client:
    """A unit's process on one node: it calls the model as a unit does (``litellm_complete``
    on the endpoint; its own litellm Router over the replicas)."""

    def __init__(self, endpoint):
        self.complete = litellm_complete(endpoint, temperature=0.0, timeout=120, retries=2)
        self.route = completion_function(endpoint)

    def converse(self, openings: list[str], turns: int = 1) -> tuple[str, list[list[str]]]:
        """For each opening, a conversation of ``turns`` calls; ``(node ip, [[replica that
        answered each call] per conversation])``."""
        done = []
        for opening in openings:
            messages, answered = _conversation(opening), []
            for turn in range(turns):
                answer = self.complete(messages, seed=0, max_tokens=3)
                answered.append(self.route.answered_by)
                messages = [*messages, {"role": "assistant", "content": answer},
                            {"role": "user", "content": f"And {turn}?"}]
            done.append(answered)
        return ray.util.get_node_ip_address(), done


@pytest.fixture(scope="module")
def replicas(gemma_entry):
    """``(endpoint, {replica name: actor}, {node ip: Client})`` of two Gemma replicas over a
    head and a worker node with one CPU each (a replica's bundle needs one, so they land one
    per node), and a client on each node."""
    if ray.is_initialized():
        ray.shutdown()  # another test's local Ray; ``ray_local`` starts a new one when next used
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "node_ip_address": HEAD_IP, "include_dashboard": False, "resources": {"head_node": 1},
        "object_store_memory": 100 * 2**20})
    command = list(gemma_entry["command"])
    command[command.index("--threads") + 1] = "1"
    entry = {**gemma_entry, "command": command, "host": "0.0.0.0", "replicas": 2,
             "supervisor": {"check_interval_s": 1, "health_timeout_s": 5, "backoff_s": 0.5}}
    try:
        cluster.add_node(num_cpus=1, resources={"far_node": 1}, node_ip_address=WORKER_IP,
                         object_store_memory=100 * 2**20)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        with serve_model("gemma3-270m", entry) as endpoint:
            actors = {name: ray.get_actor(name, namespace=endpoint.server_namespace) for name in endpoint.replica_names}
            clients = {ip: Client.options(resources={resource: 0.01}).remote(endpoint)
                       for ip, resource in NODE_RESOURCE.items()}
            yield endpoint, actors, clients
    finally:
        ray.shutdown()
        cluster.shutdown()


def _requests(actors: dict) -> dict[str, int]:
    """Chat requests each replica's llama.cpp server has answered, from its own log."""
    return {name: ray.get(actor.log_tail.remote(100_000)).count(FINISHED) for name, actor in actors.items()}


def _openings(pinned_to: str, names, count: int, start: int = 0) -> list[str]:
    found = (f"Name colour number {i}." for i in range(start, start + 1000))
    return [o for o in found if pinned_replica(conversation_key(_conversation(o)), sorted(names)) == pinned_to][:count]


def test_the_replicas_run_one_per_node_each_at_its_nodes_address(replicas):
    endpoint, actors, _ = replicas
    node_of = {name: ray.get(actor.__ray_call__.remote(lambda _: ray.util.get_node_ip_address()))
               for name, actor in actors.items()}
    bases = {name: ray.get(actor.api_base.remote()) for name, actor in actors.items()}

    assert sorted(node_of.values()) == [HEAD_IP, WORKER_IP]
    assert all(bases[name].startswith(f"http://{node_of[name]}:") for name in actors)
    assert endpoint.server_name is None and len(endpoint.replica_names) == 2


def test_requests_from_tasks_on_both_nodes_are_spread_over_both_replicas(replicas):
    _, actors, clients = replicas
    a, b = sorted(actors)
    before = _requests(actors)
    openings = {a: _openings(a, actors, 2), b: _openings(b, actors, 2)}
    tasks = [clients[HEAD_IP].converse.remote([openings[a][0], openings[b][0]]),
             clients[WORKER_IP].converse.remote([openings[a][1], openings[b][1]])]
    results = ray.get(tasks, timeout=300)
    after = _requests(actors)

    assert [ip for ip, _ in results] == [HEAD_IP, WORKER_IP]
    assert [answered for _, answered in results] == [[[a], [b]], [[a], [b]]]
    assert {name: after[name] - before[name] for name in actors} == {a: 2, b: 2}


def test_a_conversations_successive_calls_stick_to_one_replica(replicas):
    _, actors, clients = replicas
    a, b = sorted(actors)
    before = _requests(actors)
    node, [answered] = ray.get(clients[WORKER_IP].converse.remote(_openings(b, actors, 1, start=100), turns=3),
                               timeout=300)
    after = _requests(actors)

    assert node == WORKER_IP and answered == [b, b, b]
    assert {name: after[name] - before[name] for name in actors} == {a: 0, b: 3}


def test_a_killed_replicas_calls_go_to_the_other_and_it_answers_again_once_restarted(replicas):
    _, actors, clients = replicas
    a, b = sorted(actors)
    opening = _openings(a, actors, 1, start=200)
    assert ray.get(clients[WORKER_IP].converse.remote(opening), timeout=300)[1] == [[a]]
    killed = ray.get(actors[a].pid.remote())
    os.kill(killed, signal.SIGKILL)  # every node of this cluster is this machine
    before = _requests(actors)

    _, down = ray.get(clients[WORKER_IP].converse.remote(opening * 2), timeout=300)
    assert down == [[b], [b]]
    assert _requests(actors)[b] - before[b] == 2

    deadline = time.monotonic() + 180
    while (status := ray.get(actors[a].status.remote()))["state"] != "ready" or status["restarts"] < 1:
        assert time.monotonic() < deadline, status
        time.sleep(1)
    assert ray.get(actors[a].pid.remote()) != killed
    _, back = ray.get(clients[WORKER_IP].converse.remote(opening), timeout=300)

    assert back == [[a]]
    assert _requests(actors)[a] - before[a] == 1
