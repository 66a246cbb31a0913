"""Which source release of a library to build from: the newest sdist on PyPI uploaded after a
date (a release no model trained before that date can have seen), or a pinned version.

``choose_release`` is the rule on PyPI's JSON API payload (``/pypi/<name>/json``);
``pick_release`` fetches the payload and applies it.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime

import requests
from packaging.version import InvalidVersion, Version

PYPI_JSON = "https://pypi.org/pypi/{name}/json"


class ReleaseNotFound(LookupError):
    """No sdist of the library satisfies the request; the message says which and why."""


@dataclass(frozen=True)
class Release:
    """One sdist on PyPI: project ``name``, ``version``, ``filename``, ``sha256`` (64 hex),
    ``upload_time`` (ISO 8601, UTC, as PyPI gives it) and the source ``repo`` (``owner/name``
    on GitHub when the project names one, else ``pypi/<name>``)."""

    name: str
    version: str
    filename: str
    sha256: str
    upload_time: str
    repo: str

    def record(self) -> dict:
        """The provenance fields an instance records."""
        return asdict(self)


def parse_spec(spec: str) -> tuple[str, str | None]:
    """``"six"`` -> ``("six", None)``; ``"six==1.17.0"`` -> ``("six", "1.17.0")``."""
    name, _, version = spec.strip().partition("==")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise ValueError(f"library {spec!r}: expected a PyPI name, optionally with ==VERSION")
    return name, version.strip() or None


def choose_release(payload: dict, *, released_after: date | None, version: str | None = None) -> Release:
    """The release of ``payload`` (PyPI's JSON for one project) to build from: ``version`` when
    given, else the highest final version whose sdist is not yanked; in both cases its sdist
    must have been uploaded on or after ``released_after`` (None: any date).

    Raises :class:`ReleaseNotFound` naming the project, the date and the newest sdist seen.
    """
    name = payload["info"]["name"]
    sdists = []
    for ver, files in payload.get("releases", {}).items():
        for f in files:
            if f.get("packagetype") == "sdist" and not f.get("yanked"):
                sdists.append((ver, f))
    if version is not None:
        sdists = [(v, f) for v, f in sdists if v == version]
        if not sdists:
            raise ReleaseNotFound(f"{name} has no sdist of version {version} on PyPI")
    else:
        sdists = [(v, f) for v, f in sdists if _final(v)]
    if released_after is not None:
        newest = max((f["upload_time_iso_8601"] for _, f in sdists), default="none")
        sdists = [(v, f) for v, f in sdists if _uploaded(f) >= released_after]
        if not sdists:
            which = f"version {version}" if version else "a final release"
            raise ReleaseNotFound(f"{name} has no sdist of {which} uploaded on or after {released_after} "
                                  f"(newest sdist upload: {newest}); lower --released-after or pick a version")
    ver, f = max(sdists, key=lambda vf: (Version(vf[0]), vf[1]["upload_time_iso_8601"]))
    return Release(name=name, version=ver, filename=f["filename"], sha256=f["digests"]["sha256"],
                   upload_time=f["upload_time_iso_8601"], repo=source_repo(payload["info"]))


def pick_release(spec: str, *, released_after: date | None, timeout: float = 30) -> Release:
    """``choose_release`` on PyPI's current payload for ``spec`` (``name`` or ``name==version``)."""
    name, version = parse_spec(spec)
    resp = requests.get(PYPI_JSON.format(name=name), timeout=timeout)
    if resp.status_code == 404:
        raise ReleaseNotFound(f"PyPI has no project {name!r}")
    resp.raise_for_status()
    return choose_release(resp.json(), released_after=released_after, version=version)


def source_repo(info: dict) -> str:
    """``owner/name`` of the first GitHub URL among the project's URLs, else ``pypi/<name>``."""
    urls = [*(info.get("project_urls") or {}).values(), info.get("home_page") or ""]
    for url in urls:
        found = re.match(r"https?://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?$", url or "")
        if found:
            return f"{found[1]}/{found[2]}"
    return f"pypi/{info['name']}"


def _final(version: str) -> bool:
    try:
        parsed = Version(version)
    except InvalidVersion:
        return False
    return not (parsed.is_prerelease or parsed.is_devrelease)


def _uploaded(file: dict) -> date:
    stamp = datetime.fromisoformat(file["upload_time_iso_8601"])
    return stamp.astimezone(UTC).date()
