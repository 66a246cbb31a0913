"""A progress bar of units across the cluster: done of planned, running, failed, resolved, and
the rate and ETA of this launch (tqdm, to stderr).

Counts are kept as the rows arrive (constant work per row, never a pass over all rows), and
the bar is redrawn at most every ``mininterval`` seconds, so a sweep of 10,000 fast units
does not spend its time drawing.
"""

from __future__ import annotations

import time

from tqdm import tqdm

from raydist.outcomes import ERRORS, RESOLVED


class UnitProgress:
    """Counts units as their last row arrives; ``failed`` counts rows whose ``outcome`` is an
    error (``raydist.outcomes.ERRORS``: input, infrastructure, bug), ``resolved`` the resolved,
    ``running`` the Ray tasks in flight (``running(n)``, from the scheduler). tqdm's rate and
    ETA count only this launch's units (those ``already_done`` are its ``initial``)."""

    def __init__(self, total: int, already_done: int = 0, desc: str = "units", errors: int = 0,
                 mininterval: float = 0.5, file=None):
        """``already_done`` units count as done, ``errors`` of them as failed; ``file``: the
        stream (default stderr)."""
        self.failed = errors
        self.resolved = 0
        self._running = 0
        self.bar = tqdm(total=total, initial=already_done, desc=desc, unit="unit", dynamic_ncols=True,
                        mininterval=mininterval, file=file)
        self._refresh(force=True)

    @property
    def done(self) -> int:
        """Units with their last row (this launch's and those done before)."""
        return int(self.bar.n)

    def running(self, n: int) -> None:
        """``n`` units are in flight now (the scheduler says so after each round of
        submissions); redrawn when ``mininterval`` has passed since the last drawing."""
        if n != self._running:
            self._running = n
            due = time.time() - self.bar.last_print_t >= self.bar.mininterval
            self._refresh(force=due)

    def finished(self, row: dict) -> None:
        """The last row of a unit arrived (an error to be retried is not its last). The count
        in flight is left to ``running``: the scheduler submits the next unit at once, so
        counting this one off here would show one unit fewer than run whenever it draws."""
        self.failed += 1 if row.get("outcome") in ERRORS else 0
        self.resolved += 1 if row.get("outcome") == RESOLVED else 0
        self._refresh()
        self.bar.update(1)  # draws when mininterval has passed since the last drawing

    def _refresh(self, force: bool = False) -> None:
        self.bar.set_postfix(running=self._running, failed=self.failed, resolved=self.resolved, refresh=force)

    def close(self) -> None:
        """Draw the final counts and release the line."""
        self._refresh(force=True)
        self.bar.close()
