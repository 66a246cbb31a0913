"""L3 keeps registration order on real libraries (SchrodingerRepo §III-D, ``l3_pins``).

Uses the click 8.5.1 and flask 3.1.1 source releases from PyPI: click's sources and its test
suite (parametrized tests, fixtures, test functions collected in definition order), and
flask's tutorial app, whose views register with ``@bp.route``.
"""

from __future__ import annotations

import ast
import random
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

from raydist.views.l3.reorder import pinned_definitions, reorder_source

SDIST_CACHE = Path(tempfile.gettempdir()) / "raydist-test-sdists"


def sdist(name: str, version: str, root: Path) -> Path:
    """A pristine unpack of ``name==version``'s sdist under ``root`` (downloaded once, cached)."""
    archive = SDIST_CACHE / f"{name}-{version}.tar.gz"
    if not archive.exists():
        SDIST_CACHE.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", f"{name}=={version}",
               "-d", str(SDIST_CACHE)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
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
