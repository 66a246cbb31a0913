"""The one writer of result rows: every way a unit ends (a result, an image that could not be
built, a view preparation that failed, a Ray task that died) reaches the run directory through
``RowSink.write``, once per attempt, and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from raydist.outcomes import ERRORS, INFRASTRUCTURE_ERROR, OUTCOMES


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
            "level": unit.level, "seed": unit.seed, "config_hash": unit.config_hash, "resolved": False,
            "error": failure.error[:4000], "outcome": failure.outcome, "error_cause": failure.cause,
            "attempts": attempts}


def task_failure(error: str) -> Failure:
    """A Ray task that died (worker killed, node lost): an infrastructure error."""
    return Failure(INFRASTRUCTURE_ERROR, "ray_task_failed", error)


class RowSink:
    """Writes the rows of one store (``ResultStore`` or anything with ``write_row``) and tells
    ``on_written`` (e.g. a progress bar's ``finished``) about each; counts rows by outcome.

    ``write`` refuses a row whose ``outcome`` is not of the taxonomy (``ValueError``) and, through
    ``raydist.results.schema.normalise_row``, a row with a key the schema lacks (``KeyError``)."""

    def __init__(self, store, on_written: Callable[[dict], None] | None = None) -> None:
        self.store = store
        self.on_written = on_written
        self.counts: dict[str, int] = {}

    def write(self, row: Mapping) -> None:
        """Write ``row`` durably (``ResultStore.write_row``; raises what it raises)."""
        if row.get("outcome") not in OUTCOMES:
            raise ValueError(f"result row {row.get('key')!r} has outcome {row.get('outcome')!r}; "
                             f"one of {', '.join(OUTCOMES)}")
        self.store.write_row(row)
        self.counts[row["outcome"]] = self.counts.get(row["outcome"], 0) + 1
        if self.on_written is not None:
            self.on_written(dict(row))

    def fail(self, unit, failure: Failure) -> None:
        """Write the error row of ``unit`` ended by ``failure``."""
        self.write(error_row(unit, failure))
