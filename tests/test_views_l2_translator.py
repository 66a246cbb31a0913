"""L2 translator and mapping on a small fixed namespace: pure, fast, property-tested."""

from __future__ import annotations

import keyword
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from raydist.views.audit import IdentitySet, find_exposures
from raydist.views.l2.mapping import COMMAND_WORDS, KEPT_SUBWORDS, build_mapping, split_subwords, virtual_name
from raydist.views.l2.names import is_reserved
from raydist.views.l2.translator import NamespaceTranslator

NAMES = ["toolz", "itertoolz", "merge_sorted", "merge_with", "InstanceProperty", "LONG_VERSION_PY",
         "_merge_sorted_binary", "test_merge_sorted", "TestDict", "curry", "tests"]
TOKENS = [*NAMES, "merge", "sorted", "self", "print", "the"]
MAPPING = build_mapping(NAMES, TOKENS, "pytoolz/toolz", 0)
T = NamespaceTranslator(MAPPING)
V = MAPPING.forward
#: The audit's view of the same namespace: it searches for the original names, not the tables.
IDENTITY_SET = IdentitySet(origins=dict.fromkeys([n for n in NAMES if n != "tests"], "function"))
UNMAPPED = ["the", "File", "line", "in", "error", "python", "grep", "sed", "testbed", "passed",
            "x", "42", "merge", "sorted", "py", "self"]


def test_subwords_split_on_underscores_case_changes_and_digits():
    assert split_subwords("_merge_sorted_binary") == ["merge", "sorted", "binary"]
    assert split_subwords("HTTPServerError2") == ["HTTP", "Server", "Error", "2"]
    assert split_subwords("LONG_VERSION_PY") == ["LONG", "VERSION", "PY"]


def test_case_style_separators_and_shared_subwords_are_kept():
    sub = MAPPING.subwords
    assert V["merge_sorted"] == f"{sub['merge']}_{sub['sorted']}"
    assert V["_merge_sorted_binary"] == f"_{sub['merge']}_{sub['sorted']}_{sub['binary']}"
    assert V["InstanceProperty"] == sub["instance"].capitalize() + sub["property"].capitalize()
    assert V["LONG_VERSION_PY"] == "_".join(sub[w].upper() for w in ("long", "version", "py"))
    assert V["test_merge_sorted"] == f"test_{V['merge_sorted']}"
    assert V["TestDict"] == "Test" + sub["dict"].capitalize()
    assert virtual_name("merge", sub) == sub["merge"]


def test_names_made_only_of_kept_subwords_are_not_remapped():
    assert "tests" not in V


def test_mapping_is_a_bijection_clear_of_tokens_keywords_and_commands():
    assert len(set(V.values())) == len(V) == len(NAMES) - 1
    assert MAPPING.backward == {v: k for k, v in V.items()}
    for virtual in V.values():
        assert virtual not in TOKENS and not keyword.iskeyword(virtual)
        assert virtual not in COMMAND_WORDS and virtual.isidentifier()


def test_virtual_words_have_two_syllables_so_none_is_a_short_option_cluster():
    words = [w for s, w in MAPPING.subwords.items() if s not in KEPT_SUBWORDS]
    assert words and min(len(w) for w in words) >= 4
    command = f"grep -li {V['curry']} {V['toolz']} | tail -n 3"
    assert T.to_original(command) == "grep -li curry toolz | tail -n 3"


def test_shell_commands_and_bash_reserved_words_are_never_remapped():
    assert {"fi", "do", "done", "then", "esac", "tail", "diff"} <= COMMAND_WORDS
    assert is_reserved("tail") == is_reserved("done") == is_reserved("fi") == "shell word"


def test_mapping_is_deterministic_per_identity_and_seed():
    assert build_mapping(NAMES, TOKENS, "pytoolz/toolz", 0) == MAPPING
    assert build_mapping(NAMES, TOKENS, "pytoolz/toolz", 1).forward != V
    assert build_mapping(NAMES, TOKENS, "other/repo", 0).forward != V


def test_translation_respects_identifier_boundaries():
    text = "merge merge_sorted remerge_sorted merge_sorted2 toolz.itertoolz toolz/itertoolz.py"
    assert T.to_view(text) == (f"merge {V['merge_sorted']} remerge_sorted merge_sorted2 "
                               f"{V['toolz']}.{V['itertoolz']} {V['toolz']}/{V['itertoolz']}.py")


def test_grep_command_translates_pattern_and_path_not_head():
    command = f'grep -rn "{V["merge_sorted"]}" {V["toolz"]}/'
    assert T.to_original(command) == 'grep -rn "merge_sorted" toolz/'


