"""In-memory tar archives: the format of Docker's put_archive / get_archive."""
from __future__ import annotations

import io
import tarfile
import time
from collections.abc import Mapping


def pack_files(members: Mapping[str, str | bytes], mode: int = 0o644) -> bytes:
    """Return a tar archive holding ``{path: content}``; str content is UTF-8 encoded."""
    buf = io.BytesIO()
    now = time.time()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path, content in members.items():
            data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(data), mode, now
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def unpack_single(archive: bytes, label: str) -> bytes:
    """Return the content of the one regular file in ``archive`` (from get_archive).

    Raises ``IsADirectoryError`` naming ``label`` when the archive holds a directory.
    """
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        first = tar.next()
        if first is None or not first.isfile():
            raise IsADirectoryError(f"{label} is not a regular file in the sandbox")
        return tar.extractfile(first).read()
