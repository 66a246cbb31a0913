"""The one bounded-concurrency loop every Ray stage uses (``run_bounded``), on a real local Ray."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from raydist.cluster.scheduler import run_bounded

pytestmark = pytest.mark.ray


def _remote(cpus: float = 0):
    """A remote function holding ``cpus`` CPUs, pickled by value (defined in a function: Ray's
    workers cannot import this test module)."""
    import ray

    def square_or_fail(x: int, pause: float) -> int:
        time.sleep(pause)
        if x == 3:
            raise ValueError(f"bad item {x}")
        return x * x

    return ray.remote(max_retries=0)(square_or_fail).options(num_cpus=cpus)


def test_every_item_reported_once_with_failures_unwrapped_and_at_most_limit_in_flight(ray_local):
    remote = _remote()
    results, running = {}, []
    run_bounded(remote, [1, 2, 3, 4, 5], lambda x: (x, 0.2), 2,
                lambda item, result, error: results.__setitem__(item, (result, error)), running.append)
    assert results == {1: (1, None), 2: (4, None), 3: (None, "ValueError: bad item 3"), 4: (16, None),
                       5: (25, None)}
    # two submitted at once, topped up to two while items remain, then draining
    assert running[0] == 2 and max(running) == 2 and running[-1] >= 1


def test_an_empty_list_submits_nothing(ray_local):
    remote = _remote()
    seen = []
    run_bounded(remote, [], lambda x: (x, 0), 2, lambda *a: seen.append(a))
    assert seen == []


def returned_leases(logs_dir: str) -> int:
    """How many worker leases the local raylet has had returned, from the per-RPC counts in
    its ``debug_state.txt`` (written every ``RAY_debug_dump_period_milliseconds`` when
    ``RAY_event_stats`` is on); read until two dumps agree."""
    import re

    def read() -> int:
        text = Path(logs_dir, "debug_state.txt").read_text()
        found = re.search(r"NodeManagerService\.grpc_server\.ReturnWorkerLease - (\d+) total", text)
        return int(found.group(1)) if found else 0

    last, now = -1, read()
    while now != last:
        time.sleep(0.6)
        last, now = now, read()
    return now


def test_a_worker_runs_the_queued_tasks_one_after_another_on_one_lease(monkeypatch):
    """With twice as many tasks in flight as slots, each of Ray's workers takes the next queued
    task as its last one ends and goes back to the raylet once, when the queue is empty: one
    returned lease per slot, not one per task (Ray's own 0.5 s lease, shorter than a task here,
    returns it after every task: ``RayOptions(worker_lease_s=0.5)`` gives 4 x slots)."""
    import ray

    from raydist.cluster.scheduler import LEASE_ENV, RayOptions, _local_cpus, init_ray

    if ray.is_initialized():
        ray.shutdown()
    monkeypatch.setenv(LEASE_ENV, "500")  # put back after the test: init_ray sets it for this process
    monkeypatch.setenv("RAY_event_stats", "1")
    monkeypatch.setenv("RAY_debug_dump_period_milliseconds", "200")
    init_ray(RayOptions())
    try:
        slots = _local_cpus()
        remote = _remote(cpus=1)
        items = list(range(10, 10 + 4 * slots))
        results = {}
        run_bounded(remote, items, lambda x: (x, 0.8), 2 * slots,
                    lambda item, result, error: results.__setitem__(item, (result, error)))
        assert results == {x: (x * x, None) for x in items}
        assert returned_leases(ray._private.worker._global_node.get_logs_dir_path()) == slots
    finally:
        ray.shutdown()
