"""Load instance sets from JSONL, JSON, Parquet, the built-in set or a Hugging Face dataset.

A source string is what the config key ``benchmark.source`` holds: ``builtin``, a path
ending in ``.jsonl``/``.json``/``.parquet``, or ``hf://<dataset>[@split]``.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Iterable, Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from raydist._util.files import atomic_write_parquet, atomic_write_text
from raydist.tasks.records import instance_from_record
from raydist.tasks.schema import Instance, MalformedInstance

BUILTIN = "builtin"
HF_PREFIX = "hf://"


def builtin_path() -> Path:
    """Path of the packaged built-in set, ``raydist/tasks/builtin/instances.jsonl``."""
    return Path(str(resources.files("raydist.tasks") / "builtin" / "instances.jsonl"))


def load_instances(
    source: str,
    *,
    ids: Sequence[str] | None = None,
    limit: int | None = None,
    hf_split: str = "test",
) -> list[Instance]:
    """Instances from ``source`` in source order, optionally selected by ``ids``, then cut to ``limit``.

    Raises :class:`MalformedInstance` naming ``file:line`` (JSONL) or ``file:record``
    (JSON list / Parquet row, 1-based) for a bad record (the rules of
    :func:`raydist.tasks.records.instance_from_record`), a line that is not UTF-8 or a duplicate
    ``instance_id``; ``FileNotFoundError`` naming the path and ``benchmark.source`` when the file
    is absent; ``ValueError`` for a directory, FIFO, socket or device in its place (found by
    ``stat``, never opened), an unknown suffix, unknown ``ids`` (all named) or a negative
    ``limit``; ``RuntimeError`` naming the dataset when ``hf://`` cannot be loaded.
    """
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0 (got {limit}); set benchmark.limit to a count or null")
    instances = _read(source, hf_split)
    if ids is not None:
        instances = _select(instances, ids, source)
    return instances if limit is None else instances[:limit]


def _read(source: str, hf_split: str) -> list[Instance]:
    if source == BUILTIN:
        return _from_jsonl(builtin_path())
    if source.startswith(HF_PREFIX):
        return _from_hf(source[len(HF_PREFIX):], hf_split)
    path = Path(source)
    readers = {".jsonl": _from_jsonl, ".json": _from_json, ".parquet": _from_parquet}
    reader = readers.get(path.suffix)
    if reader is None:
        raise ValueError(
            f"benchmark.source {source!r}: unknown instance source; use 'builtin', a .jsonl/.json/.parquet "
            "file or 'hf://<dataset>[@split]'"
        )
    _check_regular_file(path)
    return reader(path)


def _check_regular_file(path: Path) -> None:
    """Stat ``path`` before opening it: opening a FIFO would block until a writer comes."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise FileNotFoundError(f"instance file {str(path)!r} does not exist; "
                                "check the config key benchmark.source") from None
    if stat.S_ISREG(mode):
        return
    kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "not a regular file")
    raise ValueError(f"instance file {str(path.absolute())!r} is {kind}, not a file of instances; "
                     "point benchmark.source at a .jsonl/.json/.parquet file")


def _build(rows: Iterable[tuple[str, Any]], remedy: str) -> list[Instance]:
    """Records with their locations -> instances, refusing a repeated ``instance_id``."""
    instances: list[Instance] = []
    first_seen: dict[str, str] = {}
    for where, record in rows:
        try:
            instance = instance_from_record(record, where)
        except MalformedInstance as error:
            raise MalformedInstance(error.source, error.field, error.problem, remedy, error.instance_id) from None
        if instance.instance_id in first_seen:
            problem = f"repeats {instance.instance_id!r}, first seen at {first_seen[instance.instance_id]}"
            raise MalformedInstance(where, "instance_id", problem, remedy)
        first_seen[instance.instance_id] = where
        instances.append(instance)
    return instances


def _from_jsonl(path: Path) -> list[Instance]:
    return _build(_jsonl_rows(path), "fix or remove the line")


def _jsonl_rows(path: Path) -> Iterator[tuple[str, Any]]:
    with path.open("rb") as lines:  # bytes: a line that is not UTF-8 is named by its number
        for number, raw in enumerate(lines, start=1):
            where = f"{path}:{number}"
            line = _utf8(raw, where)
            if not line.strip():
                continue
            try:
                yield where, json.loads(line)
            except json.JSONDecodeError as error:
                raise MalformedInstance(where, None,
                                        f"is not valid JSON ({error.msg} at column {error.colno})") from None
            except RecursionError:
                raise MalformedInstance(where, None, "nests lists or objects too deep to parse") from None


