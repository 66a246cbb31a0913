"""Level 2 seeded subword remapping (SchrodingerRepo §III-C).

Each identifier splits into subwords (``merge_sorted`` -> ``merge``, ``sorted``;
``InstanceProperty`` -> ``Instance``, ``Property``; ``LONG_VERSION_PY`` -> ``LONG``,
``VERSION``, ``PY``). Every distinct subword (case-folded) maps to one pronounceable virtual
word of two to four syllables, drawn from a generator seeded by ``(repository identity, seed, subword)``, so the same
subword maps the same way everywhere and in every instance of the repository. Case style,
separators, leading/trailing underscores and digits are kept, so ``merge_sorted`` becomes
e.g. ``toval_rimeku`` and ``InstanceProperty`` ``BasoriNuvet``.

Subwords naming test-framework conventions (``test``, ``setup``...) map to themselves, so
the virtual test suite is still collected by pytest under its virtual names.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from raydist.views.vocabulary import BUILTINS, COMMAND_WORDS, KEYWORDS, STDLIB, SUBWORD, split_subwords

KEPT_SUBWORDS = frozenset({"test", "tests", "setup", "teardown", "conftest", "fixture", "fixtures", "up", "down"})
_ONSETS = "b d f g k l m n p r s t v z".split() + ["br", "dr", "gl", "kr", "pl", "st", "tr"]
_VOWELS = "a e i o u".split()
_CODAS = ["", "", "", "n", "l", "r", "s", "k"]
_MAX_DRAWS = 1000


def _case_like(word: str, model: str) -> str:
    if model.isupper() and len(model) > 1:
        return word.upper()
    if model[0].isupper():
        return word.capitalize()
    return word


def _pronounceable(rng: random.Random, length: int) -> str:
    # Two syllables at least: a one-syllable word (``li``, ``fi``, ``du``) is too often a short
    # option cluster (``grep -li``) or a shell word, which ``to_original`` would then rewrite.
    syllables = max(2, min(4, round(length / 2.8)))
    parts = [rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(syllables)]
    return "".join(parts) + rng.choice(_CODAS)


def _subword_rng(identity: str, seed: int, subword: str, attempt: int) -> random.Random:
    digest = hashlib.sha256(f"{identity}\0{seed}\0{subword}\0{attempt}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


@dataclass(frozen=True)
class NameMapping:
    """A bijection between original and virtual identifiers.

    ``forward``: original -> virtual; ``backward``: its inverse; ``subwords``: case-folded
    original subword -> virtual subword.
    """

    forward: Mapping[str, str]
    backward: Mapping[str, str]
    subwords: Mapping[str, str]


def map_subwords(subwords: Iterable[str], identity: str, seed: int, avoid: frozenset[str]) -> dict[str, str]:
    """Case-folded subword -> virtual word, avoiding ``avoid`` (case-folded) and each other.

    Deterministic in ``(identity, seed)``; raises RuntimeError if no free word is found.
    """
    taken = {w.lower() for w in avoid}
    out: dict[str, str] = {}
    for sub in sorted(set(subwords)):
        if sub in KEPT_SUBWORDS or sub.isdigit():
            out[sub] = sub
            continue
        for attempt in range(_MAX_DRAWS):
            word = _pronounceable(_subword_rng(identity, seed, sub, attempt), len(sub))
            if word not in taken and word != sub:
                break
        else:
            raise RuntimeError(f"L2: no free virtual word for subword {sub!r} after {_MAX_DRAWS} draws")
        taken.add(word)
        out[sub] = word
    return out


def virtual_name(name: str, subwords: Mapping[str, str]) -> str:
    """``name`` with each subword replaced by its virtual word in the same case, separators kept."""
    return SUBWORD.sub(lambda m: _case_like(subwords[m.group().lower()], m.group()), name)


def build_mapping(names: Iterable[str], tokens: Iterable[str], identity: str, seed: int) -> NameMapping:
    """The L2 mapping of ``names`` for ``(identity, seed)``.

    ``tokens`` are every identifier of the repository: no virtual word equals one of their
    subwords, so no virtual name equals a repository token, keyword, builtin or standard
    library module name. Raises ValueError if the result is not a bijection.
    """
    names = sorted(set(names))
    reserved = set(tokens) | KEYWORDS | BUILTINS | STDLIB | COMMAND_WORDS
    avoid = frozenset({s.lower() for t in reserved for s in split_subwords(t)} | {t.lower() for t in reserved})
    subwords = map_subwords((s.lower() for n in names for s in split_subwords(n)), identity, seed, avoid)
    # A name made only of kept subwords (``tests``) stays itself and is not remapped.
    forward = {n: v for n in names if (v := virtual_name(n, subwords)) != n}
    backward = {v: n for n, v in forward.items()}
    clashes = sorted(v for v in backward if v in reserved)
    if len(backward) != len(forward) or clashes:
        raise ValueError(f"L2 mapping for {identity!r} seed {seed} is not a clean bijection: {clashes[:5]}")
    return NameMapping(forward=forward, backward=backward, subwords=subwords)


def case_variants(name: str) -> set[str]:
    """Spellings of ``name`` with the same subwords in another case: all lower, ALL UPPER and
    Capitalised (``inflection`` -> ``INFLECTION``, ``Inflection``), minus ``name`` itself and
    minus spellings that split into other subwords (``MergeSorted`` lower-cased is one word)."""
    parts = [s.lower() for s in split_subwords(name)]
    variants = {name.lower(), name.upper(), name[:1].upper() + name[1:], name.capitalize()}
    return {v for v in variants if v != name and [s.lower() for s in split_subwords(v)] == parts}


def with_case_variants(mapping: NameMapping, keep: Iterable[str], names: Iterable[str]) -> NameMapping:
    """``mapping`` plus the ``case_variants`` of each remapped name of ``names``, mapped through the
    same subwords (``Inflection`` -> ``Bakimo`` beside ``inflection`` -> ``bakimo``), so a name
    in a title, a constant or a sentence start is hidden like the name itself.

    Only ``names`` (the repository's identity tokens) get variants: a variant of any constant
    (``IGNORE`` -> ``Ignore``) would rename ordinary words in prose. A variant in ``keep``
    (names L2 must leave as they are, reserved words) or already mapped is not added; neither
    is one whose virtual spelling another name already has.
    """
    keep = set(keep)
    forward = dict(mapping.forward)
    backward = dict(mapping.backward)
    for name in sorted(set(names) & set(mapping.forward)):
        for variant in sorted(case_variants(name)):
            if variant in forward or variant in keep:
                continue
            virtual = virtual_name(variant, mapping.subwords)
            if virtual in backward or virtual == variant:
                continue
            forward[variant], backward[virtual] = virtual, variant
    return NameMapping(forward=forward, backward=backward, subwords=mapping.subwords)
