"""The name a job's run directory takes from its command-line overrides, so that the jobs of
one ``--multirun`` that compute different things never share a directory (and a table), the
folder of the validity gate's runs beside them (``GATE_DIR``), and the rule that keeps every
run directory below its root: a name from a setting is a safe path (``name_problem``) and a
folder built from such names lies below the root it was built under (``outside``); and the
settings record every entry writes into a run directory it has started (``write_record``)."""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from pathlib import Path

from raydist._util.files import atomic_write_text
from raydist._util.hashing import stable_hash

__all__ = ["GATE_DIR", "RECORD_DIR", "job_name", "name_problem", "outside", "write_record"]

#: ``<output_root>/<benchmark>/_gate``: the validity gate's oracle and null runs of a benchmark.
GATE_DIR = "_gate"

#: The folder of a run directory holding its launch's settings (Hydra's name for it; Hydra
#: itself writes none: every entry's config sets ``hydra.output_subdir: null``).
RECORD_DIR = ".hydra"

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


#: Characters no name that becomes a folder may hold: the C0 and C1 controls and DEL (a newline
#: or an escape in a path breaks every line-based tool and terminal that prints it) and ``\\``.
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\\]")


#: The longest setting that becomes a folder and a part of file names (``name_problem``): a file
#: name holds at most 255 bytes, and ``preds/<model>__<agent>__<level>__s<seed>__a<n>.jsonl`` adds to it.
MAX_NAME_BYTES = 150


def name_problem(value: object) -> str | None:
    """What makes ``value`` (a setting that becomes folders of a run directory's path:
    ``benchmark.name``, ``agent``, ``model``) unsafe as a relative path, or None when it is
    safe. ``/`` is allowed between parts (``openai/gpt-4o-mini`` is two folders); refused are an
    empty value or an empty part (``openai/``), a part ``.`` or ``..`` (the path would leave its
    root), a leading ``/`` (an absolute path), control characters, ``\\``, invisible format
    characters (zero-width, bidirectional overrides: the name would print unlike the folder),
    and a value over ``MAX_NAME_BYTES`` bytes of UTF-8."""
    text = str(value)
    if not text.strip():
        return "it is empty"
    if text.startswith("/"):
        return "it starts with '/' (a path from the filesystem root)"
    bad = _UNSAFE.search(text)
    if bad:
        return f"it holds the character {bad.group()!r}"
    invisible = next((c for c in text if unicodedata.category(c) == "Cf"), None)
    if invisible is not None:
        return f"it holds the invisible format character {invisible!r}"
    if len(text.encode("utf-8")) > MAX_NAME_BYTES:
        return (f"it is {len(text.encode('utf-8'))} bytes long; file names are made from it (e.g. "
                f"preds/<model>__<agent>__<level>__s<seed>.jsonl) and one holds at most 255 bytes: give at most "
                f"{MAX_NAME_BYTES}")
    parts = text.split("/")
    if any(part in (".", "..") for part in parts):
        return "a part of it is '.' or '..' (a folder outside the run directory's root)"
    if any(not part.strip() for part in parts):
        return "a part of it between '/' is empty"
    return None


def outside(root: str | os.PathLike, path: str | os.PathLike) -> bool:
    """Whether ``path`` does not lie strictly below ``root``, both resolved (``Path.resolve``:
    symbolic links followed, ``..`` removed, relative to the current directory)."""
    root_path, full = Path(root).expanduser().resolve(), Path(path).expanduser().resolve()
    return full == root_path or root_path not in full.parents


def write_record(run_dir: str | os.PathLike, record: Mapping[str, str] | None) -> None:
    """``record`` (file name -> text: ``raydist.launcher.config_record``) written to
    ``<run_dir>/.hydra/``, each file at once (a reader sees the old or the new one). An entry
    calls it once its job's plan is valid and its run directory is held, so a launch refused
    before then leaves an earlier launch's record as it was. Nothing is written for an empty
    ``record``."""
    if not record:
        return
    folder = Path(run_dir) / RECORD_DIR
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in record.items():
        atomic_write_text(folder / name, text)
