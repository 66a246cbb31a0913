"""Content hashes: of JSON-able values (unit keys, cache keys) and of files (model weights,
instance files)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from raydist._util.files import atomic_write_json

__all__ = ["file_sha256", "stable_hash"]


def stable_hash(value: Any, length: int = 16) -> str:
    """Hex digest (``length`` chars) of the canonical JSON of ``value`` (sorted keys)."""
    blob = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:length]


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
