"""Which instances of a SWE-bench-format dataset a launch runs, as mini-swe-agent's batch
command chooses them (``minisweagent/run/benchmarks/swebench.py``: ``--subset``, ``--split``,
``--filter``, ``--slice``), plus a list of instance ids.

Pure functions over the loaded instances: the dataset's name becomes a source the loader
reads (``raydist.tasks.loaders``), then ids, the regex filter and the slice cut it down.
"""
from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence

os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")  # mini-swe-agent prints a banner on import otherwise

FILE_SUFFIXES = (".jsonl", ".json", ".parquet")


def dataset_aliases() -> dict[str, str]:
    """Short dataset names -> Hugging Face dataset ids: the official harness's
    (``swebench.cli._datasets.DATASET_ALIASES``: ``full``, ``verified``, ``multilingual``,
    ``multimodal``, whose rows carry SWE-bench 5.x's ``image`` and ``eval_script``; and
    ``lite``, as ``swebench.harness.utils.load_swebench_dataset`` names it), then
    mini-swe-agent's for the names swebench lacks (``DATASET_MAPPING``: ``smith``, ``rebench``, ...)."""
    from minisweagent.run.benchmarks.swebench import DATASET_MAPPING
    from swebench.cli._datasets import DATASET_ALIASES

    return {**DATASET_MAPPING, **DATASET_ALIASES, "lite": "SWE-bench/SWE-bench_Lite"}


def dataset_source(path: str, split: str = "test") -> str:
    """The loader's source for ``benchmark.path``: a local ``.jsonl``/``.json``/``.parquet``
    file as it is; a short name of ``dataset_aliases`` or a hub id ``owner/name`` as
    ``hf://<id>@<split>`` (read through ``datasets.load_dataset`` when the hub is reachable).
    Raises ``ValueError`` naming ``benchmark.path`` for anything else."""
    path = str(path).strip()
    if path.endswith(FILE_SUFFIXES):
        return path
    aliases = dataset_aliases()
    if path.lower() in aliases:
        return f"hf://{aliases[path.lower()]}@{split}"
    if re.fullmatch(r"[\w.-]+/[\w.-]+", path):
        return f"hf://{path}@{split}"
    raise ValueError(f"benchmark.path={path!r}: give a .jsonl/.json/.parquet file of SWE-bench rows, a Hugging Face "
                     f"dataset id (owner/name) or one of {', '.join(sorted(aliases))}")


def check_slice(spec: str) -> slice:
    """``"start:stop[:step]"`` (each part an integer or empty, as Python slicing and
    mini-swe-agent's ``--slice``) as a ``slice``. Raises ``ValueError`` naming ``benchmark.slice``."""
    parts = str(spec).split(":")
    if not 2 <= len(parts) <= 3 or not all(re.fullmatch(r"\s*-?\d*\s*", p) for p in parts):
        raise ValueError(f"benchmark.slice={spec!r}: give start:stop or start:stop:step (integers, each may be "
                         "empty), e.g. 0:50")
    values = [int(p) if p.strip() else None for p in parts]
    if len(values) == 3 and values[2] == 0:
        raise ValueError(f"benchmark.slice={spec!r}: the step cannot be 0")
    return slice(*values)


def select_instances(instances: Sequence, *, instance_ids: Sequence[str] | None = None, filter: str = "",
                     slice_spec: str = "") -> list:
    """``instances`` (objects with ``.instance_id``, in dataset order) cut down in this order:
    to ``instance_ids`` (each must exist: ``ValueError`` naming the unknown ones), then to
    those whose id ``re.match``-es ``filter``, then to ``slice_spec`` — filter before slice,
    as mini-swe-agent's ``filter_instances`` (which does the filtering and slicing here).
    Raises ``ValueError`` naming ``benchmark.filter`` for a regex that does not compile and
    ``benchmark.slice`` for a bad slice."""
    from minisweagent.run.benchmarks.swebench import filter_instances

    chosen = list(instances)
    if instance_ids:
        known = {i.instance_id for i in chosen}
        unknown = [i for i in instance_ids if i not in known]
        if unknown:
            raise ValueError(f"benchmark.instance_ids: {', '.join(map(repr, unknown))} not in the dataset")
        wanted = set(instance_ids)
        chosen = [i for i in chosen if i.instance_id in wanted]
    try:
        re.compile(filter or "")
    except re.error as exc:
        raise ValueError(f"benchmark.filter={filter!r}: not a regular expression ({exc})") from None
    if slice_spec:
        check_slice(slice_spec)
    rows = [{"instance_id": i.instance_id, "index": n} for n, i in enumerate(chosen)]
    log = logging.getLogger("minisweagent")
    level = log.level
    log.setLevel(logging.WARNING)  # its "N -> M instances" lines count from before the ids; the plan says it
    try:
        kept = filter_instances(rows, filter_spec=filter or "", slice_spec=slice_spec or "")
    finally:
        log.setLevel(level)
    return [chosen[row["index"]] for row in kept]
