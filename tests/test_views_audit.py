"""The exposure audit (raydist.views.audit) and the L2 view it audits, on real repositories:
the six built-in instances (their PyPI sdists with the injected defect) and toolz 1.0.0.

The audit reads the original repository, never the translator's tables, so it sees what an
L2 view leaves in place: these tests feed it views that leak (L0, an L2 view with one name
taken out of its mapping) and see it report every name, and views that do not.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from raydist.grading.apply import apply_on_host
from raydist.sandbox.sources import fetch_sdist, unpack_sdist
from raydist.tasks import load_instances
from raydist.views import RepoFiles, build_view
from raydist.views.audit import ExposureLog, IdentitySet, find_exposures, hidden_names, identity_tokens, view_manifest
from raydist.views.l2.mapping import NameMapping
from raydist.views.l2.translator import NamespaceTranslator

BUILTIN = {i.instance_id: i for i in load_instances("builtin")}
DEL = "jquast__wcwidth-del-control"
UNDERSCORE = "jpvanhal__inflection-underscore-dashes"
SIX = "benjaminp__six-ensure-text-errors"
WCWIDTH = {"jquast": "project_url", "list_versions": "function", "table_vs16": "module", "table_wide": "module",
           "table_zero": "module", "unicode_versions": "module", "wcswidth": "function", "wcwidth": "distribution"}
INFLECTION = {"camelize": "function", "dasherize": "function", "humanize": "function", "inflection": "distribution",
              "jpvanhal": "project_url", "ordinal": "function", "ordinalize": "function", "parameterize": "function",
              "pluralize": "function", "singularize": "function", "tableize": "function", "titleize": "function",
              "transliterate": "function", "underscore": "function"}
#: What each built-in statement names, as written (the audit at L0).
STATEMENT_NAMES = {
    "jpvanhal__inflection-humanize-id-anchor": {"humanize", "inflection", "titleize"},
    UNDERSCORE: {"dasherize", "inflection", "tableize", "titleize", "underscore"},
    "jquast__wcwidth-table-upper-bound": {"wcwidth"},
    DEL: {"wcswidth", "wcwidth"},
    "jquast__wcwidth-wcswidth-zero-n": {"wcswidth", "wcwidth"},
    SIX: {"ensure_binary", "ensure_str", "ensure_text", "six"},
}


@pytest.fixture(scope="session")
def trees(tmp_path_factory) -> dict[str, Path]:
    """instance id -> the instance's original tree (sdist + injected defect), as the agent gets it."""
    cache = tmp_path_factory.mktemp("sdists")
    out = {}
    try:
        for instance in BUILTIN.values():
            root = unpack_sdist(fetch_sdist(instance.recipe.sdist, cache), tmp_path_factory.mktemp("tree"))
            apply_on_host(root, instance.recipe.injected_patch, label=instance.instance_id)
            out[instance.instance_id] = root
    except RuntimeError as error:
        pytest.skip(f"PyPI unreachable, cannot fetch the built-in sdists: {error}")
    return out


def view_of(trees, instance_id: str, level: str):
    return build_view(BUILTIN[instance_id], RepoFiles(trees[instance_id]), level, 0)


# --- identity ----------------------------------------------------------------------------------


def test_identity_of_real_sdists_is_distribution_url_owner_and_distinctive_public_names(trees):
    assert dict(identity_tokens(RepoFiles(trees[DEL]), BUILTIN[DEL]).origins) == WCWIDTH
    assert dict(identity_tokens(RepoFiles(trees[UNDERSCORE]), BUILTIN[UNDERSCORE]).origins) == INFLECTION
    six = identity_tokens(RepoFiles(trees[SIX]), BUILTIN[SIX])
    assert (six.origins["six"], six.origins["benjaminp"], six.origins["ensure_text"]) == (
        "distribution", "project_url", "function")
    # Methods the standard library calls by name (an import hook's) are its names, not six's.
    assert "find_spec" not in six and "exec_module" not in six and len(six) == 18


def test_toolz_identity_has_its_package_url_and_modules_but_no_generic_word(toolz_src):
    identity = identity_tokens(RepoFiles(toolz_src))
    kinds = identity.origins
    assert (kinds["toolz"], kinds["tlz"], kinds["pytoolz"], kinds["itertoolz"], kinds["merge_sorted"]) == (
        "distribution", "package", "project_url", "module", "function")
    assert not {"utils", "core", "tests", "docs", "first", "merge", "compose", "sandbox"} & set(identity)


