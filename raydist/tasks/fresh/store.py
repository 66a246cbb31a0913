"""The builder's two append-only JSONL files: the instances and the log of every candidate tried.

Each line is written whole and synced before the next candidate, so a build that is killed
loses at most the candidate it was testing; the same command then reads both files and goes on
where it stopped (a half-written last line is dropped).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from raydist._util.files import atomic_write_text


def read_lines(path: Path) -> list[dict]:
    """The complete JSON lines of ``path`` ([] when absent). A last line cut short by a killed
    writer is dropped from the file too, so the next append starts on a fresh line."""
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8")
    rows, good = [], []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            break
        good.append(line)
    kept = "".join(f"{line}\n" for line in good)
    if kept != text:
        atomic_write_text(path, kept)
    return rows


def append_line(path: Path, row: dict) -> None:
    """Append ``row`` as one JSON line and sync it to disk."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def log_path(out: Path) -> Path:
    """The candidates' log beside the instances file: ``fresh.jsonl`` -> ``fresh.log.jsonl``."""
    return out.with_name(out.name.removesuffix(".jsonl") + ".log.jsonl")
