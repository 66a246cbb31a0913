"""One benchmark instance as data: SWE-bench fields plus the recipe that builds its image.

Field names follow the SWE-bench datasets (``instance_id``, ``FAIL_TO_PASS``,
``PASS_TO_PASS``, ``test_patch``, ``problem_statement``...). Instances that reproduce
offline also carry a :class:`Recipe`: the PyPI source release the repository is
unpacked from, the exact dependency pins, and (for built-in instances) the patch that
injects the defect. Parsing of records found in the wild lives in
:mod:`raydist.tasks.records`.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from raydist._util.hashing import stable_hash

DEFAULT_INSTALL: tuple[str, ...] = ("pytest==8.3.4",)
"""Pins used when a record with an ``sdist`` gives no ``install`` list: the tests need only pytest."""

DEFAULT_PYTHON = "3.11"


class MalformedInstance(ValueError):
    """A record that cannot become an :class:`Instance`.

    ``source`` locates the record (``file:line`` for JSONL, ``file:record`` otherwise),
    ``field`` names the offending field (``None`` when the record as a whole is bad,
    e.g. invalid JSON) and ``problem`` says what is wrong.
    """

    def __init__(self, source: str, field: str | None, problem: str, remedy: str = "fix or remove the line",
                 instance_id: str | None = None):
        self.source, self.field, self.problem, self.instance_id = source, field, problem, instance_id
        # repr() keeps the message on one line whatever the id holds (a newline, an escape).
        who = f"instance {instance_id!r}: " if instance_id else ""
        where = f"field {field!r} " if field else ""
        super().__init__(f"{source}: {who}{where}{problem}; {remedy}")


class MissingTestCommand(ValueError):
    """An instance without ``test_cmd`` was asked to run its tests."""


@dataclass(frozen=True)
class Sdist:
    """A source release on PyPI: ``name``/``version`` as on PyPI, ``sha256`` (64 hex) of the file."""

    name: str
    version: str
    sha256: str
    filename: str | None = None


@dataclass(frozen=True)
class Recipe:
    """Everything that determines an instance image (spec: offline SWE-bench reproduction).

    ``install`` are exact pip requirement pins installed before the repository;
    ``install_repo`` is the shell command that installs the unpacked release itself
    (``None``: the tests run from the sdist root and need no install);
    ``injected_patch`` is a git-style diff applied to the sdist root to create the
    defect ("" for real upstream bugs); ``python`` is the interpreter version ``X.Y``.
    """

    sdist: Sdist
    install: tuple[str, ...]
    install_repo: str | None
    injected_patch: str = ""
    python: str = DEFAULT_PYTHON

    def key(self) -> str:
        """16 hex chars of the sha256 of this recipe's canonical JSON; names the instance image."""
        return stable_hash(dataclasses.asdict(self), ensure_ascii=False)


@dataclass(frozen=True)
class Instance:
    """One SWE-bench-format task.

    ``FAIL_TO_PASS``/``PASS_TO_PASS`` are tuples of test ids as printed by the test
    runner; ``recipe`` is ``None`` when the instance needs an upstream SWE-bench image;
    ``test_cmd`` is "" when the source gave none (SWE-bench Lite rows), which is an
    error only once the tests are run (:meth:`require_test_cmd`); ``extra`` keeps every
    other field of the source record unchanged.
    """

    instance_id: str
    repo: str
    base_commit: str
    patch: str
    test_patch: str
    problem_statement: str
    FAIL_TO_PASS: tuple[str, ...]
    PASS_TO_PASS: tuple[str, ...]
    version: str
    test_cmd: str
    recipe: Recipe | None
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Grading keys statuses by test id: a repeated id would be counted once yet required
        # twice, so "1 of 2 passed" could read as resolved. No instance may hold one.
        problem = repeated_test_id(self.FAIL_TO_PASS, self.PASS_TO_PASS)
        if problem is not None:
            raise ValueError(f"instance {self.instance_id!r}: {problem[0]} {problem[1]}")

    def to_record(self) -> dict:
        """The record in SWE-bench field names; ``instance_from_record`` reads it back equal.

        ``FAIL_TO_PASS``/``PASS_TO_PASS`` are JSON strings, as in the official datasets;
        the recipe is flattened into ``sdist`` (dict), ``install`` (list),
        ``install_repo``, ``injected_patch`` and ``python``.
        """
        record: dict[str, Any] = {
            "instance_id": self.instance_id,
            "repo": self.repo,
            "base_commit": self.base_commit,
            "patch": self.patch,
            "test_patch": self.test_patch,
            "problem_statement": self.problem_statement,
            "FAIL_TO_PASS": json.dumps(list(self.FAIL_TO_PASS)),
            "PASS_TO_PASS": json.dumps(list(self.PASS_TO_PASS)),
            "version": self.version,
        }
        if self.test_cmd:
            record["test_cmd"] = self.test_cmd
        if self.recipe is not None:
            record |= _recipe_fields(self.recipe)
        return record | {k: v for k, v in self.extra.items() if k not in record}

    def content_hash(self) -> str:
        """16 hex chars of the sha256 of ``to_record()`` as canonical JSON: changes with any field."""
        return stable_hash(self.to_record(), ensure_ascii=False)

    def require_test_cmd(self) -> str:
        """``test_cmd``, or :class:`MissingTestCommand` naming the instance when there is none."""
        if not self.test_cmd:
            raise MissingTestCommand(
                f"instance {self.instance_id!r} has no 'test_cmd' (SWE-bench rows carry none); "
                "add a 'test_cmd' field to its record, e.g. "
                "'python -m pytest -rA -p no:cacheprovider <test file>'"
            )
        return self.test_cmd


def repeated_test_id(fail_to_pass: tuple[str, ...], pass_to_pass: tuple[str, ...]) -> tuple[str, str] | None:
    """``(field, problem)`` for the first test id listed twice (within ``FAIL_TO_PASS``,
    within ``PASS_TO_PASS``, or in both), else ``None``. SWE-bench grades each id once, and a
    test cannot both have to start passing and already pass."""
    for name, ids in (("FAIL_TO_PASS", fail_to_pass), ("PASS_TO_PASS", pass_to_pass)):
        seen: set[str] = set()
        for test_id in ids:
            if test_id in seen:
                return name, f"lists {test_id!r} twice"
            seen.add(test_id)
    both = sorted(set(fail_to_pass) & set(pass_to_pass))
    if both:
        return "PASS_TO_PASS", f"lists {both[0]!r}, which FAIL_TO_PASS lists too"
    return None


def _recipe_fields(recipe: Recipe) -> dict[str, Any]:
    sdist = dataclasses.asdict(recipe.sdist)
    if sdist["filename"] is None:
        del sdist["filename"]
    return {
        "sdist": sdist,
        "install": list(recipe.install),
        "install_repo": recipe.install_repo,
        "injected_patch": recipe.injected_patch,
        "python": recipe.python,
    }