def test_matching_is_case_insensitive_subword_aware_and_word_bounded():
    identity = IdentitySet(origins={"wcwidth": "distribution", "ensure_text": "function", "toolz": "distribution"})
    assert find_exposures("WCWIDTH Wcwidth WcWidth", identity) == {"wcwidth"}
    assert find_exposures("test_ensure_text_errors EnsureText ENSURE_TEXT", identity) == {"ensure_text"}
    assert find_exposures("'\\ntoolz'", identity) == {"toolz"}  # a repr glues an escape to the name
    assert find_exposures("cytoolz ensure textual wcwidths toolzy", identity) == set()


# --- the audit can fail ----------------------------------------------------------------------------


@pytest.mark.parametrize("instance_id", sorted(STATEMENT_NAMES))
def test_l0_statement_names_the_repository_and_the_l2_statement_names_nothing(trees, instance_id):
    """At L0 the audit reports what the statement names (the baseline); at L2 the statement
    goes through the renaming and names nothing (today's main shows wcwidth, wcswidth and
    underscore in four of the six L2 statements while its translator counts 0)."""
    l0, l2 = view_of(trees, instance_id, "L0"), view_of(trees, instance_id, "L2")
    assert find_exposures(l0.problem_statement, l0.identity) == STATEMENT_NAMES[instance_id]
    assert find_exposures(l2.problem_statement, l2.identity) == set()


def without(mapping: NameMapping, name: str) -> NameMapping:
    """``mapping`` with ``name`` and its case variants taken out: a view that forgot one name."""
    forward = {k: v for k, v in mapping.forward.items() if k.lower() != name}
    return NameMapping(forward=forward, backward={v: k for k, v in forward.items()}, subwords=mapping.subwords)


def test_audit_reports_a_name_an_l2_view_left_unmapped(trees):
    view = view_of(trees, DEL, "L2")
    assert view_manifest(view, view.identity)["unmapped"] == {}
    leaky = replace(view, translator=NamespaceTranslator(without(view.translator.mapping, "wcswidth")))
    statement = leaky.translator.to_view(BUILTIN[DEL].problem_statement)
    assert find_exposures(statement, leaky.identity) == {"wcswidth"}
    manifest = view_manifest(leaky, leaky.identity)
    assert manifest["unmapped"] == {"wcswidth": "left unmapped by L2 without a recorded reason"}
    assert manifest["remapped"] == sorted(set(WCWIDTH) - {"wcswidth"})


def test_l0_view_leaves_every_identity_token_unmapped_and_hides_none(trees):
    view = view_of(trees, DEL, "L0")
    assert hidden_names(view, view.identity) == frozenset()
    assert view_manifest(view, view.identity)["unmapped"] == dict.fromkeys(sorted(WCWIDTH),
                                                                           "level L0 keeps repository names")


@pytest.mark.parametrize("instance_id", sorted(STATEMENT_NAMES))
def test_every_builtin_l2_view_writes_its_manifest(trees, instance_id):
    view = view_of(trees, instance_id, "L2")
    assert view.meta["l2_unmapped"] == {} and view.meta["l2_skipped"] == {}
    assert view.meta["l2_remapped"] == sorted(view.identity) == view_manifest(view, view.identity)["remapped"]


def test_a_name_l2_must_keep_is_written_in_the_manifest_with_its_reason(toolz_src):
    task = SimpleNamespace(instance_id="toolz-1", repo="pytoolz/toolz", patch="", test_patch="", problem_statement="")
    view = build_view(task, RepoFiles(toolz_src), "L2", 0)
    # toolz's groupby is also itertools.groupby: renaming it would rename the standard library's.
    assert view.meta["l2_unmapped"]["groupby"] == "attribute of an external object"
    manifest = view_manifest(view, view.identity)
    assert manifest["unmapped"] == view.meta["l2_unmapped"]
    assert set(manifest["unmapped"]) == {"curried", "functoolz", "groupby", "memoize"}


# --- L2 hides identity ---------------------------------------------------------------------------


def test_l2_renames_the_project_in_readme_metadata_and_case_variants(trees):
    view = view_of(trees, UNDERSCORE, "L2")
    repo = RepoFiles(trees[UNDERSCORE])
    for path in ("README.rst", "setup.py", "PKG-INFO", "docs/index.rst", "inflection.egg-info/SOURCES.txt"):
        assert find_exposures(repo.read(path), view.identity), path
        assert find_exposures(view.translator.to_view(repo.read(path)), view.identity) == set(), path
    lower, title, upper = view.translator.to_view("inflection Inflection INFLECTION").split()
    assert lower != "inflection" and title == lower.capitalize() and upper == lower.upper()
    assert view.translator.to_original(f"{title} {upper}") == "Inflection INFLECTION"


