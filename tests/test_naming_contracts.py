"""Naming contracts (raydist.views.contracts): the names FAIL_TO_PASS tests call that only the
gold patch defines, how the gate reports them, and that L2 leaves them as they are."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from raydist.cluster.validity import judge_views
from raydist.driver.report import gate_markdown
from raydist.views.base import RepoFiles
from raydist.views.contracts import contract_names, defines_contract, naming_contract
from raydist.views.l2.mapping import NameMapping
from raydist.views.l2.namespace import namespace_mapping
from raydist.views.l2.translator import NamespaceTranslator

LITE = Path(__file__).resolve().parents[2] / "shared" / "data" / "swebench" / "swebench_lite.jsonl"

BASE = {"pkg/__init__.py": "", "pkg/mod.py": "def old_api(x):\n    return x\n\n\ndef parse_value(x):\n    return x\n",
        "tests/test_mod.py": "from pkg.mod import old_api\n\n\ndef test_old():\n    assert old_api(1) == 1\n"}
PATCH = """\
diff --git a/pkg/mod.py b/pkg/mod.py
--- a/pkg/mod.py
+++ b/pkg/mod.py
@@ -3,4 +3,8 @@ def old_api(x):
\x20
\x20
-def parse_value(x):
-    return x
+def parse_value(x, strict=False):
+    return int(x) if strict else x
+
+
+def new_api(x):
+    return old_api(x) + 1
diff --git a/pkg/other.py b/pkg/other.py
new file mode 100644
--- /dev/null
+++ b/pkg/other.py
@@ -0,0 +1,2 @@
+def old_api(x):
+    return x
"""
TEST_PATCH = """\
diff --git a/tests/test_mod.py b/tests/test_mod.py
--- a/tests/test_mod.py
+++ b/tests/test_mod.py
@@ -3,3 +3,18 @@
\x20
 def test_old():
     assert old_api(1) == 1
