"""A progress bar of units: done / running / resolved / errors (tqdm, to stderr)."""

from __future__ import annotations

from tqdm import tqdm

from raydist.outcomes import ERRORS, RESOLVED


class UnitProgress:
    """Counts units as their last row arrives; ``failed`` counts rows whose ``outcome`` is an
    error (``raydist.outcomes.ERRORS``: input, infrastructure, bug), ``resolved`` the resolved."""

    def __init__(self, total: int, already_done: int = 0, desc: str = "units", errors: int = 0):
        """``already_done`` units count as done, ``errors`` of them as errors."""
        self.failed = errors
        self.resolved = 0
        self._running = 0
        self.bar = tqdm(total=total, initial=already_done, desc=desc, unit="unit", dynamic_ncols=True)
        self._refresh()

    def running(self, n: int) -> None:
        self._running = n
        self._refresh()

    def finished(self, row: dict) -> None:
        self.failed += 1 if row.get("outcome") in ERRORS else 0
        self.resolved += 1 if row.get("outcome") == RESOLVED else 0
        self._running = max(0, self._running - 1)
        self.bar.update(1)
        self._refresh()

    def _refresh(self) -> None:
        self.bar.set_postfix(running=self._running, errors=self.failed, resolved=self.resolved, refresh=True)

    def close(self) -> None:
        self.bar.close()
