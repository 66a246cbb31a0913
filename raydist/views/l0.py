"""Level 0: the canonical view, the repository and problem statement as published."""

from __future__ import annotations

from raydist.views.base import Prepared, RepoFiles, View, ViewOptions
from raydist.views.instance import ViewInstance


def canonical(view: View, instance: ViewInstance, repo: RepoFiles, seed: int, options: ViewOptions,
              prepared: Prepared) -> View:
    """Return ``view`` unchanged: L0 is the baseline every other level is compared to.

    SchrodingerRepo §IV (RQ1) compares the canonical instance against each level.
    """
    return view
