"""The images one launch uses and what they take on the node: the record the driver writes to
the run directory's ``images.json`` and stamps into the image ledger under ``cache_dir``
(``raydist.sandbox.image_ledger``; issue 31, item 5).

The node is the one the driver's engine (``sandbox.docker_host``) runs on; on a Ray cluster the
other nodes' engines build their own copies, which this record does not count.
"""
from __future__ import annotations

import time
from datetime import UTC, datetime

from raydist.cluster.job import Job
from raydist.grading.official import has_eval_script
from raydist.sandbox.footprint import node_layers, run_record
from raydist.sandbox.images import instance_tag
from raydist.sandbox.official import official_image_name


def image_tags(job: Job, base_image: str) -> list[str]:
    """The tags ``job``'s units run in, sorted: the base image, the instance image of each
    instance with a recipe (``raydist/instance:<key>``) and the official image of each official
    row (``raydist.sandbox.official.official_image_name``)."""
    tags = {base_image}
    for instance_id in {unit.instance_id for unit in job.units}:
        instance = job.instances[instance_id]
        if instance.recipe is not None:
            tags.add(instance_tag(instance.recipe))
        elif has_eval_script(instance):
            tags.add(official_image_name(instance, job.settings.sandbox.image_namespace))
    return sorted(tags)


class Before:
    """What was on the node when the launch started: its layers' chain ids and the time."""

    def __init__(self, client) -> None:
        """Take the snapshot from ``client``'s engine now."""
        self.started = time.time()
        self.layers = node_layers(client)


def images_record(client, job: Job, base_image: str, before: Before) -> dict:
    """The launch's ``images.json``: ``raydist.sandbox.footprint.run_record`` of ``image_tags``
    against ``before``, with ``started`` (Unix seconds) and ``started_utc`` (ISO 8601)."""
    record = run_record(client, image_tags(job, base_image), before.layers)
    when = datetime.fromtimestamp(before.started, UTC).isoformat(timespec="seconds")
    return {"started": before.started, "started_utc": when, **record}
