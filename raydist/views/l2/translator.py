"""The L2 bidirectional translator (SchrodingerRepo §III-C, §III-F).

Observations go original -> virtual (``to_view``): every whole identifier token of the
mapping is replaced, wherever it stands, so file contents, ``ls``/``find``/``grep`` output,
paths (``toolz/itertoolz.py``), dotted modules, tracebacks and pytest test ids all come out
in the virtual namespace. Commands go virtual -> original (``to_original``): only
namespace-bearing words change (arguments, quoted code such as ``python -c '...'``, sed
expressions, grep patterns, heredoc bodies), never a command head (§III-F): virtual
words are drawn outside the shell's command vocabulary, so a head is never a virtual name.

Replacement scans the text once for identifier runs (``[A-Za-z0-9_]+``) and looks each run
up in the mapping, so ``merge`` never rewrites ``merge_sorted`` or ``remerge``, no replaced
text is translated twice, and the cost does not grow with the number of names. Two kinds of
runtime output glue a name to a prefix, and both are recognised: a C escape printed in a
``repr`` (``'x\\nmerge_sorted'``: a run right after a backslash whose first letter is an
escape letter is looked up without that letter) and an ANSI colour code (``grep
--color=always``: the code is its own token). Because virtual names never equal a
repository token, ``to_original(to_view(y)) == y`` for any text ``y`` and
``to_view(to_original(x)) == x`` for text ``x`` free of original names.

What the agent is shown is audited elsewhere (``raydist.views.audit``), against the original
repository's names and not against these tables, so a name the mapping misses is found.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from raydist.views.l2.mapping import NameMapping

_TOKENS = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|[A-Za-z0-9_]+")
_ESCAPES = frozenset("abfnrtv")


def _rewrite(text: str, table: Mapping[str, str]) -> tuple[str, int]:
    """``text`` with every identifier run found in ``table`` replaced, and how many were."""
    count = 0

    def one(match: re.Match) -> str:
        nonlocal count
        token = match.group()
        new = table.get(token)
        if new is not None:
            count += 1
            return new
        start = match.start()
        if start and token[0] in _ESCAPES and text[start - 1] == "\\" and len(token) > 1:
            new = table.get(token[1:])
            if new is not None:
                count += 1
                return token[0] + new
        return token

    return _TOKENS.sub(one, text), count


class NamespaceTranslator:
    """Translator of one L2 view; satisfies ``raydist.views.base.Translator``.

    ``mapping.forward`` maps original identifiers to virtual ones, ``mapping.backward`` back.
    """

    def __init__(self, mapping: NameMapping) -> None:
        self.mapping = mapping

    def __repr__(self) -> str:
        return f"NamespaceTranslator({len(self.mapping.forward)} names)"

    def to_view(self, text: str) -> str:
        """``text`` (an observation, a file, a path) with every original name made virtual."""
        return _rewrite(text, self.mapping.forward)[0] if self.mapping.forward else text

    def to_original(self, command: str) -> str:
        """A bash ``command`` written in virtual names, rewritten to run on the original repo.

        Paths, dotted modules, quoted code (``python -c '...'``), sed expressions, grep
        patterns and heredoc bodies change wherever a virtual name stands. Command heads
        (``grep``, ``python``, ``sed``...) never change: no virtual word is a command name
        (``raydist.views.vocabulary.COMMAND_WORDS``). File text translates the same way, so
        ``to_original(render_file(p, t)) == t``.
        """
        return _rewrite(command, self.mapping.backward)[0] if self.mapping.backward else command
