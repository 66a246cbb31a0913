"""L2 on real code: toolz 1.0.0 renamed through its mapping still passes its own suite.

The renamed copy is every file of the sdist with its path and text passed through
``to_view``; running it proves the mapping consistent and complete enough to execute.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from raydist.views import build_view
from raydist.views.audit import find_exposures, identity_tokens
from raydist.views.base import RepoFiles
from raydist.views.l2.namespace import namespace_level, namespace_mapping  # noqa: F401  (registers L2)
from raydist.views.l2.translator import NamespaceTranslator

IDENTITY = "pytoolz/toolz"
PROBE = ("from toolz.itertoolz import merge_sorted\n\n\n"
         "def test_probe():\n    list(merge_sorted([1, 2], ['a'], key=None))\n")


@pytest.fixture(scope="session")
def identity(toolz_src):
    return identity_tokens(RepoFiles(toolz_src))


@pytest.fixture(scope="session")
def translator(toolz_src) -> NamespaceTranslator:
    return NamespaceTranslator(namespace_mapping(RepoFiles(toolz_src), IDENTITY, 0))


def renamed_copy(src: Path, dst: Path, translator: NamespaceTranslator) -> None:
    for path in sorted(p for p in src.rglob("*") if p.is_file()):
        out = dst / translator.to_view(path.relative_to(src).as_posix())
        out.parent.mkdir(parents=True, exist_ok=True)
        data = path.read_bytes()
        try:
            out.write_text(translator.to_view(data.decode("utf-8")))
        except UnicodeDecodeError:
            out.write_bytes(data)


def run_pytest(root: Path, *args: str) -> str:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *args]
    return subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=600, check=False).stdout


def passed_count(output: str) -> int:
    match = re.fullmatch(r"(\d+) passed in [\d.]+s", output.strip().splitlines()[-1])
    assert match, f"unexpected pytest summary: {output[-500:]}"
    return int(match.group(1))


def test_toolz_mapping_is_a_collision_free_bijection(toolz_src, translator):
    forward, backward = translator.mapping.forward, translator.mapping.backward
    assert len(forward) == 461 and len(backward) == 461
    assert {v: k for k, v in forward.items()} == backward
    tokens = set(re.findall(r"[A-Za-z_]\w*", "".join(p.read_text() for p in toolz_src.rglob("*.py"))))
    assert not tokens & set(backward)
    assert forward["toolz"] != "toolz" and forward["merge_sorted"].count("_") == 1
    assert "groupby" not in forward and "partial" not in forward and "find_spec" not in forward
    assert "diff" not in forward and "tail" not in forward  # toolz functions named like shell commands


def test_toolz_suite_passes_on_the_renamed_copy_as_on_the_original(toolz_src, translator, tmp_path):
    baseline = passed_count(run_pytest(toolz_src, "toolz/tests"))
    assert baseline == 180
    renamed_copy(toolz_src, tmp_path / "virtual", translator)
    tests = translator.to_view("toolz/tests")
    assert tests != "toolz/tests" and (tmp_path / "virtual" / tests).is_dir()
    assert passed_count(run_pytest(tmp_path / "virtual", tests)) == baseline


def test_real_failure_traceback_shows_no_original_name(toolz_src, translator, identity, tmp_path):
    probed = tmp_path / "probed"
    shutil.copytree(toolz_src, probed)
    (probed / "toolz" / "tests" / "test_probe.py").write_text(PROBE)
    output = run_pytest(probed, "--tb=long", "toolz/tests/test_probe.py")
    assert "1 failed" in output and find_exposures(output, identity) == {"toolz", "itertoolz", "merge_sorted"}
    shown = translator.to_view(output)
    assert find_exposures(shown, identity) == set()
    renamed_copy(probed, tmp_path / "virtual", translator)
    paths = set(re.findall(r"^([\w/]+\.py):\d+: ", shown, re.M))
    assert translator.to_view("toolz/itertoolz.py") in paths
    assert all((tmp_path / "virtual" / p).is_file() for p in paths)


def test_python_traceback_paths_and_functions_are_virtual(toolz_src, translator, identity):
    code = "from toolz.itertoolz import merge_sorted; list(merge_sorted([1, 2], ['a']))"
    done = subprocess.run([sys.executable, "-c", code], cwd=toolz_src, capture_output=True, text=True, timeout=60,
                          check=False)
    # In a sandbox the checkout is /testbed; here its folder (toolz0/toolz-1.0.0) names the project.
    shown = translator.to_view(done.stderr.replace(str(toolz_src), "/testbed"))
    assert 'toolz/itertoolz.py", line' in done.stderr and find_exposures(shown, identity) == set()
    assert f'{translator.to_view("toolz/itertoolz.py")}", line' in shown


def test_level_keeps_files_and_renders_files_invertibly(toolz_src, translator):
    inst = SimpleNamespace(instance_id="toolz-1", repo=IDENTITY, patch="", test_patch="",
                           problem_statement="merge_sorted in toolz/itertoolz.py drops keys")
    view = build_view(inst, RepoFiles(toolz_src), "L2", 0)
    assert view.files == {} and view.meta["l2_names"] == len(translator.mapping.forward) == 461
    assert view.problem_statement == translator.to_view(inst.problem_statement)
    assert find_exposures(inst.problem_statement, view.identity) == {"toolz", "itertoolz", "merge_sorted"}
    assert find_exposures(view.problem_statement, view.identity) == set()
    for path in RepoFiles(toolz_src).python_files():
        text = (toolz_src / path).read_text()
        assert view.translator.to_original(view.render_file(path, text)) == text


def test_same_seed_same_mapping_other_seed_other_mapping(toolz_src, translator):
    repo = RepoFiles(toolz_src)
    assert namespace_mapping(repo, IDENTITY, 0) == translator.mapping
    other = namespace_mapping(repo, IDENTITY, 1)
    assert set(other.forward) == set(translator.mapping.forward)
    assert other.forward["toolz"] != translator.mapping.forward["toolz"]
