"""Running ``python -m raydist.launch`` from a test, as a user would, and reading what it wrote.

``launch`` runs one launch in a subprocess; ``runs`` reads the runs table of one of its run
directories. ``BuiltinLaunch`` is the session's shared oracle and null launch over every
built-in instance (the ``builtin_launch`` fixture in ``conftest.py``): tests that only read
results assert on it instead of launching their own (tests/README.md).
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]

#: Every level with one L1 paraphrase attempt by the embedded model and deterministic L4
#: rewrites, so the suite stays within CI's time; the defaults differ only in attempt counts.
FULL = ("+sweep=full_levels", "view.l1_attempts=1", "view.l4_llm_attempts=0")
#: The levels of ``+sweep=full_levels``.
LEVELS = {"L0", "L1", "L2", "L3", "L4", "full"}
#: The seeds of the shared launch: two, enough to see that seeds give different views.
SEEDS = (0, 1)
#: The last part of the shared launch's run directories: its levels and seeds.
SHARED_VIEW = "implemented__s0-1"


def launch(out: Path, *overrides: str, timeout: float = 1500) -> subprocess.CompletedProcess:
    """``python -m raydist.launch output_root=OUT OVERRIDES...`` from the repository root; Hydra's
    ``--flags`` among ``overrides`` go first. Returns the finished process (text output)."""
    flags = [o for o in overrides if o.startswith("--")]
    rest = [o for o in overrides if not o.startswith("--")]
    cmd = [sys.executable, "-m", "raydist.launch", *flags, f"output_root={out}", *rest]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False)


def runs(out: Path, benchmark: str, agent: str, view: str, model: str = "gemma3-270m") -> list[dict]:
    """The runs table of one launch; ``view`` is its run directory's last part (levels and seeds)."""
    return pq.read_table(out / benchmark / agent / model / view / "runs.parquet").to_pylist()


@dataclass(frozen=True)
class AgentLaunch:
    """One agent's part of the shared launch: the command's overrides, its output and its rows."""

    overrides: tuple[str, ...]
    run_dir: Path
    stdout: str
    rows: list[dict]


@dataclass(frozen=True)
class BuiltinLaunch:
    """The oracle and the null agent on every built-in instance, every level of
    ``+sweep=full_levels`` and seeds 0 and 1, launched once into ``output_root``."""

    output_root: Path
    oracle: AgentLaunch
    null: AgentLaunch


def builtin_launch(output_root: Path) -> BuiltinLaunch:
    """Launches the oracle, then the null agent, over the built-in instances into ``output_root``.

    Raises AssertionError with the launch's last stderr when either exits non-zero, so every
    test reading the shared launch fails with the launch's own reason."""
    parts = {}
    for agent in ("oracle", "null"):
        overrides = (f"agent={agent}", *FULL, f"seeds=[{','.join(map(str, SEEDS))}]")
        done = launch(output_root, *overrides, timeout=3000)
        assert done.returncode == 0, f"the shared {agent} launch failed:\n{done.stderr[-3000:]}"
        run_dir = output_root / "builtin" / agent / "gemma3-270m" / SHARED_VIEW
        parts[agent] = AgentLaunch(overrides, run_dir, done.stdout, runs(output_root, "builtin", agent, SHARED_VIEW))
    return BuiltinLaunch(output_root, parts["oracle"], parts["null"])
