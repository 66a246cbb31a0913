"""Where run directories and shared caches live when not on the driver's disk: ``storage=``.

A ``Storage`` is one folder of a ``pyarrow.fs`` filesystem named by a URI
(``pyarrow.fs.FileSystem.from_uri``): a local or shared path, ``file:///...``, ``s3://``,
``gs://``, ``hdfs://``... Everything raydist keeps there goes through it: reading and writing
whole files (a reader sees the old file or the new one, never a part), listing a folder, and
the two halves of a mirror, ``push`` (a local folder up) and ``pull`` (missing files down).

The layout under a storage root: ``<root>/<run directory relative to output_root>/...`` (the
run directories, as under ``output_root``) and ``<root>/_cache/<kind>/...`` (``CACHE_FOLDER``:
the view preparations, the DyCodeEval answers), shared by every launch given the same root.
"""

from __future__ import annotations

import os
import posixpath
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow.fs as pafs

from raydist._util.files import atomic_write_bytes

__all__ = ["CACHE_FOLDER", "SCHEMES", "JsonCache", "Storage", "StorageCopyError", "StorageError", "cache_storage",
           "check_storage_uri", "mirror_of", "mirrored", "open_storage", "pull", "push"]

#: URI schemes ``pyarrow.fs.FileSystem.from_uri`` resolves ("" is a plain path).
SCHEMES = ("", "file", "s3", "gs", "gcs", "hdfs", "viewfs", "abfs", "abfss")

#: The folder of a storage root that holds the shared caches.
CACHE_FOLDER = "_cache"


class StorageError(ValueError):
    """A ``storage=`` that names no usable folder; the message names the setting and what to give."""


class StorageCopyError(OSError):
    """A local file that could not be copied to a storage (full, read-only, unreachable):
    ``OSError(errno, message)`` with the cause's ``errno`` (``ENOSPC`` for a full one); the
    message names the file, its place in the storage and why, once."""

    def __str__(self) -> str:
        return str(self.strerror)


def check_storage_uri(uri: str, setting: str = "storage") -> str:
    """``uri`` with a plain path made absolute (``~`` expanded); checks the scheme only, without
    any I/O. Raises ``StorageError`` naming ``setting`` for an empty value or a scheme pyarrow
    does not know (``SCHEMES``)."""
    text = str(uri).strip()
    if not text:
        raise StorageError(f"{setting} is empty: give a folder or a URI (file:///..., s3://bucket/prefix, gs://..., "
                           "hdfs://...), or leave it out for the run directory on this disk")
    scheme = text.partition("://")[0].lower() if "://" in text else ""
    if scheme not in SCHEMES:
        raise StorageError(f"{setting}={uri!r}: unknown scheme {scheme!r}; give a folder or a URI of "
                           f"{', '.join(s + '://' for s in SCHEMES if s)}")
    return os.path.abspath(os.path.expanduser(text)) if not scheme else text


def open_storage(uri: str, setting: str = "storage") -> Storage:
    """The ``Storage`` at ``uri``, its folder created and proven writable by writing and
    removing a probe file. Raises ``StorageError`` naming ``setting`` and why (unknown scheme,
    a filesystem pyarrow cannot open here, a folder that cannot be written)."""
    storage = Storage(check_storage_uri(uri, setting))
    probe = f".raydist-probe-{uuid.uuid4().hex}"
    try:
        storage.filesystem()
        storage.write_bytes(probe, b"")
        storage.delete(probe)
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise StorageError(f"{setting}={uri!r} cannot be written: {type(exc).__name__}: {first}; give a writable "
                           "folder or a reachable URI (credentials come from the environment)") from exc
    return storage


