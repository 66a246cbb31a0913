"""L3 keeps registration order on real libraries (SchrodingerRepo §III-D, ``l3_pins``).

Uses the click 8.5.1 and flask 3.1.1 source releases from PyPI: click's sources and its test
suite (parametrized tests, fixtures, test functions collected in definition order), and
flask's tutorial app, whose views register with ``@bp.route``.
"""

from __future__ import annotations

import ast
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from raydist.views import RepoFiles, ViewOptions, build_view
from raydist.views.l3_reorder import pinned_definitions, reorder_source

SDIST_CACHE = Path(tempfile.gettempdir()) / "raydist-test-sdists"


def sdist(name: str, version: str, root: Path) -> Path:
    """A pristine unpack of ``name==version``'s sdist under ``root`` (downloaded once, cached)."""
    archive = SDIST_CACHE / f"{name}-{version}.tar.gz"
    if not archive.exists():
        SDIST_CACHE.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", f"{name}=={version}",
               "-d", str(SDIST_CACHE)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if done.returncode != 0 or not archive.exists():
            pytest.skip(f"cannot download the {name} {version} sdist from PyPI: {done.stderr.strip()[-300:]}")
    with tarfile.open(archive) as tar:
        tar.extractall(root, filter="data")
    return root / f"{name}-{version}"


@pytest.fixture(scope="module")
def click_src(tmp_path_factory) -> Path:
    return sdist("click", "8.5.1", tmp_path_factory.mktemp("click"))


@pytest.fixture(scope="module")
def flask_src(tmp_path_factory) -> Path:
    return sdist("flask", "3.1.1", tmp_path_factory.mktemp("flask"))


def bodies(source: str) -> dict[str, list[str]]:
    """Definition names of the module (key ``""``) and of each top-level class, in order."""
    tree = ast.parse(source)
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    out = {"": [s.name for s in tree.body if isinstance(s, defs)]}
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef):
            out.setdefault(stmt.name, []).extend(s.name for s in stmt.body if isinstance(s, defs))
    return out


def pinned_sequences(source: str, pins: list[tuple[str, str]]) -> dict[str, list[str]]:
    """Per body, the names of its pinned definitions in the order ``source`` has them."""
    wanted: dict[str, set[str]] = {}
    for name, _ in pins:
        scope, _, member = name.rpartition(".")
        wanted.setdefault(scope, set()).add(member)
    return {scope: [n for n in names if n in wanted.get(scope, ())] for scope, names in bodies(source).items()}


def test_every_click_file_keeps_its_pinned_definitions_in_order(click_src):
    files = sorted(click_src.rglob("*.py"))
    pinned_total = moved_files = 0
    for path in files:
        source = path.read_text()
        pins = pinned_definitions(source)
        pinned_total += len(pins)
        want = pinned_sequences(source, pins)
        for seed in range(3):
            out = reorder_source(source, random.Random(seed))
            assert pinned_sequences(out, pins) == want, f"{path} seed {seed}"
            moved_files += bodies(out) != bodies(source)
    assert len(files) == 77 and pinned_total == 604
    assert moved_files > 40


FLASKR_ROUTES = {
    "blog.py": [("index", "decorator: bp.route"), ("create", "decorator: bp.route"),
                ("update", "decorator: bp.route"), ("delete", "decorator: bp.route")],
    "auth.py": [("load_logged_in_user", "decorator: bp.before_app_request"), ("register", "decorator: bp.route"),
                ("login", "decorator: bp.route"), ("logout", "decorator: bp.route")],
}


@pytest.mark.parametrize("name", FLASKR_ROUTES)
def test_flask_blueprint_views_keep_their_order_and_helpers_move(flask_src, name):
    source = (flask_src / "examples" / "tutorial" / "flaskr" / name).read_text()
    pins = pinned_definitions(source)
    assert pins == FLASKR_ROUTES[name]
    routes = [n for n, _ in pins]
    layouts = set()
    for seed in range(40):
        names = bodies(reorder_source(source, random.Random(seed)))[""]
        assert [n for n in names if n in routes] == routes
        layouts.add(tuple(names))
    helper = {"blog.py": "get_post", "auth.py": "login_required"}[name]
    assert len({names.index(helper) for names in layouts}) == 5  # the helper takes every slot among 4 views


def collect(root: Path) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "tests"]
    done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=600, env=_env(root))
    assert done.returncode == 0, done.stdout[-2000:]
    return [line for line in done.stdout.splitlines() if "::" in line]


SUBSET = ["tests/test_basic.py", "tests/test_commands.py", "tests/test_options.py", "tests/test_chain.py",
          "tests/test_context.py"]


def run_subset(root: Path) -> str:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *SUBSET]
    done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=900, env=_env(root))
    return done.stdout.strip().splitlines()[-1].rsplit(" in ", 1)[0]


def _env(root: Path) -> dict[str, str]:
    return {"PYTHONPATH": str(root / "src"), "PATH": "/usr/bin:/bin", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


def click_view_copy(src: Path, dst: Path, seed: int) -> list[str]:
    shutil.copytree(src, dst)
    inst = SimpleNamespace(instance_id="click-8.5.1", problem_statement="", patch="", test_patch="")
    view = build_view(inst, RepoFiles(src), "L3", seed, ViewOptions(l3_files="all"))
    assert view.meta["l3_skipped"] == {}
    for path, text in view.files.items():
        (dst / path).write_text(text)
    return view.meta["l3_reordered"]


@pytest.mark.slow
def test_click_suite_collects_in_the_same_order_and_passes_on_reordered_views(click_src, tmp_path):
    original = collect(click_src)
    assert len(original) == 1510
    baseline = run_subset(click_src)
    assert baseline == "934 passed, 1 xfailed"
    for seed in (0, 1):
        dst = tmp_path / f"seed{seed}"
        reordered = click_view_copy(click_src, dst, seed)
        assert "src/click/core.py" in reordered and "tests/test_options.py" in reordered
        assert collect(dst) == original
    assert run_subset(tmp_path / "seed0") == baseline
