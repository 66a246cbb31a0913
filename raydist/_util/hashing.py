"""Content hashes: of JSON-able values (unit keys, cache keys) and of files (model weights,
instance files)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from raydist._util.files import atomic_write_json

__all__ = ["file_sha256", "named_files_digest", "stable_hash"]


def stable_hash(value: Any, length: int = 16, *, ensure_ascii: bool = True) -> str:
    """Hex digest (``length`` chars) of the sha256 of the canonical JSON of ``value`` (sorted
    keys, no spaces, UTF-8; values JSON cannot hold as their ``str``). ``ensure_ascii=False``
    writes non-ASCII characters as themselves, not ``\\u`` escapes: the instance, recipe and
    seed-problem hashes were defined so, and keep their values."""
    blob = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=ensure_ascii)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:length]


def named_files_digest(folder: Path, names: Iterable[str], length: int = 16) -> str:
    """Hex digest (``length`` chars) of the sha256 of ``name NUL bytes NUL`` for each of
    ``names`` in sorted order, the bytes of ``folder/name`` or ``<absent>`` for a missing file."""
    digest = hashlib.sha256()
    for name in sorted(names):
        path = folder / name
        digest.update(name.encode() + b"\0" + (path.read_bytes() if path.is_file() else b"<absent>") + b"\0")
    return digest.hexdigest()[:length]


def file_sha256(path: str | Path, *, cache: str | Path | None = None) -> str:
    """Hex sha256 of the bytes of file ``path``.

    With ``cache`` (a JSON file), the digest is kept there under the file's resolved path,
    size and mtime (ns), so a multi-gigabyte model file is read once, not at every launch;
    any change of size or mtime reads it again. Raises ``FileNotFoundError`` for a missing file."""
    path = Path(path)
    stat = path.stat()
    mark = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    known: dict = {}
    if cache is not None:
        try:
            known = json.loads(Path(cache).read_text())
        except (OSError, ValueError):
            known = {}
        if isinstance(known.get(mark), str):
            return known[mark]
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    value = digest.hexdigest()
    if cache is not None:
        _store_digest(Path(cache), {**known, mark: value})
    return value


def _store_digest(cache: Path, known: dict) -> None:
    """Best effort: a cache that cannot be written only costs a re-hash next time."""
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(cache, known)
    except OSError:
        pass
