"""The files of one unit besides its row: its trajectory and its grading log.

A unit may run on any node of the cluster, whose disk is not the driver's. So the unit task
never writes into the run directory: the agent saves its trajectory into a scratch folder on
the node (``scratch_trajectory``), and the task returns every file's text with its row under
``files`` (``{"trajectories/<name>": text, "grading/<name>": text}``, paths relative to the
run directory); the driver writes them (``raydist.results.ResultStore.write_row``). Each text
is kept to a bound (``bounded``) so one runaway log cannot swamp the object store.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from raydist.cluster.unit_key import RunUnit

#: Characters kept of a trajectory (mini-swe-agent JSON; observations are already truncated
#: by the agent, so only a pathological run comes near it).
TRAJECTORY_LIMIT = 32 * 2**20
#: Characters kept of a grading log (patch application and test output).
GRADING_LOG_LIMIT = 4 * 2**20

TRAJECTORIES = "trajectories"
GRADING = "grading"


def unit_stem(unit: RunUnit) -> str:
    """The stem of a unit's file names: the instance id made safe for a file name (an id is
    data from an instance file and must never steer where raydist writes), level, seed, the
    attempt (``__a<n>``, after the first), key."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", unit.instance_id).lstrip("._")[:120] or "instance"
    attempt = f"__a{unit.attempt}" if unit.attempt else ""
    return f"{slug}__{unit.level}__s{unit.seed}{attempt}__{unit.key[:8]}"


def trajectory_name(unit: RunUnit) -> str:
    """File name of a unit's trajectory in ``trajectories/``."""
    return f"{unit_stem(unit)}.traj.json"


def grading_log_name(unit: RunUnit) -> str:
    """File name of a unit's grading log in ``grading/``."""
    return f"{unit_stem(unit)}.grading.log"


def grading_log(unit: RunUnit, log: str) -> dict[str, str]:
    """``{"grading/<name>": text}`` of the unit's grading log ``log`` (bounded)."""
    return {f"{GRADING}/{grading_log_name(unit)}": bounded(log, GRADING_LOG_LIMIT)}


def bounded(text: str, limit: int) -> str:
    """``text`` when it has at most ``limit`` characters; else its head and tail around a
    marker line (``cut_marker``), ``limit`` characters in all. A cut trajectory is no longer
    valid JSON: the marker says why. Raises ``ValueError`` for a ``limit`` too small to hold
    the marker and some text."""
    if len(text) <= limit:
        return text
    marker = cut_marker(len(text), limit)
    keep = limit - len(marker)
    if keep < 2:
        raise ValueError(f"limit {limit} cannot hold the truncation marker ({len(marker)} characters)")
    head = keep // 2
    return f"{text[:head]}{marker}{text[len(text) - (keep - head):]}"


def cut_marker(size: int, limit: int) -> str:
    """The line ``bounded`` puts where it cut a text of ``size`` characters to ``limit``."""
    return (f"\n[raydist: the middle of this file was cut here: it had {size} characters, "
            f"a unit's file keeps {limit}]\n")


@contextmanager
def scratch_trajectory(unit: RunUnit) -> Iterator[Path]:
    """A path on this node's disk for the unit's trajectory while it runs (its folder exists;
    removed with what is in it on the way out)."""
    with tempfile.TemporaryDirectory(prefix="raydist-unit-") as folder:
        yield Path(folder) / trajectory_name(unit)


def read_trajectory(path: Path) -> dict[str, str]:
    """``{"trajectories/<name>": text}`` of the trajectory at ``path`` (bounded), or ``{}`` when
    the agent never saved one."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return {}
    return {f"{TRAJECTORIES}/{path.name}": bounded(text, TRAJECTORY_LIMIT)}
