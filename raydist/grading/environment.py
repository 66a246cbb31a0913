"""The environment every test command raydist grades with runs under.

A test's outcome must depend on the patch, never on the host the grading ran on. Three
settings of the environment reach into a test's result and vary from host to host (SWE-bench
issue #602): the time zone (``time.localtime``, naive ``datetime.now``), the hash seed of
``str``/``bytes`` (the iteration order of a set of strings, ``hash("x") % n``) and the locale
(``locale.getpreferredencoding``, the default encoding of ``open``, ``sys.getfilesystemencoding``,
collation). raydist pins all three (issue 31, "deterministic grading"):

    TZ=UTC  PYTHONHASHSEED=0  LC_ALL=C.UTF-8  LANG=C.UTF-8

``C.UTF-8`` is built into glibc (Debian's ``libc-bin``), so it exists in every image without a
locale package. The mapping is given to ``Sandbox.exec(env=...)`` (an exec's environment, not
the command string) for every test run of grading: raydist's own images
(``raydist.grading.container``), official SWE-bench images (``raydist.grading.official``; an eval
script that sets a variable itself keeps its own), host trees (``raydist.grading.host``: fresh
tasks, ``raydist.tasks.measure``) and the programs of the problems pipeline
(``raydist.problems.execute``). It is part of every unit's key (``raydist.driver.plan``), so
rows graded under another environment are never reused.
"""
from __future__ import annotations

from types import MappingProxyType

#: Variable -> value, read-only. Give it as ``env=dict(GRADING_ENV)``.
GRADING_ENV = MappingProxyType({
    "TZ": "UTC",
    "PYTHONHASHSEED": "0",
    "LC_ALL": "C.UTF-8",
    "LANG": "C.UTF-8",
})
