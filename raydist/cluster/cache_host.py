"""A cache that Ray tasks on any node consult mid-task, kept on the driver's side.

Some caches can only be looked up by the task itself: a DyCodeEval generator learns its next
request from the previous answer, so the driver cannot hand it the cached answers up front
(as it does with view preparations). Such a cache is served by one ``CacheHost`` actor
pinned to the driver's node: it reads and writes the cache's folder (``<cache_dir>/...`` on
the driver's disk, or ``<storage>/_cache/...``) and tasks reach it through a ``HostedCache``
handle, so an entry written by a task on node A is what a task on node B finds, the files
land where the driver keeps its caches, and no worker needs the driver's disk or the store's
credentials.
"""

from __future__ import annotations

from raydist._util.storage import JsonCache, Storage

__all__ = ["HostedCache", "host_cache"]


class _CacheHost:
    """The actor's body: ``JsonCache`` over ``storage`` (plain Python; ``host_cache`` makes it an actor)."""

    def __init__(self, storage: Storage, indent: int | None) -> None:
        self.cache = JsonCache(storage, indent=indent)

    def get(self, key: str) -> dict | None:
        return self.cache.get(key)

    def put(self, key: str, record: dict) -> None:
        self.cache.put(key, record)


class HostedCache:
    """What a task holds: ``get(key)`` and ``put(key, record)`` of ``JsonCache``, answered by the
    driver-side actor (each a blocking round trip of a few milliseconds). Pickles with its
    actor handle, so it can be an argument of any Ray task. Raises what the actor's
    ``JsonCache`` raises (``OSError`` for a storage that cannot be written), and
    ``ray.exceptions.RayActorError`` once the launch that made it has ended."""

    def __init__(self, actor, storage: Storage) -> None:
        self.actor = actor
        self.storage = storage

    def get(self, key: str) -> dict | None:
        import ray

        return ray.get(self.actor.get.remote(key))

    def put(self, key: str, record: dict) -> None:
        import ray

        ray.get(self.actor.put.remote(key, record))


def host_cache(storage: Storage, *, indent: int | None = None) -> HostedCache:
    """Start the actor serving the JSON cache in ``storage`` on this process's node (the
    driver's: Ray must be initialised), with no CPU of its own and a few threads so that
    lookups of concurrent tasks do not queue behind a slow write. It ends when the last
    ``HostedCache`` of it is dropped."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    actor = ray.remote(_CacheHost).options(num_cpus=0, max_concurrency=8, scheduling_strategy=here)
    return HostedCache(actor.remote(storage, indent), storage)