def test_python_c_command_translates_dotted_import():
    command = f"python -c 'from {V['toolz']}.{V['itertoolz']} import {V['InstanceProperty']}'"
    assert T.to_original(command) == "python -c 'from toolz.itertoolz import InstanceProperty'"


def test_sed_command_translates_expression_and_path():
    command = f"sed -i 's/{V['merge_sorted']}/{V['merge_with']}/' {V['toolz']}/x.py"
    assert T.to_original(command) == "sed -i 's/merge_sorted/merge_with/' toolz/x.py"


def test_heredoc_body_is_translated():
    command = (f"cat > {V['toolz']}/new.py <<'EOF'\nfrom {V['toolz']} import {V['curry']}\n"
               f"{V['curry']}({V['merge_sorted']})\nEOF")
    assert T.to_original(command) == (
        "cat > toolz/new.py <<'EOF'\nfrom toolz import curry\ncurry(merge_sorted)\nEOF")


def test_traceback_and_test_ids_are_shown_virtual():
    text = ('  File "/testbed/toolz/itertoolz.py", line 3, in merge_sorted\n'
            "FAILED toolz/tests/test_x.py::TestDict::test_merge_sorted - KeyError\n")
    shown = T.to_view(text)
    assert shown == (f'  File "/testbed/{V["toolz"]}/{V["itertoolz"]}.py", line 3, in {V["merge_sorted"]}\n'
                     f"FAILED {V['toolz']}/tests/test_x.py::{V['TestDict']}::{V['test_merge_sorted']} - KeyError\n")
    assert find_exposures(text, IDENTITY_SET) == {"toolz", "itertoolz", "merge_sorted", "TestDict", "test_merge_sorted"}
    assert find_exposures(shown, IDENTITY_SET) == set()


_PUNCT = st.sampled_from([" ", "\n", ".", "/", "::", "(", ")", '"', "'", ", ", ":", "-", "=", "[", "]", "$"])
_PATHS = st.sampled_from(["toolz/itertoolz.py", "/testbed/toolz/tests/test_x.py", "toolz.itertoolz.curry"])
_TRACE = st.just('  File "/testbed/toolz/itertoolz.py", line 12, in merge_sorted\n')


def _text(words: list[str]) -> st.SearchStrategy[str]:
    item = st.one_of(st.sampled_from(words), st.sampled_from(UNMAPPED), _PUNCT)
    return st.lists(item, max_size=40).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_text(NAMES), _PATHS, _TRACE), max_size=6).map("".join))
def test_original_text_round_trips_through_the_view(text):
    shown = T.to_view(text)
    assert T.to_original(shown) == text
    # Whole names are all renamed; the audit still finds names glued into a longer run
    # (``toolzInstanceProperty``), which the translator, token by token, leaves as typed.
    glued = [run for run in re.findall(r"[A-Za-z0-9_]+", shown) if find_exposures(run, IDENTITY_SET)]
    assert all(run not in V and run not in MAPPING.backward for run in glued)
    assert find_exposures(" ".join(re.findall(r"[A-Za-z0-9_]+", shown)), IDENTITY_SET) == find_exposures(
        " ".join(glued), IDENTITY_SET)


@settings(max_examples=300, deadline=None)
@given(_text(list(V.values())))
def test_virtual_text_round_trips_through_the_original(text):
    assert T.to_view(T.to_original(text)) == text


def test_unmapped_words_are_neither_names_nor_virtual_names():
    assert not set(UNMAPPED) & (set(V) | set(V.values()))


def test_a_name_glued_to_a_printed_escape_or_a_colour_code_is_translated_and_round_trips():
    printed = "AssertionError: 'x\\nmerge_sorted' != 'x\\tcurry'"
    seen = T.to_view(printed)
    assert seen == f"AssertionError: 'x\\n{V['merge_sorted']}' != 'x\\t{V['curry']}'"
    assert find_exposures(printed, IDENTITY_SET) == {"merge_sorted", "curry"}
    assert find_exposures(seen, IDENTITY_SET) == set()
    assert T.to_original(seen) == printed
    coloured = "toolz/itertoolz.py:12:def \x1b[01;31m\x1b[Kmerge_sorted\x1b[m\x1b[K(*seqs):"
    seen = T.to_view(coloured)
    assert seen == f"{V['toolz']}/{V['itertoolz']}.py:12:def \x1b[01;31m\x1b[K{V['merge_sorted']}\x1b[m\x1b[K(*seqs):"
    assert find_exposures(seen, IDENTITY_SET) == set() and T.to_original(seen) == coloured
    # A run that is itself a name wins over the escape reading (`\toolz` is not `\t` + oolz).
    assert T.to_view("C:\\toolz") == f"C:\\{V['toolz']}"
