"""The ledger of the images raydist's launches used: when each was last used and by which launches.

It is one JSON file, ``<cache_dir>/images/ledger.json``::

    {"images": {"sha256:...": {"tags": [...], "last_use": 1796501514.0,
                               "origin": "built" | "pulled" | "present", "launches": ["<run_dir>", ...]}}}

A launch stamps every image it used with the time it started (``stamp``); ``origin`` says whether
some launch built or pulled it (then ``raydist images prune`` may remove it) or found it already
there. The ledger is written atomically under a file lock, so launches sharing a ``cache_dir``
take turns (issue 31, item 5).
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from raydist._util.files import atomic_write_json
from raydist.sandbox.sources import file_lock

#: The most recent launches kept per image.
MAX_LAUNCHES = 20
#: What an entry's ``origin`` may be.
ORIGINS = ("built", "pulled", "present")
#: The first Unix second after 9999-12-31, past which no ``last_use`` can be shown as a date.
LAST_SECOND = 253402300800


def ledger_path(cache_dir: str | Path) -> Path:
    """``<cache_dir>/images/ledger.json``."""
    return Path(cache_dir).expanduser() / "images" / "ledger.json"


def read_ledger(cache_dir: str | Path) -> dict[str, dict]:
    """Image id -> its entry (module docstring); ``{}`` when there is no ledger yet. Raises
    ``ValueError`` naming the file (and the image) when it is not a ledger: damaged JSON, another
    shape, or an entry whose fields have other types (``_entry_problem``)."""
    path = ledger_path(cache_dir)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} is not an image ledger ({exc}); move it away and the next launch starts a "
                         "new one") from exc
    images = data.get("images") if isinstance(data, dict) else None
    if not isinstance(images, dict):
        raise ValueError(f"{path} is not an image ledger (no 'images' object); move it away and the next launch "
                         "starts a new one")
    for image_id, entry in images.items():
        problem = _entry_problem(entry)
        if problem:
            raise ValueError(f"{path} is not an image ledger (image {image_id}: {problem}); move it away and the "
                             "next launch starts a new one")
    return images


def _entry_problem(entry: object) -> str | None:
    """What makes ``entry`` no ledger entry (module docstring), or None: ``tags`` and ``launches``
    lists of strings, ``last_use`` Unix seconds a date can show (years 1970..9999), ``origin`` one
    of ``ORIGINS``."""
    if not isinstance(entry, dict):
        return f"{type(entry).__name__} instead of an object"
    for key in ("tags", "launches"):
        if not isinstance(entry.get(key), list) or not all(isinstance(x, str) for x in entry[key]):
            return f"{key!r} is not a list of strings"
    last_use = entry.get("last_use")
    if isinstance(last_use, bool) or not isinstance(last_use, (int, float)) or not 0 <= last_use < LAST_SECOND:
        return f"'last_use' {last_use!r} is not Unix seconds"
    if entry.get("origin") not in ORIGINS:
        return f"'origin' {entry.get('origin')!r} is none of {', '.join(ORIGINS)}"
    return None


def stamp(cache_dir: str | Path, used: Iterable[dict], *, when: float, launch: str) -> None:
    """Record that ``launch`` (its run directory) used the images ``used`` (``images.json``
    entries: ``tag``, ``id``, ``new``) at ``when`` (Unix seconds, the launch's start). An image's
    ``last_use`` only moves forward; its ``origin`` becomes ``built`` (a raydist tag) or
    ``pulled`` once a launch added it (``new``), and stays so."""
    path = ledger_path(cache_dir)
    with file_lock(path.with_suffix(".lock")):
        images = read_ledger(cache_dir)
        for image in used:
            entry = images.setdefault(image["id"], {"tags": [], "last_use": when, "origin": "present", "launches": []})
            entry["tags"] = sorted({*entry["tags"], image["tag"]})
            entry["last_use"] = max(float(entry["last_use"]), when)
            if image.get("new") and entry["origin"] == "present":
                entry["origin"] = "built" if image["tag"].startswith("raydist/") else "pulled"
            entry["launches"] = [*(x for x in entry["launches"] if x != launch), launch][-MAX_LAUNCHES:]
        atomic_write_json(path, {"images": images}, indent=1)
