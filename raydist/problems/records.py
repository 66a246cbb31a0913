"""The run directory of a DyCodeEval launch: one JSON record per finished item, so a killed
launch loses only what was in flight and the same command resumes.

Layout of ``<run_dir>``::

    settings.json        what the variants depend on besides their ids (checked on resume)
    scenarios.json       the scenario pool (generate)
    variants/<id>.json   one variant record per (seed problem, generation seed) (generate)
    checks/<id>.json     the canonical check of one accepted variant (validate)
    completions/<key>.json  n scored completions of one prompt by one model (execute)
    llm_calls.jsonl      every model call, appended (a log; no phase reads it)

Each phase reads back only its own records (to skip finished items) and hands what it made
to the next phase in memory.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from raydist._util.files import atomic_write_json
from raydist._util.hashing import stable_hash

__all__ = ["RUN_SETTINGS", "SCORING_VERSION", "RecordStore", "RunDirMismatch", "append_calls", "check_run_dir",
           "completion_key", "run_dir_mismatch"]

#: Version of how an answer becomes a scored program (``raydist.problems.evaluate``); a change
#: that can move a score bumps it, so a resumed run scores its items again (the model's
#: answers come back from the request cache).
SCORING_VERSION = 3

#: Generation settings a variant depends on beyond its id (seed problem, generation seed,
#: generator): a run directory keeps one set of them.
RUN_SETTINGS = ("domains", "scenarios", "temperature", "seed")


class RecordStore:
    """The JSON records of one folder, by file stem."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def load(self) -> dict[str, dict]:
        """``{stem: record}`` of every readable ``*.json``, in name order (an unreadable file
        is skipped: its item runs again)."""
        out = {}
        for path in sorted(self.folder.glob("*.json")) if self.folder.is_dir() else []:
            try:
                out[path.stem] = json.loads(path.read_text())
            except json.JSONDecodeError:
                continue
        return out

    def put(self, key: str, record: dict) -> None:
        """Write ``record`` as ``<key>.json`` at once (a reader sees the old or the new file)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.folder / f"{key}.json", record)


def completion_key(model: str, item_id: str, n: int, temperature: float, max_tokens: int) -> str:
    """24 hex chars naming one (model, item, sampling, ``SCORING_VERSION``) evaluation."""
    return stable_hash({"model": model, "item": item_id, "n": n, "t": temperature, "max": max_tokens,
                        "scoring": SCORING_VERSION}, 24)


class RunDirMismatch(ValueError):
    """The run directory holds variants made under other generation settings."""


def check_run_dir(run_dir: Path, settings: dict) -> None:
    """Record ``settings`` (what the variants depend on besides their ids) in
    ``<run_dir>/settings.json`` on the first launch; on a later one, refuse to mix
    (:func:`run_dir_mismatch`). Raises RunDirMismatch naming the settings that differ and what
    to do."""
    refused = run_dir_mismatch(run_dir, settings)
    if refused is not None:
        raise refused
    if (run_dir / "settings.json").is_file():
        try:
            if isinstance(json.loads((run_dir / "settings.json").read_text()), dict):
                return
        except json.JSONDecodeError:
            pass
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(run_dir / "settings.json", settings)


def run_dir_mismatch(run_dir: Path, settings: dict) -> RunDirMismatch | None:
    """The refusal to launch into ``run_dir`` with ``settings``, read only (the launcher's plan
    asks before Hydra makes any folder): a ``RunDirMismatch`` naming the settings that differ
    when ``<run_dir>/settings.json`` records others (finished variants made under them would be
    reused as if they were this launch's), else None."""
    path = run_dir / "settings.json"
    if not path.is_file():
        return None
    try:
        before = json.loads(path.read_text())
    except json.JSONDecodeError:
        return None
    if not isinstance(before, dict) or before == settings:
        return None
    changed = sorted(k for k in settings.keys() | before.keys() if settings.get(k) != before.get(k))
    return RunDirMismatch(f"{run_dir} holds variants made with other settings ({', '.join(changed)} differ); choose "
                          "another output_root for these settings, or remove that run directory to start over")


def append_calls(run_dir: Path, calls: Iterable[dict[str, Any]]) -> None:
    """Append LLM call records to ``llm_calls.jsonl`` (every call, failed ones included)."""
    calls = list(calls)
    if calls:
        run_dir.mkdir(parents=True, exist_ok=True)
        with open(run_dir / "llm_calls.jsonl", "a") as handle:
            handle.writelines(json.dumps(c, sort_keys=True, default=str) + "\n" for c in calls)
