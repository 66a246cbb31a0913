"""Record normalisation and schema: field forms, recipes, errors, hashes."""

import json

import pytest

from raydist.tasks import DEFAULT_INSTALL, MalformedInstance, MissingTestCommand, Recipe, Sdist, instance_from_record

SHA = "91666032d6723dc5905248417ef0dc9e4c51df9526aaeef271eacad6491f06a4"
F2P = ["t.py::test_a", "t.py::test_b[x y]"]
PATCH = "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
TEST_PATCH = "--- a/t.py\n+++ b/t.py\n@@ -1 +1 @@\n-y = 1\n+y = 2\n"


def record(**changes):
    base = {
        "instance_id": "o__r-1", "repo": "o/r", "base_commit": "abc", "patch": PATCH, "test_patch": TEST_PATCH,
        "problem_statement": "S", "FAIL_TO_PASS": F2P, "PASS_TO_PASS": [], "version": "1.0",
    }
    return {k: v for k, v in (base | changes).items() if v is not ...}


@pytest.mark.parametrize("form", [F2P, json.dumps(F2P), str(F2P), tuple(F2P)])
def test_test_lists_normalise_from_list_json_and_python_literal(form):
    assert instance_from_record(record(FAIL_TO_PASS=form), "x:1").FAIL_TO_PASS == ("t.py::test_a", "t.py::test_b[x y]")


@pytest.mark.parametrize("form", [["a==1", "b==2"], '["a==1", "b==2"]', "['a==1', 'b==2']"])
def test_install_normalises_from_list_json_and_python_literal(form):
    inst = instance_from_record(record(sdist={"name": "r", "version": "1", "sha256": SHA}, install=form), "x:1")
    assert inst.recipe.install == ("a==1", "b==2")


def test_sdist_makes_a_recipe_with_defaults():
    inst = instance_from_record(record(sdist={"name": "r", "version": "1", "sha256": SHA}), "x:1")
    assert inst.recipe == Recipe(Sdist("r", "1", SHA, None), DEFAULT_INSTALL, None, "", "3.11")
    assert DEFAULT_INSTALL == ("pytest==8.3.4",)


def test_no_sdist_means_no_recipe_and_recipe_fields_stay_in_extra():
    inst = instance_from_record(record(install=["a==1"], hints_text="h"), "x:1")
    assert inst.recipe is None
    assert inst.extra == {"install": ["a==1"], "hints_text": "h"}


def test_missing_test_cmd_loads_as_empty_and_fails_only_when_required():
    inst = instance_from_record(record(), "x:1")
    assert inst.test_cmd == ""
    with pytest.raises(MissingTestCommand, match="instance 'o__r-1' has no 'test_cmd'"):
        inst.require_test_cmd()


@pytest.mark.parametrize(
    ("changes", "field", "problem"),
    [
        ({"repo": ...}, "repo", "is missing"),
        ({"instance_id": "  "}, "instance_id", "is empty"),
        ({"patch": 3}, "patch", "is not a string (got int)"),
        ({"FAIL_TO_PASS": 7}, "FAIL_TO_PASS", "is not a list of test ids (got int)"),
        ({"PASS_TO_PASS": "not a list"}, "PASS_TO_PASS", "is not a list of test ids (got str)"),
        ({"PASS_TO_PASS": [1, 2]}, "PASS_TO_PASS", "is not a list of test ids (got a list with non-string items)"),
        ({"sdist": {"name": "r", "version": "1", "sha256": "abc"}}, "sdist.sha256", "is not 64 hex digits (got 'abc')"),
        ({"sdist": {"name": "r", "sha256": SHA}}, "sdist.version", "is missing or not a string (got NoneType)"),
        ({"sdist": "r-1.tar.gz"}, "sdist", "is not an object with name, version, sha256 (got str)"),
    ],
)
def test_malformed_fields_name_source_and_field(changes, field, problem):
    with pytest.raises(MalformedInstance) as caught:
        instance_from_record(record(**changes), "instances.jsonl:7")
    assert (caught.value.source, caught.value.field, caught.value.problem) == ("instances.jsonl:7", field, problem)
    assert str(caught.value) == f"instances.jsonl:7: field {field!r} {problem}; fix or remove the line"


def test_to_record_writes_test_lists_as_json_strings_and_round_trips():
    inst = instance_from_record(record(sdist={"name": "r", "version": "1", "sha256": SHA}, test_cmd="pytest", x=1),
                                "x:1")
    rec = inst.to_record()
    assert rec["FAIL_TO_PASS"] == '["t.py::test_a", "t.py::test_b[x y]"]'
    assert rec["PASS_TO_PASS"] == "[]"
    assert rec["sdist"] == {"name": "r", "version": "1", "sha256": SHA}
    assert instance_from_record(rec, "y:1") == inst


def test_recipe_key_is_16_hex_and_changes_with_any_field():
    recipe = Recipe(Sdist("r", "1", SHA), ("pytest==8.3.4",), None)
    assert len(recipe.key()) == 16 and int(recipe.key(), 16) >= 0
    assert recipe.key() == Recipe(Sdist("r", "1", SHA), ("pytest==8.3.4",), None).key()
    changed = [Recipe(Sdist("r", "2", SHA), ("pytest==8.3.4",), None),
               Recipe(Sdist("r", "1", SHA), ("pytest==8.3.5",), None),
               Recipe(Sdist("r", "1", SHA), ("pytest==8.3.4",), "pip install ."),
               Recipe(Sdist("r", "1", SHA), ("pytest==8.3.4",), None, "d"),
               Recipe(Sdist("r", "1", SHA), ("pytest==8.3.4",), None, "", "3.12")]
    assert len({recipe.key(), *(c.key() for c in changed)}) == 6


def test_content_hash_changes_with_a_field():
    inst = instance_from_record(record(), "x:1")
    assert len(inst.content_hash()) == 16
    assert inst.content_hash() == instance_from_record(record(), "y:2").content_hash()
    assert inst.content_hash() != instance_from_record(record(problem_statement="S2"), "x:1").content_hash()


@pytest.mark.parametrize("form", [[], "[]", "()"])
def test_empty_fail_to_pass_is_refused_since_every_patch_would_resolve(form):
    with pytest.raises(MalformedInstance, match=r"x\.jsonl:3: instance 'o__r-1': field 'FAIL_TO_PASS' is empty"):
        instance_from_record(record(FAIL_TO_PASS=form), "x.jsonl:3")
