"""L2 translator round trips on the real toolz 1.0.0 mapping, property-tested (§III-C, §III-F).

Observations go original -> virtual and must come back byte-identical without a single
original name left; commands written in virtual names must run with exactly the original
names at the namespace-bearing places and every shell word (heads, flags, keywords) as typed.
The oracle for a command is the grammar itself: each command is drawn as parts, literal
shell text or a repository name, and rendered once with virtual and once with original names.
"""

from __future__ import annotations

import functools
import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from raydist.views.base import RepoFiles
from raydist.views.l2.mapping import NameMapping, build_mapping
from raydist.views.l2.names import RepoNames, extract_names
from raydist.views.l2.namespace import namespace_mapping
from raydist.views.l2.translator import NamespaceTranslator

IDENTITY = "toolz"
TOKEN = re.compile(r"[A-Za-z0-9_]+")
#: Shell and pytest words the grammar uses as themselves: none may change in either direction.
SHELL_WORDS = ["ls -la", "grep -rn", "grep -ri", "grep -ni", "grep -li", "du -sh", "wc -l", "sort", "uniq -c",
               "head -n 5", "tail -n 3", "git diff", "git log -p", "echo done", "python -m pytest -q -ra",
               "python -m pytest -p no:cacheprovider --tb=short"]


class Name(str):
    """An original repository name standing in a drawn command."""


class Toolz:
    """The toolz 1.0.0 sdist's extracted names, its paths, and its seed-0 mapping and translator
    (a plain class, so a failing example prints one line for it, not every name)."""

    def __init__(self, names: RepoNames, paths: list[str], mapping: NameMapping) -> None:
        self.names, self.paths, self.mapping = names, paths, mapping
        self.translator = NamespaceTranslator(mapping)

    def __repr__(self) -> str:
        return f"Toolz({len(self.mapping.forward)} names, seed 0)"


@pytest.fixture(scope="module")
def toolz(toolz_src) -> Toolz:
    repo = RepoFiles(toolz_src)
    mapping = namespace_mapping(repo, IDENTITY, 0)
    return Toolz(extract_names(repo), repo.python_files(), mapping)


def tokens(text: str) -> set[str]:
    return set(TOKEN.findall(text))


def token_wise_view(text: str, forward) -> str:
    """The spec of ``to_view``: every maximal ``[A-Za-z0-9_]`` run that is a name is replaced."""
    return TOKEN.sub(lambda m: forward.get(m.group(), m.group()), text)


def as_parts(text: str, forward) -> list[str]:
    """``text`` (a path, a dotted module) split into literal pieces and the names it contains."""
    return [Name(piece) if piece in forward else piece for piece in re.split(r"([A-Za-z0-9_]+)", text) if piece]


def render(parts: list[str], forward) -> str:
    """The command with every ``Name`` part written through ``forward`` (identity: ``{}``)."""
    return "".join(forward.get(p, p) if isinstance(p, Name) else p for p in parts)


# --- (a) observations: original -> virtual -> original ---------------------------------------------

_PUNCTUATION = st.sampled_from([" ", "  ", "\n", "\t", "\r\n", ".", "/", "::", "(", ")", "()", "[", "]", ",", ":",
                                "'", '"', "-", "=", "==", "->", ">>> ", "$ ", "#", "@", "*", "`", "\\"])
_NOISE = st.sampled_from(["FAILED", "PASSED", "AssertionError", "Traceback (most recent call last):", "line 12",
                          "/usr/lib/python3.11/functools.py", "site-packages", "assert", "def", "self", "E   ",
                          "100%", "0x7f3a2c", "__init__", "__name__", "_", "2", "py", "merge_sorted2", "remerge"])


def observations(forward, paths) -> st.SearchStrategy[str]:
    names = sorted(forward)
    modules = [p[:-3].replace("/", ".").removesuffix(".__init__") for p in paths]
    item = st.one_of(
        st.sampled_from(names),
        _PUNCTUATION,
        _NOISE,
        st.sampled_from(paths).map(lambda p: f'  File "/testbed/{p}", line 3, in '),
        st.sampled_from(paths).map(lambda p: f"{p}:17: "),
        st.sampled_from(modules),
        st.builds(lambda m, n: f"{m}.{n}", st.sampled_from(modules), st.sampled_from(names)),
        st.text(max_size=8),
    )
    return st.lists(item, max_size=30).map("".join)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_observation_round_trips_and_leaks_nothing(toolz, data):
    mapping, translator = toolz.mapping, toolz.translator
    text = data.draw(observations(mapping.forward, toolz.paths))
    assume(not tokens(text) & set(mapping.backward))  # text already holding virtual names is not an observation
    shown = translator.to_view(text)
    assert shown == token_wise_view(text, mapping.forward)
    assert translator.to_original(shown) == text
    assert not tokens(shown) & set(mapping.forward)  # no whole original name is left


