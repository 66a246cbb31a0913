"""Deterministic grading: test commands run with TZ, the hash seed and the locale pinned
(``raydist.grading.environment.GRADING_ENV``), so a test whose outcome depends on them grades
the same on every host. The instance is the built-in wcwidth one with a test file whose three
FAIL_TO_PASS tests depend on one setting each."""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from raydist.grading import HostRunner, grade
from raydist.grading import container as grading_container
from raydist.grading.environment import GRADING_ENV
from raydist.sandbox import ensure_instance_image
from raydist.tasks import load_instances

CACHE = Path(os.environ.get("RAYDIST_CACHE_DIR", Path.home() / ".cache" / "raydist"))
WCWIDTH = "jquast__wcwidth-del-control"
NAMES = ("TZ", "PYTHONHASHSEED", "LC_ALL", "LANG")
# The iteration order of a set of the 26 letters with PYTHONHASHSEED=0 (CPython 3.11, 64-bit).
SEED_0_ORDER = "zravojfxgkpdynbmqushticewl"
ENV_TESTS = {
    "test_hash_order": f"    assert ''.join({{*'abcdefghijklmnopqrstuvwxyz'}}) == {SEED_0_ORDER!r}\n",
    "test_time_zone": "    assert time.localtime(0).tm_hour == 0\n",
    "test_locale": "    assert locale.nl_langinfo(locale.CODESET) == 'UTF-8'\n",
    "test_environment": ("    seen = {name: os.environ.get(name) for name in %r}\n"
                         "    print('ENV=' + json.dumps(seen, sort_keys=True))\n"
                         "    assert seen == %r\n" % (NAMES, dict(GRADING_ENV))),
}
ENV_FILE = "tests/test_env.py"
ENV_IDS = tuple(f"{ENV_FILE}::{name}" for name in ENV_TESTS)
# What a host gives when nothing is pinned: its own zone, a random hash seed, the C locale.
HOST_LIKE = {"TZ": "America/New_York", "PYTHONHASHSEED": "random", "LC_ALL": "C", "LANG": "C"}


def _new_file_diff(path: str, text: str) -> str:
    lines = text.splitlines(keepends=True)
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1,{len(lines)} @@\n" + "".join("+" + line for line in lines))


def _env_instance():
    base = load_instances("builtin", ids=[WCWIDTH])[0]
    source = "import json\nimport locale\nimport os\nimport time\n" + "".join(
        f"\n\ndef {name}():\n{body}" for name, body in ENV_TESTS.items())
    return dataclasses.replace(base, test_patch=base.test_patch + _new_file_diff(ENV_FILE, source),
                               test_cmd=f"{base.test_cmd} {ENV_FILE}",
                               FAIL_TO_PASS=(*base.FAIL_TO_PASS, *ENV_IDS))


@pytest.fixture(scope="module")
def env_instance(client):
    instance = _env_instance()
    image = ensure_instance_image(client, instance.recipe, cache_dir=CACHE, label=WCWIDTH)
    return instance, image.tag


def test_the_grading_environment_is_utc_hash_seed_0_and_c_utf8():
    assert dict(GRADING_ENV) == {"TZ": "UTC", "PYTHONHASHSEED": "0", "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
    with pytest.raises(TypeError):
        GRADING_ENV["TZ"] = "Europe/Paris"  # type: ignore[index]


@pytest.mark.docker
def test_tests_that_depend_on_zone_hash_seed_and_locale_grade_the_same_every_time(client, env_instance):
    instance, image = env_instance
    runs = [grade(client, instance, image, instance.patch, timeout=180) for _ in range(2)]
    for run in runs:
        assert (run.resolved, run.error, run.grading_channel, run.missing) == (True, None, "junit", 0)
        assert run.fail_to_pass == {t: "PASSED" for t in instance.FAIL_TO_PASS}
        assert set(run.pass_to_pass.values()) == {"PASSED"} and len(run.pass_to_pass) == 17
    assert runs[0].tests == runs[1].tests


@pytest.mark.docker
def test_the_exact_environment_reaches_the_test_process(client, env_instance):
    instance, image = env_instance
    run = grade(client, instance, image, instance.patch, timeout=180)
    assert run.fail_to_pass[f"{ENV_FILE}::test_environment"] == "PASSED"
    printed = [line for line in run.log.splitlines() if line.startswith("ENV=")]
    assert printed == ["ENV=" + json.dumps(dict(GRADING_ENV), sort_keys=True)]


@pytest.mark.docker
def test_a_host_like_environment_changes_the_outcome(client, env_instance, monkeypatch):
    """The same grading with the host's kind of environment instead of GRADING_ENV: each
    environment-dependent test fails and the instance is not resolved."""
    instance, image = env_instance
    monkeypatch.setattr(grading_container, "GRADING_ENV", HOST_LIKE)
    run = grade(client, instance, image, instance.patch, timeout=180)
    assert (run.resolved, run.error) == (False, None)
    assert run.fail_to_pass == {**{t: "PASSED" for t in instance.FAIL_TO_PASS[:1]},
                                **{t: "FAILED" for t in ENV_IDS}}


def test_the_host_runner_runs_tests_under_the_grading_environment(tmp_path, monkeypatch):
    for name, value in HOST_LIKE.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "tree").mkdir()
    # ("pip",): a virtualenv whose one pin is already there, so nothing is fetched.
    show = f"import json, os; print('ENV=' + json.dumps({{n: os.environ.get(n) for n in {NAMES!r}}}, sort_keys=True))"
    run = HostRunner(tmp_path / "work").run_in(tmp_path / "tree", ("pip",), f'python -c "{show}"')
    assert [line for line in run.log.splitlines() if line.startswith("ENV=")] == [
        "ENV=" + json.dumps(dict(GRADING_ENV), sort_keys=True)]


# -- the problems pipeline's programs (pass@k checks) ----------------------------------------

@pytest.fixture(scope="module")
def programs(client):
    from raydist.problems.execute import FIRST_UID, ExecLimits, ProgramRunner
    from raydist.sandbox import base_image_tag

    with ProgramRunner(client, base_image_tag(), limits=ExecLimits(cpu_seconds=4, wall_seconds=8),
                       first_uid=FIRST_UID - 110) as pool:
        yield pool


@pytest.mark.docker
def test_programs_run_under_the_grading_environment(programs):
    checks = "".join(body for name, body in ENV_TESTS.items() if name != "test_environment")
    program = ("import json, locale, os, time, sys\n"
               f"seen = {{n: os.environ.get(n) for n in {NAMES!r}}}\n"
               "assert sys.flags.hash_randomization == 0\n"
               f"assert seen == {dict(GRADING_ENV)!r}, seen\n" + checks.replace("    assert", "assert"))
    results = programs.run_many([program, program])
    assert [(r.status, r.passed) for r in results] == [("passed", True)] * 2, results[0].output_tail


def test_a_canonical_check_made_under_another_environment_is_not_reused(monkeypatch):
    from raydist.problems import phases
    from raydist.problems.generate import Variant

    variant = Variant("v1", "A", "humaneval", 0, "gen", "x", prompt="p", accepted=True, tests=("assert f()",))
    pinned = phases._check_digest(variant)
    monkeypatch.setattr(phases, "GRADING_ENV", HOST_LIKE)
    assert phases._check_digest(variant) != pinned