+
+
+def make_thing():
+    return 2
+
+
+def test_new():
+    from pkg.mod import new_api, parse_value
+    from pkg.other import old_api
+    assert new_api(make_thing()) == old_api(3) == parse_value("3", strict=True)
+
+
+def test_unrelated():
+    from pkg.mod import new_api
+    assert new_api(0) == 1
"""
SMALL = SimpleNamespace(instance_id="small-1", patch=PATCH, test_patch=TEST_PATCH,
                        FAIL_TO_PASS=("tests/test_mod.py::test_new",), PASS_TO_PASS=("tests/test_mod.py::test_old",))


@pytest.fixture
def small_repo(tmp_path) -> RepoFiles:
    for path, text in BASE.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    return RepoFiles(tmp_path)


def test_only_the_name_the_gold_patch_introduces_is_a_contract(small_repo):
    # old_api is defined at base, make_thing by the test file, test_new only by the test:
    # new_api and the keyword parse_value(strict=) are what only the gold patch brings.
    contract = naming_contract(SMALL, small_repo)
    assert contract.labels() == ["new_api", "parse_value(strict=)"]
    assert contract.names[0].defined_in == "pkg/mod.py"
    assert contract.names[0].called_by == ("tests/test_mod.py::test_new",)
    assert contract.checked_at_base and contract.unread == ()


def test_without_the_repository_a_name_the_old_side_uses_is_not_new(small_repo):
    # From the diff alone pkg/other.py's old_api would look new (pkg/mod.py defines it outside
    # the hunks), but the test file's context line already calls it: the proxy drops it.
    contract = naming_contract(SMALL)
    assert contract.labels() == ["new_api", "parse_value(strict=)"] and not contract.checked_at_base
    moved = SimpleNamespace(**{**vars(SMALL), "test_patch": TEST_PATCH.replace("     assert old_api(1) == 1\n", "")
                               .replace("@@ -3,3 +3,18 @@", "@@ -3,2 +3,17 @@")})
    assert naming_contract(moved).labels() == ["new_api", "old_api", "parse_value(strict=)"]  # an upper bound
    assert naming_contract(moved, small_repo).labels() == ["new_api", "parse_value(strict=)"]


def test_a_name_only_pass_to_pass_tests_call_is_no_contract(small_repo):
    swapped = SimpleNamespace(**{**vars(SMALL), "FAIL_TO_PASS": ("tests/test_mod.py::test_old",)})
    assert naming_contract(swapped, small_repo).labels() == []


def test_a_patch_that_defines_the_contract_uses_it_and_one_that_renames_it_does_not(small_repo):
    contract = naming_contract(SMALL, small_repo)
    assert defines_contract(contract, PATCH) is True
    renamed = PATCH.replace("+def new_api(x):", "+def newer_api(x):")
    assert defines_contract(contract, renamed) is False
    assert defines_contract(naming_contract(SimpleNamespace(**{**vars(SMALL), "FAIL_TO_PASS": ()})), PATCH) is None


@pytest.mark.skipif(not LITE.is_file(), reason="../shared/data/swebench is absent")
def test_flask_4992_contract_is_the_text_keyword_of_from_file():
    # Checked by hand: the gold patch adds ``text: bool = True`` to Config.from_file and
    # test_config_from_file_toml calls ``from_file(..., tomllib.load, text=False)``.
    row = next(json.loads(line) for line in LITE.read_text().splitlines() if '"pallets__flask-4992"' in line)
    instance = SimpleNamespace(**{**row, "FAIL_TO_PASS": json.loads(row["FAIL_TO_PASS"])})
    contract = naming_contract(instance)
    assert [(n.name, n.kind, n.defined_in) for n in contract.names] == [
        ("from_file(text=)", "keyword", "src/flask/config.py")]


def test_builtin_instances_have_no_contract():
    # Their gold patches change existing functions only (each read by hand): no new name.
    from raydist.tasks import load_instances

    assert {i.instance_id: naming_contract(i).labels() for i in load_instances("builtin")} == {
        i.instance_id: [] for i in load_instances("builtin")}


def collisions(mapping: NameMapping, names: set[str]) -> set[str]:
    """Contract names the L2 mapping would rename (forward) or produce as a view name (backward)."""
    return names & (set(mapping.forward) | set(mapping.backward))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_l2_translates_contract_names_unchanged_both_ways(small_repo, seed):
    mapping = namespace_mapping(small_repo, "small/pkg", seed)
    names = contract_names([naming_contract(SMALL, small_repo)])
    assert names == {"new_api", "strict"}
    assert collisions(mapping, names) == set()
    translator = NamespaceTranslator(mapping)
    view_patch = translator.to_view(PATCH)
    assert "parse_value" not in view_patch and "+def new_api(x):" in view_patch  # others renamed, contract kept
    assert translator.to_original(view_patch) == PATCH
    for name in names:
        assert translator.to_view(name) == name and translator.to_original(name) == name


def test_a_forced_collision_is_caught(small_repo):
    mapping = namespace_mapping(small_repo, "small/pkg", 0)
    original = next(iter(mapping.forward))
    forced = NameMapping(forward={**mapping.forward, original: "new_api"},
                         backward={**mapping.backward, "new_api": original}, subwords=mapping.subwords)
    assert collisions(forced, {"new_api"}) == {"new_api"}
    assert NamespaceTranslator(forced).to_original("def new_api(x):") == f"def {original}(x):"


def test_gate_json_and_summary_list_the_contracts():
    result = judge_views([("small-1", "L2", 0)], {("small-1", "L2", 0, "oracle"): {"outcome": "resolved"},
                                                  ("small-1", "L2", 0, "null"): {"outcome": "unresolved"}},
                         {"small-1": SMALL})
    assert result.excluded == () and result.contracts == {"small-1": ("new_api", "parse_value(strict=)")}
    assert json.loads(result.to_json())["naming_contracts"] == {"small-1": ["new_api", "parse_value(strict=)"]}
    assert "- small-1: new_api, parse_value(strict=)" in gate_markdown(result, gated=True)
    assert "Validity risk: naming contracts" in gate_markdown(result, gated=True)


PROBE_PATCH = """\
diff --git a/contract_probe.py b/contract_probe.py
new file mode 100644
--- /dev/null
+++ b/contract_probe.py
@@ -0,0 +1,2 @@
+def {name}():
+    return 1
"""
PROBE_TEST = """\
diff --git a/test_contract_probe.py b/test_contract_probe.py
new file mode 100644
--- /dev/null
+++ b/test_contract_probe.py
@@ -0,0 +1,5 @@
+from contract_probe import {name}
+
+
+def test_contract_probe():
+    assert {name}() == 1
"""


def with_contract(instance, name: str):
    """``instance`` whose gold patch also defines ``name`` and whose FAIL_TO_PASS also calls it."""
    return dataclasses.replace(instance, patch=instance.patch + PROBE_PATCH.format(name=name),
                               test_patch=instance.test_patch + PROBE_TEST.format(name=name),
                               FAIL_TO_PASS=(*instance.FAIL_TO_PASS, "test_contract_probe.py::test_contract_probe"))


def test_a_contract_named_like_a_virtual_name_is_reserved(small_repo):
    # The worst case: the gold patch introduces a name L2 would draw as the view name of an
    # original. Without the instance the mapping has it (the collision the reservation prevents:
    # the agent's correct new name would run as the original's); with it, no longer.
    plain = namespace_mapping(small_repo, "small/pkg", 0)
    virtual = plain.forward["parse_value"]
    probe = SimpleNamespace(instance_id="probe", patch=PROBE_PATCH.format(name=virtual),
                            test_patch=PROBE_TEST.format(name=virtual),
                            FAIL_TO_PASS=("test_contract_probe.py::test_contract_probe",))
    assert naming_contract(probe, small_repo).labels() == [virtual]
    assert collisions(plain, {virtual}) == {virtual}
    reserved = namespace_mapping(small_repo, "small/pkg", 0, probe)
    assert collisions(reserved, {virtual}) == set() and reserved.forward["parse_value"] != virtual


@pytest.fixture(scope="module")
def builtin_repos(client):
    from raydist.sandbox import ensure_instance_image
    from raydist.tasks import load_instances

    cache = Path.home() / ".cache" / "raydist"
    return [(i, RepoFiles(ensure_instance_image(client, i.recipe, cache_dir=cache).repo_dir))
            for i in load_instances("builtin")]


@pytest.mark.docker
def test_builtin_instances_keep_a_contract_name_through_l2_both_ways(builtin_repos):
    # Each built-in instance has no contract of its own (checked in its repository); given one
    # named like the view name L2 would otherwise draw for one of its originals, the L2 view
    # leaves it as written both ways and the agent's patch defining it translates back intact.
    from raydist.views import build_view

    for instance, repo in builtin_repos:
        assert naming_contract(instance, repo).labels() == [], instance.instance_id
        for seed in (0, 1, 2):
            plain = namespace_mapping(repo, instance.repo, seed)
            virtual = min(v for v in plain.backward if v.isidentifier() and v[0].islower())
            probe = with_contract(instance, virtual)
            assert naming_contract(probe, repo).labels() == [virtual]
            translator = build_view(probe, repo, "L2", seed).translator
            assert translator.to_view(virtual) == virtual and translator.to_original(virtual) == virtual
            view_patch = PROBE_PATCH.format(name=virtual)
            assert translator.to_original(view_patch) == view_patch, (instance.instance_id, seed, virtual)


def test_the_report_counts_unresolved_units_without_the_names_apart():
    import pyarrow as pa

    from raydist.analysis.contracts import contract_risk
    from raydist.reporting.sections import _contracts

    def row(iid, outcome, names, used):
        return {"model": "m", "agent": "miniswe", "level": "L2", "instance_id": iid, "outcome": outcome,
                "naming_contract": json.dumps(names), "contract_used": used}

    table = pa.Table.from_pylist([row("a", "resolved", ["new_api"], True), row("a", "unresolved", ["new_api"], False),
                                  row("a", "unresolved", ["new_api"], True), row("a", "bug", ["new_api"], None),
                                  row("b", "unresolved", [], None)])
    assert contract_risk(table) == [{"model": "m", "agent": "miniswe", "level": "L2", "instance_id": "a",
                                     "names": "new_api", "finished": 3, "resolved": 1, "unresolved": 2,
                                     "unresolved_without_names": 1}]
    (section,) = _contracts(table)
    assert section.title == "Validity risk: naming contracts" and section.rows == (
        ("m", "miniswe", "L2", "a", "new_api", 3, 1, 2, 1),)
    assert _contracts(table.filter(pa.compute.equal(table["instance_id"], "b"))) == []


OFFLINE = LITE.parent / "offline.jsonl"


@pytest.mark.docker
@pytest.mark.skipif(not OFFLINE.is_file(), reason="../shared/data/swebench is absent")
def test_flask_4992_contract_holds_in_its_repository_and_flask_5063_has_none(client):
    # In the release the instance runs on, Config.from_file(self, filename, load, silent=False)
    # has no ``text``; flask-5063's FAIL_TO_PASS tests call only names flask already defines.
    from raydist.sandbox import ensure_instance_image
    from raydist.tasks import load_instances

    cache = Path.home() / ".cache" / "raydist"
    found = {}
    for instance in load_instances(str(OFFLINE)):
        repo = RepoFiles(ensure_instance_image(client, instance.recipe, cache_dir=cache).repo_dir)
        contract = naming_contract(instance, repo)
        assert contract.checked_at_base
        found[instance.instance_id] = contract.labels()
    assert found == {"pallets__flask-4992": ["from_file(text=)"], "pallets__flask-5063": [],
                     "pydata__xarray-7393": []}