# --- (b) commands: virtual -> original -> virtual ------------------------------------------------

def commands(forward, paths) -> st.SearchStrategy[list[str]]:
    """Commands as parts: literal shell text and ``Name`` parts (original names)."""
    name = st.sampled_from(sorted(forward)).map(Name)
    path = st.sampled_from(paths).map(lambda p: as_parts(p, forward))
    module = st.sampled_from([p[:-3].replace("/", ".").removesuffix(".__init__") for p in paths]).map(
        lambda m: as_parts(m, forward))
    line_range = st.tuples(st.integers(1, 400), st.integers(0, 60)).map(lambda r: f"{r[0]},{r[0] + r[1]}p")
    grep = st.builds(lambda flags, n, p: [f"grep {flags} '", n, "' ", *p],
                     st.sampled_from(["-rn", "-ri", "-ni", "-rnw", "-li", "-rn --include='*.py'"]), name, path)
    grep_def = st.builds(lambda n, p: ['grep -rn "def ', n, '(" ', *p], name, path)
    sed = st.builds(lambda r, p: [f"sed -n '{r}' ", *p], line_range, path)
    python_c = st.builds(lambda m, n: ["python -c 'import ", *m, "; print(", *m, ".", n, "(1, [2]))'"], module, name)
    python_from = st.builds(lambda m, n: ['python -c "from ', *m, " import ", n, "; help(", n, ')"'], module, name)
    heredoc = st.builds(
        lambda p, m, a, b: ["cat <<'EOF' > ", *p, "\nfrom ", *m, " import ", a, "\n\n\ndef probe():\n    ",
                            "assert ", a, "(", b, ") == -", b, "\nEOF"],
        path, module, name, name)
    loop = st.builds(lambda p: ["for f in ", *p, "; do wc -l $f; done"], path)
    branch = st.builds(lambda p: ["if [ -f ", *p, " ]; then head -n 5 ", *p, "; else echo missing; fi"], path)
    shell = st.sampled_from(SHELL_WORDS).map(lambda w: [w])
    listing = st.builds(lambda p: ["ls -la ", *p], path)
    simple = st.one_of(grep, grep_def, sed, python_c, python_from, heredoc, loop, branch, shell, listing)
    stage = st.sampled_from(["head -n 20", "tail -n 3", "sort", "uniq -c", "wc -l", "grep -v test"])
    pipeline = st.builds(lambda c, s: [*c, *[f" | {x}" for x in s]], simple, st.lists(stage, max_size=2))
    return st.lists(pipeline, min_size=1, max_size=3).map(
        lambda cs: functools.reduce(lambda acc, c: [*acc, " && ", *c], cs[1:], cs[0]))


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_command_runs_with_original_names_and_shell_words_as_typed(toolz, data):
    mapping, translator = toolz.mapping, toolz.translator
    parts = data.draw(commands(mapping.forward, toolz.paths))
    virtual, original = render(parts, mapping.forward), render(parts, {})
    executed = translator.to_original(virtual)
    assert executed == original
    assert not tokens(executed) & set(mapping.backward)
    assert translator.to_view(executed) == virtual


_SEEDS = st.integers(0, 10**6)


@settings(max_examples=100, deadline=None)
@given(seed=_SEEDS, data=st.data())
def test_shell_words_survive_translation_under_every_seed(toolz, seed, data):
    mapping = build_mapping(toolz.names.internal, toolz.names.tokens, IDENTITY, seed)
    translator = NamespaceTranslator(mapping)
    parts = data.draw(commands(mapping.forward, toolz.paths))
    virtual, original = render(parts, mapping.forward), render(parts, {})
    assert translator.to_original(virtual) == original
    assert translator.to_view(original) == virtual


# --- (c) seeds ---------------------------------------------------------------------------------------

@settings(max_examples=4, deadline=None)
@given(seeds=st.lists(_SEEDS, min_size=2, max_size=2, unique=True))
def test_same_seed_same_mapping_other_seed_other_mapping(toolz_src, toolz, seeds):
    repo = RepoFiles(toolz_src)
    first, second = (namespace_mapping(repo, IDENTITY, s) for s in seeds)
    assert dict(namespace_mapping(repo, IDENTITY, seeds[0]).forward) == dict(first.forward)
    assert set(first.forward) == set(second.forward) == set(toolz.mapping.forward)
    assert dict(first.forward) != dict(second.forward)
    assert dict(first.subwords) != dict(second.subwords)
