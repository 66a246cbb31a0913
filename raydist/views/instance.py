"""What the views read of an instance, as a protocol: ``raydist.tasks.Instance`` has these fields
(and more), and so does any test double. The views sit below ``raydist.tasks`` in the package
layers (docs/architecture.md), so they name this protocol and never import the class."""

from __future__ import annotations

from typing import Protocol

__all__ = ["ViewInstance"]


class ViewInstance(Protocol):
    """An instance as the views read it: its id, the problem statement the agent is shown, and
    the gold ``patch`` and ``test_patch`` (unified diffs) whose paths L3 and L4 transform. L2
    also reads ``repo`` (``owner/name``) and ``recipe.sdist.name`` when present (by ``getattr``)."""

    @property
    def instance_id(self) -> str: ...

    @property
    def problem_statement(self) -> str: ...

    @property
    def patch(self) -> str: ...

    @property
    def test_patch(self) -> str: ...