class Storage:
    """One folder of a ``pyarrow.fs`` filesystem, by URI. Paths given to its methods are
    relative, with ``/`` separators. Pickles as its URI, so a copy sent to another process opens
    the filesystem there (with that process's credentials)."""

    def __init__(self, uri: str) -> None:
        self.uri = str(uri).rstrip("/") or "/"
        self._fs = None
        self._root = ""

    def __reduce__(self):
        return Storage, (self.uri,)

    def __repr__(self) -> str:
        return f"Storage({self.uri!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Storage) and other.uri == self.uri

    def __hash__(self) -> int:
        return hash(self.uri)

    def filesystem(self):
        """``(pyarrow filesystem, root path on it)``; resolved once. Raises what
        ``pyarrow.fs.FileSystem.from_uri`` raises."""
        if self._fs is None:
            self._fs, self._root = pafs.FileSystem.from_uri(self.uri)
        return self._fs, self._root

    def child(self, relative: str) -> Storage:
        """The storage of the folder ``relative`` below this one."""
        return Storage(f"{self.uri.rstrip('/')}/{relative.strip('/')}")

    def local_path(self) -> Path | None:
        """The folder on this machine's disk when the filesystem is local, else None."""
        fs, root = self.filesystem()
        return Path(root) if isinstance(fs, pafs.LocalFileSystem) else None

    def _path(self, relative: str) -> str:
        _, root = self.filesystem()
        return posixpath.join(root, relative) if relative else root

    def read_bytes(self, relative: str) -> bytes | None:
        """The bytes of file ``relative``, or None when it does not exist. Raises ``OSError``."""
        fs, _ = self.filesystem()
        try:
            with fs.open_input_stream(self._path(relative)) as handle:
                return handle.read()
        except FileNotFoundError:
            return None

    def write_bytes(self, relative: str, data: bytes) -> None:
        """Replace file ``relative`` by ``data`` at once (parents created): on a local disk
        through a temporary file and a rename, on an object store as one put. Raises ``OSError``."""
        local = self.local_path()
        if local is not None:
            target = local / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(target, data)
            return
        fs, _ = self.filesystem()
        path = self._path(relative)
        fs.create_dir(posixpath.dirname(path), recursive=True)
        with fs.open_output_stream(path) as handle:
            handle.write(data)

    def upload(self, local: Path, relative: str) -> None:
        """Copy the local file ``local`` to ``relative`` (whole, at once). Raises ``OSError``."""
        self.write_bytes(relative, Path(local).read_bytes())

    def delete(self, relative: str) -> None:
        """Remove file ``relative`` if it exists."""
        fs, _ = self.filesystem()
        try:
            fs.delete_file(self._path(relative))
        except FileNotFoundError:
            pass

    def files(self, relative: str = "") -> dict[str, int]:
        """``{path relative to this folder: size}`` of every file below ``relative`` (``{}``
        when it does not exist)."""
        fs, root = self.filesystem()
        selector = pafs.FileSelector(self._path(relative), recursive=True, allow_not_found=True)
        return {posixpath.relpath(info.path, root): int(info.size or 0) for info in fs.get_file_info(selector)
                if info.type == pafs.FileType.File}


class JsonCache:
    """JSON records as files ``<key>.json`` of one storage folder (a local path or a ``Storage``):
    ``get`` and ``put``, each whole at once, so processes sharing the folder never see a part."""

    def __init__(self, root: str | os.PathLike | Storage, *, indent: int | None = None) -> None:
        self.storage = root if isinstance(root, Storage) else Storage(os.path.abspath(os.fspath(root)))
        self.indent = indent

    def get(self, key: str) -> dict | None:
        """The record stored under ``key``, or None (also for a file that is not a JSON object,
        which the caller computes again). Raises ``OSError`` when the storage cannot be read."""
        import json

        data = self.storage.read_bytes(f"{key}.json")
        try:
            record = None if data is None else json.loads(data)
        except ValueError:
            return None
        return record if isinstance(record, dict) else None

    def put(self, key: str, record: dict) -> None:
        """Store ``record`` under ``key`` (sorted keys, UTF-8). Raises ``OSError`` (a full disk,
        an unreachable store), ``TypeError`` for a value JSON cannot hold."""
        import json

        self.storage.write_bytes(f"{key}.json", json.dumps(record, sort_keys=True, indent=self.indent,
                                                           ensure_ascii=False).encode("utf-8"))


def cache_storage(storage: str | None, cache_dir: str | os.PathLike, *kind: str) -> Storage:
    """Where the shared cache ``kind`` (e.g. ``"views"``, ``"problems", "llm"``) lives:
    ``<storage>/_cache/<kind>`` when ``storage`` is set, else ``<cache_dir>/<kind>`` on the
    driver's disk (the layout before ``storage=`` existed)."""
    relative = "/".join(kind)
    if storage:
        return Storage(check_storage_uri(storage)).child(f"{CACHE_FOLDER}/{relative}")
    return Storage(os.path.abspath(os.path.expanduser(os.fspath(cache_dir)))).child(relative)


