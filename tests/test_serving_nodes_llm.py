"""A model server that every Ray node reaches: the embedded Gemma served as a launch serves it
(``serve_model`` with the shipped ``local_models.gemma3-270m`` entry, ``host=0.0.0.0``) on the
head node of a two-node cluster built in this process (``ray.cluster_utils.Cluster``), and a
real completion made from a Ray task on the other node, through the address the server's
actor advertises. Each node has its own loopback address (127.0.0.2, 127.0.0.3), so the
advertised address is seen to be the server node's, not a fixed 127.0.0.1, and a server bound
to 127.0.0.1 alone would not be reached at it, as on separate machines (~80 s)."""

from __future__ import annotations

import sys
import time

import pytest
import ray
from ray.cluster_utils import Cluster

from raydist.cluster.serving import serve_model
from raydist.models.completion import litellm_complete
from raydist.models.server import follow_server

pytestmark = [pytest.mark.ray, pytest.mark.llm]

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray's workers cannot import tests/

HEAD_IP, WORKER_IP = "127.0.0.2", "127.0.0.3"
FAR = "far_node"
"""The custom resource only the worker node has: a task asking for it runs there."""


@ray.remote(num_cpus=0, resources={FAR: 1})
def complete_on_the_far_node(endpoint) -> tuple[str, str, str]:
    """``(node id, api_base used, answer)`` of one completion, made as a unit makes its calls:
    the address asked of the server's actor, the request through litellm."""
    endpoint = follow_server(endpoint, wait_s=60)
    complete = litellm_complete(endpoint, temperature=0.0, timeout=60, retries=2)
    answer = complete([{"role": "user", "content": "Say hello."}], seed=0, max_tokens=8)
    return ray.get_runtime_context().get_node_id(), endpoint.api_base, answer


@pytest.fixture
def two_nodes():
    """A head node with the one CPU the model server takes, and a worker node with no CPU and
    the ``FAR`` resource; Ray connected to it for the test, everything shut down after."""
    if ray.is_initialized():
        ray.shutdown()  # another test's local Ray; ``ray_local`` starts a new one when next used
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "node_ip_address": HEAD_IP, "include_dashboard": False,
        "object_store_memory": 100 * 2**20})
    try:
        cluster.add_node(num_cpus=0, resources={FAR: 1}, node_ip_address=WORKER_IP,
                         object_store_memory=100 * 2**20)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_a_task_on_another_node_gets_an_answer_from_a_server_bound_to_all_interfaces(two_nodes, gemma_entry):
    started = time.monotonic()
    with serve_model("gemma3-270m", {**gemma_entry, "host": "0.0.0.0"}) as endpoint:
        server = ray.get_actor(endpoint.server_name, namespace=endpoint.server_namespace)
        server_node = ray.get(server.__ray_call__.remote(lambda _: ray.get_runtime_context().get_node_id()))
        node_ip = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes()}
        port = endpoint.api_base.rsplit(":", 1)[1].split("/")[0]

        assert node_ip[server_node] == HEAD_IP
        assert endpoint.api_base == f"http://{HEAD_IP}:{port}/v1"  # the node's address, not 0.0.0.0
        task_node, used, answer = ray.get(complete_on_the_far_node.remote(endpoint), timeout=180)

    assert task_node != server_node and node_ip[task_node] == WORKER_IP
    assert used == endpoint.api_base
    assert answer.strip()
    assert time.monotonic() - started < 120