def _utf8(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise MalformedInstance(where, None, f"is not UTF-8 text (byte {raw[error.start:error.start + 1]!r} at "
                                f"column {error.start + 1})", "save the file as UTF-8") from None


def _from_json(path: Path) -> list[Instance]:
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line, byte = raw[:error.start].count(b"\n") + 1, raw[error.start:error.start + 1]
        raise MalformedInstance(f"{path}:{line}", None, f"is not UTF-8 text (byte {byte!r})",
                                "save the file as UTF-8") from None
    try:
        records = json.loads(text)
    except json.JSONDecodeError as error:
        raise MalformedInstance(f"{path}:{error.lineno}", None, f"is not valid JSON ({error.msg})",
                                "fix the file") from None
    except RecursionError:
        raise MalformedInstance(str(path), None, "nests lists or objects too deep to parse", "fix the file") from None
    if not isinstance(records, list):
        raise MalformedInstance(str(path), None, f"is not a JSON list of records (got {type(records).__name__})",
                                "fix the file")
    return _build(((f"{path}:{n}", r) for n, r in enumerate(records, start=1)), "fix or remove that record")


def _from_parquet(path: Path) -> list[Instance]:
    try:
        rows = pq.read_table(path).to_pylist()
    except pa.ArrowInvalid as error:  # truncated, or another format under a .parquet name
        raise MalformedInstance(str(path), None, f"is not a readable Parquet table ({error})",
                                "write it again, e.g. with raydist.tasks.write_instances") from None
    return _build(((f"{path}:{n}", _drop_nulls(r)) for n, r in enumerate(rows, start=1)), "fix or remove that row")


def _drop_nulls(row: dict) -> dict:
    # A Parquet table has one column set for all rows; a null is a field the row never had.
    return {key: value for key, value in row.items() if value is not None}


def _from_hf(spec: str, default_split: str) -> list[Instance]:
    name, _, split = spec.partition("@")
    split = split or default_split
    try:
        import datasets
    except ImportError as error:
        raise RuntimeError(f"hf://{spec}: the 'datasets' package is not installed; "
                           "pip install 'raydist[hf]'") from error
    try:
        rows = datasets.load_dataset(name, split=split)
    except Exception as error:  # datasets raises many unrelated types for "offline" / "no such dataset"
        raise RuntimeError(
            f"cannot load Hugging Face dataset {name!r} split {split!r} ({type(error).__name__}: {error}); "
            "it needs network access to the hub, or download it and point benchmark.source at a .jsonl/.parquet file"
        ) from error
    return _build(((f"hf://{name}@{split}:{n}", dict(r)) for n, r in enumerate(rows, start=1)), "fix the dataset")


def _select(instances: list[Instance], ids: Sequence[str], source: str) -> list[Instance]:
    if isinstance(ids, str):
        raise ValueError(f"ids must be a list of instance ids, not the string {ids!r}")
    wanted = set(ids)
    known = {instance.instance_id for instance in instances}
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise ValueError(f"{source}: unknown instance ids {', '.join(map(repr, unknown))}; check benchmark.ids")
    return [instance for instance in instances if instance.instance_id in wanted]


def write_instances(instances: Sequence[Instance], path: str | Path) -> Path:
    """Write ``to_record()`` of each instance as ``.jsonl``, ``.json`` or ``.parquet`` (by suffix).

    The file reads back with :func:`load_instances` into equal instances (except that
    Parquet cannot keep a ``None`` inside ``extra``). It is replaced at once (a reader, or a
    write that fails half-way, never leaves part of it). Raises ``ValueError`` for another
    suffix, ``OSError`` for the write.
    """
    path = Path(path)
    records = [instance.to_record() for instance in instances]
    if path.suffix == ".jsonl":
        atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    elif path.suffix == ".json":
        atomic_write_text(path, json.dumps(records, ensure_ascii=False, indent=1) + "\n")
    elif path.suffix == ".parquet":
        _write_parquet(records, path)
    else:
        raise ValueError(f"{path}: cannot write instances to {path.suffix!r}; use .jsonl, .json or .parquet")
    return path


def _write_parquet(records: list[dict], path: Path) -> None:
    # Columns are the union of all records' fields; pyarrow infers each column's type.
    names = list(dict.fromkeys(key for record in records for key in record))
    table = pa.table({name: pa.array([record.get(name) for record in records]) for name in names})
    atomic_write_parquet(path, table)