def mirror_of(storage: str | None, run_dir: str | os.PathLike, output_root: str | os.PathLike) -> Storage | None:
    """The folder ``run_dir`` is mirrored to: ``<storage>/<run_dir relative to output_root>``
    (the same layout as below ``output_root``); None when ``storage`` is not set. Raises
    ``StorageError`` naming ``storage`` when ``run_dir`` is not below ``output_root`` (a
    ``hydra.run.dir`` set elsewhere): then it has no place in the storage's layout."""
    if not storage:
        return None
    relative = os.path.relpath(os.path.abspath(run_dir), os.path.abspath(os.path.expanduser(os.fspath(output_root))))
    if relative == "." or relative.startswith(".."):
        raise StorageError(f"storage={storage!r}: the run directory {run_dir} is not below output_root={output_root}; "
                           "the storage keeps run directories by their path below output_root")
    return Storage(check_storage_uri(storage)).child(Path(relative).as_posix())


@contextmanager
def mirrored(mirror: Storage | None, folder: str | os.PathLike) -> Iterator[None]:
    """With a ``mirror`` (``mirror_of``): ``folder`` is first filled with the files the mirror
    holds and it lacks (``pull``: a launch on another machine resumes from them), and whatever
    happens in the block, its files go back to the mirror at the end (``push``). Without one,
    nothing. Raises ``OSError`` when the storage cannot be read, ``StorageCopyError`` when it
    cannot be written (the local files stay: a later ``push`` copies what it lacks)."""
    if mirror is None:
        yield
        return
    pulled = pull(mirror, folder)
    if pulled:
        print(f"storage: {pulled} files of {mirror.uri} copied into {folder}", flush=True)
    try:
        yield
    finally:
        push(folder, mirror)


def _local_files(folder: Path) -> dict[str, Path]:
    return {p.relative_to(folder).as_posix(): p for p in folder.rglob("*") if p.is_file()}


#: Local files a mirror never copies: the launch lock is this machine's, temporaries are partial.
def _mirrored(relative: str) -> bool:
    name = relative.rsplit("/", 1)[-1]
    return name != ".launch.lock" and not (name.startswith(".") and name.endswith(".tmp"))


def push(folder: str | os.PathLike, storage: Storage, paths: Iterable[str | os.PathLike] | None = None) -> int:
    """Copy files of the local ``folder`` to ``storage``: the files ``paths`` (absolute, or
    relative to ``folder``) when given, else every file the storage lacks or holds with another
    size, and every top-level table and report (rewritten by each launch). Returns the number
    copied. Raises ``StorageCopyError`` naming the file that could not be copied; those copied stay."""
    root = Path(folder)
    if paths is not None:
        chosen = {Path(p).resolve().relative_to(root.resolve()).as_posix(): Path(p) if Path(p).is_absolute()
                  else root / p for p in paths}
    else:
        remote = storage.files()
        chosen = {rel: path for rel, path in _local_files(root).items()
                  if remote.get(rel) != path.stat().st_size or "/" not in rel or rel.startswith(("preds/", ".hydra/"))}
    copied = 0
    for rel, path in sorted(chosen.items()):
        if not _mirrored(rel) or not path.is_file():
            continue
        try:
            storage.upload(path, rel)
        except OSError as exc:
            why = exc.strerror or str(exc)
            raise StorageCopyError(exc.errno, f"could not copy {path} to storage {storage.uri}/{rel}: {why}") from exc
        copied += 1
    return copied


def pull(storage: Storage, folder: str | os.PathLike) -> int:
    """Copy to the local ``folder`` every file of ``storage`` it lacks (a file it has is this
    machine's newer copy and stays). Returns the number copied. Raises ``OSError``."""
    root = Path(folder)
    have = _local_files(root) if root.is_dir() else {}
    copied = 0
    for rel in sorted(storage.files()):
        if rel in have or not _mirrored(rel):
            continue
        data = storage.read_bytes(rel)
        if data is None:
            continue
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(target, data)
        copied += 1
    return copied
