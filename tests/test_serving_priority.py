"""A model server raydist serves computes at the raylet's priority (nice 0), not at the nice
value Ray gives its workers (15), which the units' own work keeps (``SERVER_RUNTIME_ENV``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from raydist.cluster.serving import serve_model

STUB = ["{python}", str(Path(__file__).with_name("openai_stub_server.py")), "{host}", "{port}"]


def _nice_of_a_task() -> int:
    import ray

    @ray.remote(num_cpus=0)
    def nice() -> int:
        return os.getpriority(os.PRIO_PROCESS, 0)

    return ray.get(nice.remote())


@pytest.mark.ray
def test_the_server_and_its_actor_run_at_nice_0_while_tasks_keep_rays_15(ray_local):
    import ray

    cfg = {"litellm_model": "openai/stub", "command": STUB, "num_cpus": 0, "startup_timeout_s": 20,
           "grammar_server": "none"}
    with serve_model("stub", cfg) as endpoint:
        actor = ray.get_actor(endpoint.server_name, namespace=endpoint.server_namespace)
        server_pid = ray.get(actor.pid.remote())
        assert os.getpriority(os.PRIO_PROCESS, server_pid) == 0
    assert _nice_of_a_task() == 15  # Ray's worker_niceness: what the server would have had without its env
