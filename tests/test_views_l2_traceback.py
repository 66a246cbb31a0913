"""A real failing test, seen through L2 (SchrodingerRepo §III-C, §III-F).

The built-in six instance's FAIL_TO_PASS test fails at the base commit (its test patch is
applied, the fix is not): ``six.ensure_text`` ignores ``errors`` and raises inside ``six.py``,
so pytest's traceback names the repository's test module, module, function and source lines.
The view must show all of them in virtual names, keep everything else byte for byte, and
translate back to the exact raw output; the agent's environment must run the test id the
agent writes in virtual names.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import raydist.views.l2.namespace  # noqa: F401  (registers L2)
from raydist.agents.environment import ViewEnvironment
from raydist.grading import apply_patch
from raydist.sandbox import Limits, as_provider, ensure_instance_image
from raydist.tasks import load_instances
from raydist.views import RepoFiles, build_view
from raydist.views.audit import find_exposures

BUILTIN = Path(__file__).resolve().parents[1] / "raydist" / "tasks" / "builtin" / "instances.jsonl"
INSTANCE = "benjaminp__six-ensure-text-errors"
CACHE = Path.home() / ".cache" / "raydist"
TEST_ID = "test_six.py::test_ensure_text_honours_errors"
PYTEST = "python -m pytest -p no:cacheprovider -o addopts='' "
TOKEN = re.compile(r"[A-Za-z0-9_]+")

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def failing(client):
    """``(view, sandbox, raw pytest output of the failing test)``; the sandbox has the test patch."""
    instance = load_instances(str(BUILTIN), ids=[INSTANCE])[0]
    image = ensure_instance_image(client, instance.recipe, cache_dir=CACHE, label=INSTANCE)
    view = build_view(instance, RepoFiles(image.repo_dir), "L2", 0)
    with as_provider(client).create(image.tag, limits=Limits(memory="1g", pids=256), name="l2-traceback") as box:
        assert apply_patch(box, instance.test_patch, label="test").applied
        result = box.exec(PYTEST + TEST_ID, timeout=120)
        assert result.returncode == 1, result.output
        yield view, box, result.output


def test_raw_failure_names_the_repository_eight_times(failing):
    view, _, raw = failing
    forward = view.translator.mapping.forward
    assert [t for t in TOKEN.findall(raw) if t in forward] == [
        "test_six", "six", "ensure_text", "test_six", "ensure_text", "six", "six", "test_six"]
    assert find_exposures(raw, view.identity) == {"six", "ensure_text"}


def test_view_shows_the_test_module_module_and_function_in_virtual_names(failing):
    view, _, raw = failing
    v = view.translator.mapping.forward
    shown = view.translator.to_view(raw)
    # The one name left: the new test's, which the hidden test patch adds after the view was
    # built; the audit still finds ensure_text inside it.
    assert find_exposures(shown, view.identity) == {"ensure_text"}
    assert find_exposures(shown.replace("test_ensure_text_honours_errors", "t"), view.identity) == set()
    assert f"\n{v['test_six']}.py F " in shown
    assert f">       assert {v['six']}.{v['ensure_text']}(b'caf\\xe9', errors='replace') == u'caf\\ufffd'\n" in shown
    assert f"\n{v['test_six']}.py:1059: \n" in shown
    assert f"    def {v['ensure_text']}(s, encoding='utf-8', errors='strict'):\n" in shown
    assert f'        """Coerce *s* to {v["six"]}.text_type.\n' in shown
    assert f"\n{v['six']}.py:956: UnicodeDecodeError\n" in shown


def test_view_keeps_the_failure_text_that_is_not_the_repository(failing):
    view, _, raw = failing
    v = view.translator.mapping.forward
    shown = view.translator.to_view(raw)
    error = ("E           UnicodeDecodeError: 'utf-8' codec can't decode byte 0xe9 in position 3: "
             "unexpected end of data\n")
    assert error in raw and error in shown
    assert f"FAILED {TEST_ID} - UnicodeDecodeError: 'ut...\n" in raw
    assert f"FAILED {v['test_six']}.py::test_ensure_text_honours_errors - UnicodeDecodeError: 'ut...\n" in shown
    raw_lines, shown_lines = raw.splitlines(), shown.splitlines()
    assert len(raw_lines) == len(shown_lines)
    changed = [i for i, (a, b) in enumerate(zip(raw_lines, shown_lines)) if a != b]
    assert changed == [i for i, line in enumerate(raw_lines) if set(TOKEN.findall(line)) & set(v)]
    assert len(changed) == 7


def test_view_of_the_failure_translates_back_exactly(failing):
    view, _, raw = failing
    assert view.translator.to_original(view.translator.to_view(raw)) == raw


def test_environment_runs_the_test_id_written_in_virtual_names(failing):
    view, box, raw = failing
    virtual_id = f"{view.translator.mapping.forward['test_six']}.py::test_ensure_text_honours_errors"
    env = ViewEnvironment(box, view, timeout=120, output_limit_chars=0)
    out = env.execute({"command": PYTEST + virtual_id})
    assert env.steps[0]["executed"] == PYTEST + TEST_ID
    assert out["returncode"] == 1
    assert find_exposures(out["output"].replace("test_ensure_text_honours_errors", "t"), view.identity) == set()
    assert f"\nFAILED {virtual_id} - UnicodeDecodeError: 'ut...\n" in out["output"]
    assert TEST_ID not in out["output"] and "six.py" not in out["output"]
