"""Atomic file writes: a reader sees the old file or the new one, never a part, and two writers
never share a temporary name (``tempfile`` beside the target, then ``os.replace``)."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import pyarrow.parquet as pq  # pyarrow loads only for the callers that write tables

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["atomic_write_bytes", "atomic_write_json", "atomic_write_parquet", "atomic_write_text", "temporary_beside"]


@contextmanager
def temporary_beside(path: str | Path, mode: int = 0o644) -> Iterator[tuple[IO[bytes], Path]]:
    """``(binary file, its path)``: a new temporary file in ``path``'s folder with a unique name,
    removed on the way out unless the caller renamed it (``os.replace(tmp, path)``).

    ``mode`` is set on the file (default 0o644, as a plain ``open()`` would give; mkstemp's
    0600 would hide results from other readers). Raises ``OSError`` when the folder is not
    writable or missing."""
    target = Path(path)
    handle = tempfile.NamedTemporaryFile(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp", delete=False)
    tmp = Path(handle.name)
    try:
        os.fchmod(handle.fileno(), mode)
        with handle:
            yield handle, tmp
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write_bytes(path: str | Path, data: bytes, *, mode: int = 0o644) -> None:
    """Replace ``path`` by ``data`` at once (see module doc). Raises ``OSError``."""
    with temporary_beside(path, mode) as (handle, tmp):
        handle.write(data)
        handle.flush()
        os.replace(tmp, path)


def atomic_write_text(path: str | Path, text: str, *, mode: int = 0o644) -> None:
    """Replace ``path`` by ``text`` encoded as UTF-8, at once. Raises ``OSError``."""
    atomic_write_bytes(path, text.encode("utf-8"), mode=mode)


def atomic_write_json(path: str | Path, value: Any, *, indent: int | None = None, mode: int = 0o644) -> None:
    """Replace ``path`` by the JSON of ``value`` (sorted keys, UTF-8, non-ASCII kept), at once.
    Raises ``TypeError`` for a value JSON cannot hold, ``OSError`` for the write."""
    atomic_write_text(path, json.dumps(value, sort_keys=True, indent=indent, ensure_ascii=False), mode=mode)


def atomic_write_parquet(path: str | Path, table: pa.Table, *, mode: int = 0o644) -> None:
    """Replace ``path`` by ``table`` as Parquet, at once. Raises ``OSError``, or what
    ``pyarrow.parquet.write_table`` raises for a table Parquet cannot hold (e.g. a null in a
    non-nullable column); ``path`` is untouched then."""
    with temporary_beside(path, mode) as (handle, tmp):
        pq.write_table(table, handle)
        handle.flush()
        os.replace(tmp, path)
