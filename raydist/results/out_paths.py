"""Checking the place a user asked a report or an export to be written, before anything is read
or written: a wrong ``--out`` / ``--output`` is the user's argument (exit status 2, nothing
written), named in one line with what to do."""

from __future__ import annotations

import os
from pathlib import Path


class OutPathError(ValueError):
    """An output argument that names a place that cannot be written; the message names it."""


def check_out_dir(path: str | Path, flag: str) -> Path:
    """``path`` as the folder to write into (it need not exist yet). Returns it absolute with
    symbolic links followed (``Path.resolve``), so what is printed is where the files go.

    Raises ``OutPathError`` naming ``flag`` and ``path`` when it is an existing file that is not a
    folder, lies below such a file, or its nearest existing folder cannot be written to."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise OutPathError(f"{flag} {folder}: is a file, not a folder; give a new or existing folder")
    _check_writable_ancestor(folder, flag)
    return folder.resolve()


def check_out_file(path: str | Path, flag: str) -> Path:
    """``path`` as a file to (over)write. Returns it.

    Raises ``OutPathError`` naming ``flag`` and ``path`` when it is a folder (or another
    non-regular file), when its folder does not exist or is a file, or cannot be written to."""
    file = Path(path)
    if file.exists() and not file.is_file():
        raise OutPathError(f"{flag} {file}: is a folder or a special file, not a file; give a file path")
    parent = file.parent
    if not parent.is_dir():
        raise OutPathError(f"{flag} {file}: its folder {parent} does not exist or is no folder; create it or "
                           "give another file path")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutPathError(f"{flag} {file}: its folder {parent} cannot be written to; give another file path")
    return file


def _check_writable_ancestor(folder: Path, flag: str) -> None:
    """Raise ``OutPathError`` unless the nearest existing ancestor of ``folder`` is a writable folder."""
    for ancestor in (folder, *folder.absolute().parents):
        if ancestor.exists():
            if not ancestor.is_dir():
                raise OutPathError(f"{flag} {folder}: {ancestor} is a file, so no folder can be made below it; "
                                   "give another folder")
            if not os.access(ancestor, os.W_OK | os.X_OK):
                raise OutPathError(f"{flag} {folder}: {ancestor} cannot be written to; give another folder")
            return
