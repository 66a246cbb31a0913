"""The progress bar's counts as the scheduler and the rows report them (``raydist.cluster.scheduler.UnitProgress``)."""

from __future__ import annotations

import io

from raydist.cluster.scheduler import UnitProgress


def last_line(stream: io.StringIO) -> str:
    return stream.getvalue().split("\r")[-1].strip()


def test_a_finished_unit_with_its_successor_submitted_shows_every_unit_in_flight_then_none_at_the_end():
    stream = io.StringIO()
    progress = UnitProgress(total=3, mininterval=0, file=stream)
    progress.running(2)
    progress.finished({"outcome": "resolved"})  # the scheduler submits the third unit right after
    assert "1/3" in last_line(stream) and "failed=0, resolved=1, running=2]" in last_line(stream)
    progress.running(2)
    progress.finished({"outcome": "bug"})
    progress.running(1)
    assert "failed=1, resolved=1, running=1]" in last_line(stream)
    progress.finished({"outcome": "unresolved"})
    progress.running(0)
    progress.close()
    assert "3/3" in last_line(stream) and "failed=1, resolved=1, running=0]" in last_line(stream)
