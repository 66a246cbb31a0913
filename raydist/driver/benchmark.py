"""The ``benchmark`` config node and the instances it names.

``benchmark=builtin|file|realfix|swebench_offline`` give a ``source`` (a file of raydist's
instance format, which is SWE-bench's plus optional fields). ``benchmark=swebench`` takes
SWE-bench Lite / Verified / Full or any dataset of their schema by ``path`` (a local JSONL /
JSON / Parquet file, or a Hugging Face dataset when the hub is reachable) and chooses its
instances as mini-swe-agent's batch command does (``raydist.tasks.selection``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omegaconf import MISSING

from raydist.recall.select import read_leakage
from raydist.tasks import load_instances
from raydist.tasks.selection import dataset_source, select_instances
from raydist.tasks.swe_qa import load_swe_qa


@dataclass
class BenchmarkConfig:
    """``benchmark``: the instances (a ``benchmark=`` group option names one set)."""

    name: str = MISSING
    """Names the run directory (``<output_root>/<name>/...``)."""
    source: str | None = None
    """``builtin``, a SWE-bench-format file (.jsonl, .json, .parquet) or hf://<dataset>@<split>."""
    path: str | None = None
    """SWE-bench rows (``benchmark=swebench``): a .jsonl/.json/.parquet file, a Hugging Face dataset
    id (``SWE-bench/SWE-bench_Verified``) or a short name (``lite``, ``verified``, ``full``, ...: the
    official harness's, then mini-swe-agent's); instead of ``source``."""
    split: str = "test"
    """The dataset split read from the hub (``path`` naming a dataset, or ``hf://`` without ``@split``)."""
    ids: Any = None
    """Instance ids to run (a list or one id), or null for all."""
    instance_ids: Any = None
    """The same as ``ids``, under mini-swe-agent's name; give one of the two."""
    filter: str = ""
    """A regular expression; only instances whose id matches it (``re.match``, from the start) run."""
    slice: str = ""
    """``start:stop[:step]`` of the instances left after ids and ``filter`` (mini-swe-agent's
    ``--slice``), e.g. ``0:50``; empty for all."""
    format: str = "swebench"
    """``swebench`` (SWE-bench-format rows) or ``swe_qa`` (SWE-QA's folder: ``source`` holds one
    ``<repo>.jsonl`` of questions per repository and ``repo_commit.txt``; ``raydist.tasks.swe_qa``)."""
    repositories: Any = None
    """``format=swe_qa``: the SWE-QA repositories (file stems) to load, e.g. ``[flask]``."""
    releases: Any = None
    """``format=swe_qa``: stem -> ``{name, version, sha256}`` of the PyPI source release that
    stands in for the commit of ``repo_commit.txt`` (``raydist.tasks.swe_qa.release_match`` says how closely)."""
    leakage: str | None = None
    """A recall probe's table (``recall.parquet``, or the probe's run directory holding it; written
    by ``python -m raydist.launch_recall``): only the instances it puts at ``min_leakage`` or above run,
    after ``filter`` and ``slice`` (SchrodingerRepo §IV-A runs 300 high-leakage instances). null: all."""
    min_leakage: str = "repair_logic"
    """The lowest leakage level kept with ``leakage``: ``none``, ``files_symbols``, ``repair_logic``
    or ``patch_test`` (``raydist.recall.score``)."""
    limit: int | None = None
    """At most this many instances (the first ones, after ``filter``, ``slice`` and ``leakage``), or null for all."""
    kind: str = "tasks"
    """``tasks`` (repositories, this launcher) or ``problems`` (``raydist.launch_problems``)."""
    dataset: str | None = None
    """The seed-problem set of a ``problems`` benchmark."""


def _ids(value) -> list[str] | None:
    if value is None or value == "" or (not isinstance(value, str) and not list(value)):
        return None
    return [value] if isinstance(value, str) else [str(v) for v in value]


def load_benchmark(bench) -> list:
    """The instances of the ``benchmark`` node ``bench`` (a ``BenchmarkConfig`` or its
    DictConfig), in dataset order: read from ``source`` or ``path``
    (``raydist.tasks.selection.dataset_source``), cut to ``ids``/``instance_ids``, then
    ``filter``, then ``slice`` (``select_instances``), then to the probe's ``leakage`` level
    (``raydist.recall.select.read_leakage``, read first), then ``limit``.

    Raises ``ValueError`` naming the key for a bad setting (both ``source`` and ``path``,
    both ``ids`` and ``instance_ids``, an unknown id, a bad regex or slice, a hub dataset that
    cannot be read, with the advice to give a local file; a ``leakage`` table that is missing or
    holds none of the instances, an unknown ``min_leakage``), ``FileNotFoundError`` for a missing
    file and ``MalformedInstance`` naming the file and line of a bad row."""
    if not hasattr(bench, "get"):  # a BenchmarkConfig: read as the DictConfig node is
        bench = {key: getattr(bench, key) for key in bench.__dataclass_fields__}
    source, path = bench.get("source"), bench.get("path")
    split = str(bench.get("split") or "test")
    if source and path:
        raise ValueError(f"benchmark.source={source!r} and benchmark.path={path!r}: give one of them")
    if not (source or path):
        raise ValueError("no instances named: set benchmark.path (benchmark=swebench) or benchmark.source")
    ids, instance_ids = _ids(bench.get("ids")), _ids(bench.get("instance_ids"))
    if ids and instance_ids:
        raise ValueError("benchmark.ids and benchmark.instance_ids: give one of them (they mean the same)")
    fmt = str(bench.get("format") or "swebench")
    if fmt not in ("swebench", "swe_qa"):
        raise ValueError(f"benchmark.format={fmt!r}: give swebench (SWE-bench rows) or swe_qa (SWE-QA's folder)")
    leakage = (read_leakage(str(bench.get("leakage")), str(bench.get("min_leakage") or "repair_logic"))
               if bench.get("leakage") else None)  # a bad probe table fails before the instances load
    resolved = dataset_source(str(path), split) if path else str(source)
    try:
        if fmt == "swe_qa":
            instances = load_swe_qa(resolved, dict(bench.get("releases") or {}), bench.get("repositories"))
            instance_ids = instance_ids or ids
        else:
            instances = load_instances(resolved, ids=ids, hf_split=split)
    except RuntimeError as exc:  # the hub cannot be reached, or has no such dataset
        raise ValueError(f"benchmark.path={path or source!r}: {exc}. Offline, give a local file: "
                         "benchmark.path=../shared/data/swebench/swebench_lite.jsonl (or any JSONL/Parquet of "
                         "SWE-bench rows)") from exc
    chosen = select_instances(instances, instance_ids=instance_ids, filter=str(bench.get("filter") or ""),
                              slice_spec=str(bench.get("slice") or ""))
    if leakage is not None:
        chosen = leakage.select(chosen)
    limit = bench.get("limit")
    if limit is not None and limit < 0:
        raise ValueError(f"benchmark.limit={limit}: give a count of at least 0, or null")
    return chosen if limit is None else chosen[:limit]
