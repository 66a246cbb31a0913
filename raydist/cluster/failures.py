"""Why a unit has no result, and the row it gets instead: an image that could not be built, a
view preparation that failed, a Ray task that died (``Failure``, ``error_row``). The executor's
one writer of rows (``raydist.cluster.execute.RowSink``) writes them like any other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from raydist.outcomes import ERRORS, INFRASTRUCTURE_ERROR


@dataclass(frozen=True)
class Failure:
    """Why a unit has no result: ``outcome`` (one of ``raydist.outcomes.ERRORS``), ``cause``
    (the ``error_cause`` token) and ``error`` (the message)."""

    outcome: str
    cause: str
    error: str

    def __post_init__(self) -> None:
        if self.outcome not in ERRORS:
            raise ValueError(f"Failure.outcome={self.outcome!r}; one of {', '.join(ERRORS)}")

    @classmethod
    def of(cls, fields: Mapping) -> Failure:
        """From ``{"outcome", "error_cause", "error"}`` (``raydist.cluster.unit.error_fields``)."""
        return cls(str(fields["outcome"]), str(fields["error_cause"]), str(fields["error"]))

    def prefixed(self, text: str) -> Failure:
        """The same failure with ``text`` before its message."""
        return Failure(self.outcome, self.cause, f"{text}{self.error}")


def error_row(unit, failure: Failure, *, attempts: int = 1) -> dict:
    """The result row of ``unit`` (a ``RunUnit``) that could not run; the message is kept to
    4000 characters. Infrastructure errors run again (within the retry bound, and on resume)."""
    return {"key": unit.key, "instance_id": unit.instance_id, "model": unit.model, "agent": unit.agent,
            "level": unit.level, "seed": unit.seed, "attempt": unit.attempt, "config_hash": unit.config_hash,
            "resolved": False, "error": failure.error[:4000], "outcome": failure.outcome, "error_cause": failure.cause,
            "attempts": attempts}


def task_failure(error: str) -> Failure:
    """A Ray task that died (worker killed, node lost): an infrastructure error."""
    return Failure(INFRASTRUCTURE_ERROR, "ray_task_failed", error)