def test_wcwidth_readme_at_l2_names_only_other_projects_named_after_it(trees):
    """The README links ports called ``wcwidth9`` and ``Terminal-WCWidth``: the translator
    renames whole names, so these stay, and the audit says so."""
    view = view_of(trees, DEL, "L2")
    shown = view.translator.to_view(RepoFiles(trees[DEL]).read("README.rst"))
    assert find_exposures(shown, view.identity) == {"wcwidth"}
    leaking = [line for line in shown.splitlines() if find_exposures(line, view.identity)]
    assert leaking and all("wcwidth9" in line or "WCWidth" in line for line in leaking)


def test_generic_words_stay_so_prose_reads_as_written(trees, toolz_src):
    inflection = view_of(trees, UNDERSCORE, "L2")  # has docs/conf.py: "docs" is a path name
    assert inflection.translator.to_view("the docs say: see tests and utils") == "the docs say: see tests and utils"
    task = SimpleNamespace(instance_id="toolz-1", repo="pytoolz/toolz", patch="", test_patch="", problem_statement="")
    toolz = build_view(task, RepoFiles(toolz_src), "L2", 0)
    prose = "the first core utils of the sandbox, merge and compose"
    assert toolz.translator.to_view(prose) == prose
    assert toolz.translator.to_view("toolz.utils") != "toolz.utils"


def test_files_that_are_not_utf8_are_kept_byte_for_byte(toolz_src, tmp_path):
    """A Latin-1 module and a Latin-1 changelog: L2 builds (today's main raises ValueError),
    writes no file, and names the module in its manifest."""
    root = tmp_path / "toolz"
    shutil.copytree(toolz_src, root)
    latin = "# -*- coding: latin-1 -*-\n\ndef caf\u00e9_name():\n    return 'd\u00e9j\u00e0 vu'\n".encode("latin-1")
    (root / "toolz" / "latin.py").write_bytes(latin)
    (root / "CHANGES.txt").write_bytes("toolz na\u00efve release\n".encode("latin-1"))
    task = SimpleNamespace(instance_id="toolz-1", repo="pytoolz/toolz", patch="", test_patch="",
                           problem_statement="merge_sorted in toolz")
    view = build_view(task, RepoFiles(root), "L2", 0)
    assert view.files == {}
    assert view.meta["l2_skipped"] == {"toolz/latin.py": "not UTF-8: kept byte for byte, its names not read"}
    assert view.identity.unreadable == ("toolz/latin.py",)
    assert (root / "toolz" / "latin.py").read_bytes() == latin
    assert find_exposures(view.problem_statement, view.identity) == set()


# --- memorisation ----------------------------------------------------------------------------------


def test_memorised_names_are_hidden_names_typed_before_being_shown(trees):
    view = view_of(trees, DEL, "L2")
    log = ExposureLog(view.identity, hidden_names(view, view.identity), view.problem_statement)
    assert log.statement == [] and log.hidden == frozenset(WCWIDTH)
    typed = "python -c 'import wcwidth; print(wcwidth.wcswidth(\"a\"))'"
    assert log.memorised(typed) == ["wcswidth", "wcwidth"]
    # The command still works: the translator leaves original names as typed.
    assert view.translator.to_original(typed) == typed
    assert log.shown("Terminal-WCWidth port") == ["wcwidth"]  # a leak: from now on wcwidth was shown
    assert log.memorised(typed) == ["wcswidth"]
    assert log.memorised(view.translator.to_view(typed)) == []  # virtual names are not memory
    assert log.memorised_all == {"wcswidth", "wcwidth"}


def test_at_l0_nothing_is_hidden_so_nothing_is_memorised(trees):
    view = view_of(trees, DEL, "L0")
    log = ExposureLog(view.identity, hidden_names(view, view.identity), view.problem_statement)
    assert log.statement == ["wcswidth", "wcwidth"]
    assert log.memorised("python -c 'import wcwidth; print(wcwidth.list_versions())'") == []
    assert json.dumps(log.shown("wcwidth/table_wide.py")) == '["table_wide", "wcwidth"]'
