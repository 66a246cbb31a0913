"""The DyCodeEval pipeline of one launch (one benchmark), on Ray, resumable.

seeds -> scenario pool (§3.2) -> one variant per (seed problem, generation seed): context
generator, prompt rewriter, validator -> the canonical solution run on each accepted
variant's tests in the sandbox -> every model under test: n completions per seed problem and
per accepted variant, each run in the sandbox -> pass@k, DyPass@k (§5), acceptance rates,
diversity (§4.4) -> tables and a printed summary.

Every stage's output is one JSON file per item under the run directory (``variants/``,
``completions/``), written when the item finishes, so a killed launch loses only what was in
flight and the same command resumes. Every LLM call is cached on disk by request
(``raydist.problems.llm``), so regenerating a finished item costs nothing.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from raydist.cluster.plan import stable_hash


@dataclass
class ProblemsJob:
    """Everything one launch needs, resolved from the config (``from_config``)."""

    dataset: str
    source: str | None
    ids: list | None
    limit: int | None
    pipeline: str
    generation: dict
    evaluation: dict
    execution: dict
    analysis: dict
    local_models: dict
    run_dir: Path
    cache_dir: Path
    docker_host: str | None = None
    base_image: str | None = None
    ray: dict = field(default_factory=dict)


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` atomically (rename), creating folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w") as handle:
        json.dump(data, handle, sort_keys=True)
    os.replace(tmp, path)


def read_json_dir(folder: Path) -> dict[str, dict]:
    """``{file stem: record}`` of every readable ``*.json`` in ``folder`` (an unreadable file
    is skipped: its item runs again)."""
    out = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            out[path.stem] = json.loads(path.read_text())
        except json.JSONDecodeError:
            continue
    return out


def completion_key(model: str, item_id: str, n: int, temperature: float, max_tokens: int) -> str:
    """24 hex chars naming one (model, item, sampling) evaluation."""
    return stable_hash({"model": model, "item": item_id, "n": n, "t": temperature, "max": max_tokens}, 24)
