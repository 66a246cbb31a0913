"""The one bounded-concurrency loop every Ray stage uses (``run_bounded``), on a real local Ray."""

from __future__ import annotations

import time

import pytest

from raydist.cluster.runner import run_bounded

pytestmark = pytest.mark.ray


def _remote():
    """A remote function pickled by value (defined in a function: Ray's workers cannot import
    this test module)."""
    import ray

    def square_or_fail(x: int, pause: float) -> int:
        time.sleep(pause)
        if x == 3:
            raise ValueError(f"bad item {x}")
        return x * x

    return ray.remote(max_retries=0)(square_or_fail).options(num_cpus=0)


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
