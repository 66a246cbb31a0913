"""The L2 bidirectional translator and its leak audit (SchrodingerRepo §III-C, §III-F).

Observations go original -> virtual (``to_view``): every whole identifier token of the
mapping is replaced, wherever it stands, so file contents, ``ls``/``find``/``grep`` output,
paths (``toolz/itertoolz.py``), dotted modules, tracebacks and pytest test ids all come out
in the virtual namespace. Commands go virtual -> original (``to_original``): only
namespace-bearing words change (arguments, quoted code such as ``python -c '...'``, sed
expressions, grep patterns, heredoc bodies), never a command head (§III-F): virtual
words are drawn outside the shell's command vocabulary, so a head is never a virtual name.

Replacement is one compiled alternation, longest name first, matched only between
identifier boundaries (``[A-Za-z0-9_]`` on neither side), so ``merge`` never rewrites
``merge_sorted`` or ``remerge`` and no replaced text is translated twice. Because virtual
names never equal a repository token, ``to_original(to_view(y)) == y`` for any text
``y`` and ``to_view(to_original(x)) == x`` for text ``x`` free of original names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from raydist.views.l2_mapping import NameMapping

_BOUNDARY = "A-Za-z0-9_"


def name_pattern(names: Mapping[str, str]) -> re.Pattern[str] | None:
    """One alternation of ``names``' keys, longest first, between identifier boundaries."""
    if not names:
        return None
    alternation = "|".join(re.escape(n) for n in sorted(names, key=lambda n: (-len(n), n)))
    return re.compile(rf"(?<![{_BOUNDARY}])(?:{alternation})(?![{_BOUNDARY}])")


class NamespaceTranslator:
    """Translator of one L2 view; satisfies ``raydist.views.base.Translator``.

    ``mapping.forward`` maps original identifiers to virtual ones, ``mapping.backward`` back.
    """

    def __init__(self, mapping: NameMapping) -> None:
        self.mapping = mapping
        self._to_view = name_pattern(mapping.forward)
        self._to_orig = name_pattern(mapping.backward)

    def __repr__(self) -> str:
        return f"NamespaceTranslator({len(self.mapping.forward)} names)"

    def to_view(self, text: str) -> str:
        """``text`` (an observation, a file, a path) with every original name made virtual."""
        if self._to_view is None:
            return text
        forward = self.mapping.forward
        return self._to_view.sub(lambda m: forward[m.group()], text)

    def to_original(self, command: str) -> str:
        """A bash ``command`` written in virtual names, rewritten to run on the original repo.

        Paths, dotted modules, quoted code (``python -c '...'``), sed expressions, grep
        patterns and heredoc bodies change wherever a virtual name stands. Command heads
        (``grep``, ``python``, ``sed``...) never change: no virtual word is a command name
        (``l2_names.COMMAND_WORDS``). File text translates the same way, so
        ``to_original(render_file(p, t)) == t``.
        """
        if self._to_orig is None:
            return command
        backward = self.mapping.backward
        return self._to_orig.sub(lambda m: backward[m.group()], command)

    def leak_count(self, text: str) -> int:
        """Occurrences of remapped original names in ``text`` (0 for anything ``to_view`` made)."""
        if self._to_view is None:
            return 0
        return sum(1 for _ in self._to_view.finditer(text))
