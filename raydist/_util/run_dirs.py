"""The name a job's run directory takes from its command-line overrides, so that the jobs of
one ``--multirun`` that compute different things never share a directory (and a table), and
the folder of the validity gate's runs beside them (``GATE_DIR``)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from fnmatch import fnmatchcase

from raydist._util.hashing import stable_hash

__all__ = ["GATE_DIR", "job_name"]

#: ``<output_root>/<benchmark>/_gate``: the validity gate's oracle and null runs of a benchmark.
GATE_DIR = "_gate"

#: Overrides no launcher names: paths and Hydra's own settings change where, never what.
NOT_COMPUTED = ("output_root", "cache_dir", "data_root", "storage", "hydra", "hydra.*", "hydra/*")


def job_name(overrides: Iterable, unnamed: Iterable[str] = ()) -> str:
    """One path component naming the ``overrides`` of a job (Hydra's ``hydra.overrides.task``)
    that change what it computes: ``key=value`` joined by ``,``; a key given twice counts once,
    with its last value, where it was last given. Left out: keys (``+``/``~`` stripped) that
    match a pattern of ``NOT_COMPUTED`` or of ``unnamed`` (``fnmatch``: ``cluster.*``), which
    a launcher gives for keys its path already names or that change nothing it computes.
    Every character a path cannot hold safely becomes ``_``; a name over 160 characters is
    its first 140 and a hash of the whole. ``""`` when no override is left."""
    patterns = (*NOT_COMPUTED, *unnamed)
    last: dict[str, str] = {}
    for override in map(str, overrides):
        key = override.split("=", 1)[0].lstrip("+~")
        if not any(fnmatchcase(key, pattern) for pattern in patterns):
            last.pop(key, None)
            last[key] = override
    text = ",".join(re.sub(r"[^A-Za-z0-9._=,+-]+", "_", o) for o in last.values())
    return text if len(text) <= 160 else f"{text[:140]}-{stable_hash(text, 12)}"
