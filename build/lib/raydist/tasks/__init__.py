"""Benchmark instances: the schema, loaders for JSONL/JSON/Parquet/HF datasets, and the built-in set."""

from raydist.tasks.loaders import load_instances, write_instances
from raydist.tasks.records import instance_from_record
from raydist.tasks.schema import (
    DEFAULT_INSTALL,
    Instance,
    MalformedInstance,
    MissingTestCommand,
    Recipe,
    Sdist,
)

__all__ = [
    "DEFAULT_INSTALL",
    "Instance",
    "MalformedInstance",
    "MissingTestCommand",
    "Recipe",
    "Sdist",
    "instance_from_record",
    "load_instances",
    "write_instances",
]
