"""What a launch spent on model calls and what its budget kept from starting: the record the
driver writes as ``budget.json`` in the run directory and the lines the summary (and
``raydist report``) shows for it. Pure: no Ray (the ledger itself is
``raydist.models.admission``)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from raydist._util.files import atomic_write_text

BUDGET_FILE = "budget.json"

EXIT_BUDGET_SPENT = 3
"""Exit status of a launch its budget stopped while units were left (and none ended in an
error, which is 1): every unit that ran is counted, the rest are named as not started."""

SHOWN = 20
"""Units named in the summary; ``budget.json`` names them all."""


@dataclass(frozen=True)
class Spending:
    """One launch's model spending.

    Attributes:
        budget: ``{"usd", "tokens"}`` as set (None: no bound).
        totals: ``raydist.models.admission.UsageTotals.as_dict()`` of every call of the launch.
        stopped: why the budget stopped the launch (``"budget.tokens=500 spent (512 tokens)"``),
            None when every planned unit could start.
        not_started: ``{"key", "name"}`` of each unit (or problems item) the budget kept from
            starting, in plan order (they have no record: the next launch runs them); ``name``
            says which (``"<instance_id> <level> seed <seed>"`` for a unit).
    """

    budget: dict
    totals: dict
    stopped: str | None = None
    not_started: tuple = field(default_factory=tuple)

    def write(self, run_dir: Path) -> None:
        """Write ``budget.json`` in ``run_dir`` (the last launch's, replaced by each launch)."""
        atomic_write_text(Path(run_dir) / BUDGET_FILE, json.dumps(asdict(self), indent=1) + "\n")

    @classmethod
    def read(cls, run_dir: Path) -> Spending | None:
        """The ``budget.json`` of ``run_dir``, None when it has none or it cannot be read."""
        try:
            data = json.loads((Path(run_dir) / BUDGET_FILE).read_text())
            return cls(data["budget"], data["totals"], data.get("stopped"), tuple(data.get("not_started") or ()))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def summary_line(self) -> str:
        """One line for the top of a summary: why the launch stopped and how many it did not
        start; "" when the budget did not stop it."""
        if not (self.stopped and self.not_started):
            return ""
        return f"Stopped by the budget ({self.stopped}): {len(self.not_started)} not started: budget spent."

    def markdown(self) -> str:
        """The summary's section: spending against the budget, and when the budget stopped the
        launch, how many units were not started and which (the first ``SHOWN``)."""
        t, b = self.totals, self.budget
        bound = ", ".join(f"budget.{k}={v:g}" for k, v in b.items() if v is not None) or "no budget"
        spent = (f"{t.get('calls', 0)} model calls: {t.get('input_tokens', 0)} input + "
                 f"{t.get('output_tokens', 0)} output tokens, {t.get('usd', 0.0):.4f} USD ({bound}).")
        lines = ["", "## Model calls and budget", "", spent]
        if t.get("unpriced"):
            lines.append(f"{t['unpriced']} responses could not be priced by litellm and count 0 USD.")
        by = t.get("by_purpose") or {}
        if by:
            lines += ["", "| purpose | calls | input tokens | output tokens | cost (USD) |",
                      "|---|---:|---:|---:|---:|"]
            lines += [f"| {p} | {v['calls']} | {v['input_tokens']} | {v['output_tokens']} | {v['usd']:.4f} |"
                      for p, v in by.items()]
        if self.stopped and self.not_started:
            head = (f"**Stopped by the budget: {self.stopped}.** {len(self.not_started)} not started: budget spent "
                    "(nothing recorded for them; the same command with a larger budget runs them):")
            lines += ["", head, ""]
            lines += [f"- {u['name']}" for u in self.not_started[:SHOWN]]
            if len(self.not_started) > SHOWN:
                lines.append(f"- ... and {len(self.not_started) - SHOWN} more (all in {BUDGET_FILE})")
        return "\n".join(lines) + "\n"
