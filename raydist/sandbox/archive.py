"""In-memory tar archives: the format of Docker's put_archive / get_archive."""
from __future__ import annotations

import io
import tarfile
import time
from collections.abc import Iterable, Iterator, Mapping


def pack_files(members: Mapping[str, str | bytes], mode: int = 0o644, *, owner: tuple[int, int] = (0, 0),
               below: str = "") -> bytes:
    """Return a tar archive holding ``{path: content}``; str content is UTF-8 encoded.

    Entries belong to ``owner`` (uid, gid). For a non-root owner every parent directory
    strictly below ``below`` (a path prefix such as ``"testbed"``) gets an entry of its own
    (mode 0755, same owner): Docker would otherwise create missing parents owned by root, where
    the owner could not add files.
    """
    buf = io.BytesIO()
    now = time.time()
    uid, gid = owner
    with tarfile.open(fileobj=buf, mode="w") as tar:
        if uid != 0:
            for directory in _parents(members, below.strip("/")):
                info = tarfile.TarInfo(directory)
                info.type, info.mode, info.mtime, info.uid, info.gid = tarfile.DIRTYPE, 0o755, now, uid, gid
                tar.addfile(info)
        for path, content in members.items():
            data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime, info.uid, info.gid = len(data), mode, now, uid, gid
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _parents(paths, below: str) -> list[str]:
    """Directories holding ``paths`` that lie strictly below ``below``, parents first."""
    found: set[str] = set()
    for path in paths:
        parts = path.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            directory = "/".join(parts[:depth])
            if len(directory) > len(below) and directory.startswith(below + "/" if below else ""):
                found.add(directory)
    return sorted(found, key=lambda d: (d.count("/"), d))


def unpack_single(archive: bytes, label: str) -> bytes:
    """Return the content of the one regular file in ``archive`` (from get_archive).

    Raises ``IsADirectoryError`` naming ``label`` when the archive holds a directory.
    """
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        first = tar.next()
        if first is None or not first.isfile():
            raise IsADirectoryError(f"{label} is not a regular file in the sandbox")
        stream = tar.extractfile(first)
        if stream is None:  # a regular member always has a stream
            raise IsADirectoryError(f"{label} is not a regular file in the sandbox")
        return stream.read()


class ChunkReader(io.RawIOBase):
    """A file object over an archive's chunks (an iterable of ``bytes``), read once, front to back."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self._buffer = b""

    def readable(self) -> bool:
        return True

    def readinto(self, target) -> int:  # type: ignore[override]
        while not self._buffer:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._buffer = chunk
        n = min(len(target), len(self._buffer))
        target[:n], self._buffer = self._buffer[:n], self._buffer[n:]
        return n

