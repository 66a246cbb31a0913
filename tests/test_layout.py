"""The package layout as the code has it: no import cycle among raydist's modules, no module
over 400 lines, and pure logic (views, the L2 translator, the DyCodeEval metrics) free of Ray
and Docker. The graph is read from the AST of every module, function-level imports included,
so a cycle hidden behind a late import is still a cycle."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 400
PURE = ("raydist.views", "raydist.problems.metrics", "raydist.views.l2.translator", "raydist.recall.gold",
        "raydist.recall.answer", "raydist.recall.score", "raydist.recall.rounds")
IMPURE = ("ray", "docker")


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under ``root/package`` (a package is its
    ``__init__.py``, named like the package)."""
    names = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def _imported(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """Dotted names one import statement imports (``from a import b`` gives ``a`` and ``a.b``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        anchor = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
        base = ".".join([*anchor, base] if base else anchor)
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports anywhere in its body (functions included).
    ``from pkg import name`` is an import of ``pkg.name`` when that is a module, else of ``pkg``."""
    names = module_names(root, package)
    graph: dict[str, set[str]] = {}
    for module, path in names.items():
        targets = set()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                targets.update(n for n in _imported(node, module, path.name == "__init__.py") if n in names)
                continue
            base, *members = _imported(node, module, path.name == "__init__.py")
            found = [m for m in members if m in names]
            targets.update(found)
            if len(found) < len(members) and base in names:
                targets.add(base)
        graph[module] = targets - {module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted;
    every module of one imports, through the others, every other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def describe(component: list[str], graph: dict[str, set[str]]) -> str:
    """One cycle as its edges, ``a -> b`` each."""
    members = set(component)
    return "; ".join(f"{a} -> {b}" for a in component for b in sorted(graph[a] & members))


def long_modules(root: Path, package: str, limit: int = MAX_LINES) -> dict[str, int]:
    """Module -> line count, for the modules over ``limit`` lines."""
    counts = {m: len(p.read_text(encoding="utf-8").splitlines()) for m, p in module_names(root, package).items()}
    return {m: n for m, n in sorted(counts.items()) if n > limit}


def imports_anywhere(module: str, path: Path) -> set[str]:
    """Every dotted name module ``module`` (file ``path``) imports, function bodies included."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n for node in ast.walk(tree) for n in _imported(node, module, path.name == "__init__.py")}


def impure_imports(root: Path, package: str, pure: tuple[str, ...]) -> dict[str, list[str]]:
    """Module of ``pure`` (a module or everything under a package) -> the Ray or Docker
    modules it imports anywhere in its body."""
    found = {}
    for module, path in module_names(root, package).items():
        if not any(module == p or module.startswith(p + ".") for p in pure):
            continue
        names = sorted(n for n in imports_anywhere(module, path) if n.split(".")[0] in IMPURE)
        if names:
            found[module] = names
    return found


# --- the checks, fed the very case each exists to catch -----------------------------------


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_a_cycle_through_a_function_level_import_is_found(tmp_path):
    root = _tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg.b import f\n",
        "pkg/b.py": "def f():\n    from pkg import a\n    return a\n",
        "pkg/c.py": "import pkg.a\n",
    })
    graph = import_graph(root, "pkg")
    assert graph == {"pkg": set(), "pkg.a": {"pkg.b"}, "pkg.b": {"pkg.a"}, "pkg.c": {"pkg.a"}}
    assert cycles(graph) == [["pkg.a", "pkg.b"]]
    assert describe(["pkg.a", "pkg.b"], graph) == "pkg.a -> pkg.b; pkg.b -> pkg.a"


def test_relative_imports_and_names_of_a_package_face_resolve(tmp_path):
    root = _tree(tmp_path, {
        "pkg/__init__.py": "from .sub import thing\n",
        "pkg/sub/__init__.py": "from .mod import thing\n",
        "pkg/sub/mod.py": "from pkg import other\nthing = 1\n",
        "pkg/other.py": "from ..outside import x\n",
    })
    graph = import_graph(root, "pkg")
    assert graph["pkg"] == {"pkg.sub"}
    assert graph["pkg.sub"] == {"pkg.sub.mod"}
    assert graph["pkg.sub.mod"] == {"pkg.other"}
    assert cycles(graph) == []


def test_a_module_over_the_limit_is_named_with_its_lines(tmp_path):
    root = _tree(tmp_path, {"pkg/__init__.py": "", "pkg/big.py": "x = 1\n" * 401, "pkg/ok.py": "x = 1\n" * 400})
    assert long_modules(root, "pkg") == {"pkg.big": 401}


def test_ray_imported_inside_a_function_of_a_pure_module_is_found(tmp_path):
    root = _tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/pure/__init__.py": "",
        "pkg/pure/calc.py": "def f():\n    import ray.util\n    from docker import errors\n",
        "pkg/driver.py": "import ray\n",
    })
    assert impure_imports(root, "pkg", ("pkg.pure",)) == {"pkg.pure.calc": ["docker", "docker.errors", "ray.util"]}


# --- raydist as it stands ------------------------------------------------------------------


def test_raydist_modules_import_each_other_in_no_cycle():
    graph = import_graph(ROOT, "raydist")
    found = [describe(c, graph) for c in cycles(graph)]
    assert found == [], "import cycles:\n" + "\n".join(found)


def test_no_raydist_module_is_over_400_lines():
    assert long_modules(ROOT, "raydist") == {}


def test_pure_modules_name_neither_ray_nor_docker():
    assert impure_imports(ROOT, "raydist", PURE) == {}


@pytest.mark.parametrize("module", PURE)
def test_importing_pure_logic_loads_neither_ray_nor_docker(module):
    probe = f"import sys, {module}; print(sorted(m for m in ('ray', 'docker') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# --- docs/architecture.md says where Ray and Docker are called; the code must agree ---------


def importers_of(root: Path, package: str, library: str) -> set[str]:
    """Files (``raydist/...py``, relative to ``root``) that import ``library`` anywhere."""
    return {path.relative_to(root).as_posix() for module, path in module_names(root, package).items()
            if any(n.split(".")[0] == library for n in imports_anywhere(module, path))}


def documented_importers(text: str, library: str) -> set[str]:
    """The backticked ``raydist/...py`` paths of the paragraph "<library> is imported by: ..."."""
    import re

    start = text.index(f"{library} is imported by:")
    paragraph = text[start:text.index("\n\n", start)]
    return set(re.findall(r"`(raydist/[\w/]+\.py)`", paragraph))


def test_a_module_that_starts_importing_docker_is_found(tmp_path):
    root = _tree(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "def f():\n    import docker.errors\n",
                            "pkg/b.py": "import json\n"})
    assert importers_of(root, "pkg", "docker") == {"pkg/a.py"}
    assert documented_importers("Docker is imported by: `raydist/x/y.py` and `raydist/z.py`.\n\nnext",
                                "Docker") == {"raydist/x/y.py", "raydist/z.py"}


@pytest.mark.parametrize("library", ["ray", "docker"])
def test_architecture_doc_names_every_module_that_imports_ray_and_docker(library):
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert documented_importers(text, library.capitalize()) == importers_of(ROOT, "raydist", library)
