"""The package layout as the code has it: raydist's packages are layered as
docs/architecture.md's table says (no import goes up a layer, at module level or inside a
function; only an import under ``if TYPE_CHECKING:`` is exempt), no cycle among the packages
nor among the modules, and pure logic (views, the L2 translator, the DyCodeEval metrics) free of
Ray and Docker. The graph is read from the AST of every module, function-level imports included,
so an upward import or a cycle hidden behind a late import is still found.

A package is one of raydist's top-level subpackages or top-level modules (``raydist.views``,
``raydist.outcomes``), as ``shared/tools/import_cycles.py raydist --packages`` counts them; the
package cycles are counted on every import, TYPE_CHECKING ones included, as that tool does."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"
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


def _is_type_checking(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``typing.TYPE_CHECKING`` (the test of an ``if``)."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def type_checking_imports(tree: ast.AST) -> set[int]:
    """``id``s of the import nodes in the body of an ``if TYPE_CHECKING:`` (not its ``else``)."""
    return {id(inner) for node in ast.walk(tree) if isinstance(node, ast.If) and _is_type_checking(node.test)
            for stmt in node.body for inner in ast.walk(stmt) if isinstance(inner, (ast.Import, ast.ImportFrom))}


@dataclass(frozen=True)
class Import:
    """One import of a module of the package: ``source`` imports ``target`` at ``path:line``;
    ``typing_only`` when it stands under ``if TYPE_CHECKING:``."""

    source: str
    target: str
    path: Path
    line: int
    typing_only: bool


def imports(root: Path, package: str) -> list[Import]:
    """Every import of a module of ``package`` by a module of ``package``, function bodies and
    TYPE_CHECKING blocks included. ``from pkg import name`` is an import of ``pkg.name`` when
    that is a module, else of ``pkg``."""
    names = module_names(root, package)
    found = []
    for module, path in names.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        typing_only = type_checking_imports(tree)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if isinstance(node, ast.Import):
                targets = [n for n in _imported(node, module, path.name == "__init__.py") if n in names]
            else:
                base, *members = _imported(node, module, path.name == "__init__.py")
                targets = [m for m in members if m in names]
                if len(targets) < len(members) and base in names:
                    targets.append(base)
            found += [Import(module, t, path, node.lineno, id(node) in typing_only) for t in targets if t != module]
    return found


def import_graph(root: Path, package: str, *, with_typing_only: bool = True) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports anywhere in its body (functions included;
    TYPE_CHECKING blocks too unless ``with_typing_only`` is False)."""
    graph: dict[str, set[str]] = {m: set() for m in module_names(root, package)}
    for imp in imports(root, package):
        if with_typing_only or not imp.typing_only:
            graph[imp.source].add(imp.target)
    return graph


def package_of(module: str) -> str:
    """The package a module belongs to: its top-level subpackage or top-level module
    (``raydist.cluster.unit`` -> ``raydist.cluster``); the root package is itself."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict[str, set[str]], root_package: str) -> dict[str, set[str]]:
    """The module graph folded onto packages (``package_of``), the root package's own
    ``__init__`` left out, as ``shared/tools/import_cycles.py --packages`` folds it."""
    folded: dict[str, set[str]] = {}
    for module, targets in graph.items():
        source = package_of(module)
        if source == root_package:
            continue
        folded.setdefault(source, set())
        for target in map(package_of, targets):
            if target not in (source, root_package):
                folded[source].add(target)
                folded.setdefault(target, set())
    return folded


def layer_table(text: str) -> dict[str, int]:
    """Package -> layer, from the rows ``| <layer> | `raydist.x` | ... |`` of a markdown table
    of docs/architecture.md (one package a row). Raises ValueError for a package named twice or
    for no row at all."""
    layers: dict[str, int] = {}
    for layer, package in re.findall(r"^\|\s*(\d+)\s*\|\s*`([A-Za-z_][\w.]*)`\s*\|", text, re.M):
        if package in layers:
            raise ValueError(f"{package} has two rows in the layer table")
        layers[package] = int(layer)
    if not layers:
        raise ValueError("no layer table (rows '| <layer> | `package` | ... |') found")
    return layers


def upward_imports(root: Path, package: str, layers: dict[str, int]) -> list[str]:
    """Each import, lazy or not, from a package to a package on a higher layer, or from or to a
    package the table does not name, as ``file:line: a (layer i) imports b (layer j)``; imports
    under ``if TYPE_CHECKING:`` are exempt."""
    found = []
    for imp in imports(root, package):
        source, target = package_of(imp.source), package_of(imp.target)
        if imp.typing_only or source == target or package in (source, target):
            continue
        where = f"{imp.path.relative_to(root).as_posix()}:{imp.line}"
        if source not in layers or target not in layers:
            missing = source if source not in layers else target
            found.append(f"{where}: {source} imports {target}, and {missing} is in no layer of the table")
        elif layers[target] > layers[source]:
            found.append(f"{where}: {source} (layer {layers[source]}) imports {imp.target} "
                         f"({target}, layer {layers[target]})")
    return sorted(set(found))


def top_level_packages(root: Path, package: str) -> set[str]:
    """raydist's packages on disk: its subpackages with Python files and its top-level modules."""
    return {package_of(m) for m in module_names(root, package)} - {package}


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


TABLE = """
| layer | package | for |
|---|---|---|
| 1 | `pkg.low` | leaves |
| 2 | `pkg.mid` | the middle |
| 3 | `pkg.top` | entry |
"""


def test_the_layer_table_is_read_from_its_rows():
    assert layer_table(TABLE) == {"pkg.low": 1, "pkg.mid": 2, "pkg.top": 3}
    with pytest.raises(ValueError, match="pkg.low has two rows"):
        layer_table(TABLE + "| 3 | `pkg.low` | again |\n")
    with pytest.raises(ValueError, match="no layer table"):
        layer_table("| 1 | pkg.low | not backticked |\n")


def test_an_upward_import_inside_a_function_is_named_with_file_line_and_layers(tmp_path):
    root = _tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/low/__init__.py": "",
        "pkg/low/leaf.py": "def f():\n    from pkg.mid.core import g\n    return g\n",
        "pkg/low/rel.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.top import T\n"
                          "def h():\n    from ..top import run\n",
        "pkg/mid/__init__.py": "from pkg.low import leaf\n",
        "pkg/mid/core.py": "import pkg.low.leaf\nfrom . import helper\n",
        "pkg/mid/helper.py": "",
        "pkg/top.py": "from pkg.mid import core\nimport pkg.stray\n",
        "pkg/stray.py": "",
    })
    assert upward_imports(root, "pkg", layer_table(TABLE)) == [
        "pkg/low/leaf.py:2: pkg.low (layer 1) imports pkg.mid.core (pkg.mid, layer 2)",
        "pkg/low/rel.py:5: pkg.low (layer 1) imports pkg.top (pkg.top, layer 3)",
        "pkg/top.py:2: pkg.top imports pkg.stray, and pkg.stray is in no layer of the table",
    ]
    assert top_level_packages(root, "pkg") == {"pkg.low", "pkg.mid", "pkg.top", "pkg.stray"}


def test_package_cycles_count_every_import_as_the_shared_tool_does(tmp_path):
    root = _tree(tmp_path, {
        "pkg/__init__.py": "from pkg import a\n",
        "pkg/a/__init__.py": "",
        "pkg/a/x.py": "from pkg.b import y\n",
        "pkg/b/__init__.py": "",
        "pkg/b/y.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import x\n",
        "pkg/c.py": "import pkg.a.x\n",
    })
    graph = import_graph(root, "pkg")
    assert package_graph(graph, "pkg") == {"pkg.a": {"pkg.b"}, "pkg.b": {"pkg.a"}, "pkg.c": {"pkg.a"}}
    assert cycles(package_graph(graph, "pkg")) == [["pkg.a", "pkg.b"]]
    assert cycles(import_graph(root, "pkg", with_typing_only=False)) == []


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
    """Between modules, an import under TYPE_CHECKING (a name for an annotation) is no edge."""
    graph = import_graph(ROOT, "raydist", with_typing_only=False)
    found = [describe(c, graph) for c in cycles(graph)]
    assert found == [], "import cycles:\n" + "\n".join(found)


def test_raydist_packages_import_each_other_in_no_cycle():
    graph = package_graph(import_graph(ROOT, "raydist"), "raydist")
    found = [describe(c, graph) for c in cycles(graph)]
    assert found == [], "package cycles:\n" + "\n".join(found)


def test_every_raydist_package_has_a_layer_in_the_architecture_doc():
    layers = layer_table(ARCHITECTURE.read_text(encoding="utf-8"))
    assert sorted(top_level_packages(ROOT, "raydist") - set(layers)) == []


def test_no_raydist_import_goes_up_a_layer():
    """The rule of docs/architecture.md's layer table: a package imports only packages on its
    own layer or below, at module level or inside a function."""
    found = upward_imports(ROOT, "raydist", layer_table(ARCHITECTURE.read_text(encoding="utf-8")))
    assert found == [], "imports going up the layers:\n" + "\n".join(found)


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
    text = ARCHITECTURE.read_text(encoding="utf-8")
    assert documented_importers(text, library.capitalize()) == importers_of(ROOT, "raydist", library)


# --- lazy imports ---------------------------------------------------------------------------

HEAVY = ("ray", "docker", "litellm", "torch", "sentence_transformers", "swebench", "datasets")
"""Third-party libraries whose import is slow or reads environment defaults at import time: the
only reason an import of a raydist module may stand inside a function."""

DEFERRED = re.compile(r"#\s*deferred:\s*([\w, ]+)")


@dataclass(frozen=True)
class LazyImport:
    """A function-level import of ``target`` (a module of the package) at ``path:line``, and
    the libraries its ``# deferred: <library>`` comment names (empty: no comment)."""

    path: Path
    line: int
    target: str
    named: tuple[str, ...]


def lazy_imports(root: Path, package: str) -> list[LazyImport]:
    """Every import of a module of ``package`` inside a function body of ``package`` (TYPE_CHECKING
    blocks are no function bodies), with the libraries its comment says it defers."""
    in_functions = _function_import_lines(root, package)
    lines_of: dict[Path, list[str]] = {}
    result = []
    for imp in imports(root, package):
        end = in_functions.get((imp.path, imp.line))
        if end is None:
            continue
        if imp.path not in lines_of:
            lines_of[imp.path] = imp.path.read_text(encoding="utf-8").splitlines()
        lines = lines_of[imp.path]
        match = DEFERRED.search(" ".join(lines[imp.line - 1:end]))
        named = tuple(n.strip() for n in match.group(1).split(",") if n.strip()) if match else ()
        result.append(LazyImport(imp.path, imp.line, imp.target, named))
    return sorted(set(result), key=lambda i: (str(i.path), i.line, i.target))


def _function_import_lines(root: Path, package: str) -> dict[tuple[Path, int], int]:
    """``(path, first line) -> last line`` of every import statement inside a function body."""
    out = {}
    for path in module_names(root, package).values():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    if isinstance(node, (ast.Import, ast.ImportFrom)):
                        out[(path, node.lineno)] = node.end_lineno or node.lineno
    return out


def libraries_loaded(root: Path, module: str) -> set[str]:
    """Which of ``HEAVY`` importing ``module`` alone loads, in a fresh interpreter with ``root``
    first on ``sys.path``."""
    code = f"import importlib, sys; importlib.import_module({module!r}); print(' '.join(sys.modules))"
    run = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120,
                         check=False, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, f"importing {module}: {run.stderr.strip().splitlines()[-1:]}"
    return set(HEAVY) & set(run.stdout.split())


def unjustified_lazy_imports(root: Path, package: str) -> list[str]:
    """The function-level imports of ``package``'s own modules that have no reason to be lazy:
    no ``# deferred: <library>`` comment, a library that is not one of ``HEAVY``, or one that
    importing the target does not load (a stale reason). One line each, naming the place."""
    found = lazy_imports(root, package)
    targets = sorted({lazy.target for lazy in found if lazy.named})
    with ThreadPoolExecutor(max_workers=2) as pool:  # each import of a heavy library takes seconds
        loaded = dict(zip(targets, pool.map(lambda target: libraries_loaded(root, target), targets), strict=True))
    problems = []
    for lazy in found:
        where = f"{lazy.path.relative_to(root)}:{lazy.line} imports {lazy.target} inside a function"
        if not lazy.named:
            problems.append(f"{where}: import it at module level, or say '# deferred: <library>' (one of "
                            f"{', '.join(HEAVY)}) when it loads one")
            continue
        stale = [name for name in lazy.named if name not in HEAVY or name not in loaded[lazy.target]]
        if stale:
            problems.append(f"{where}: it says it defers {', '.join(stale)}, but importing {lazy.target} loads "
                            f"{', '.join(sorted(loaded[lazy.target])) or 'none of ' + ', '.join(HEAVY)}")
    return problems


def test_a_lazy_import_without_a_reason_or_with_a_stale_one_is_named(tmp_path):
    root = _tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/light.py": "import json\n",
        "pkg/heavy.py": "import docker\n",
        "pkg/a.py": ("def f():\n    from pkg.light import json\n\n\n"
                     "def g():\n    from pkg.heavy import docker  # deferred: docker\n\n\n"
                     "def h():\n    from pkg import light  # deferred: docker\n"),
    })
    assert unjustified_lazy_imports(root, "pkg") == [
        "pkg/a.py:2 imports pkg.light inside a function: import it at module level, or say '# deferred: "
        f"<library>' (one of {', '.join(HEAVY)}) when it loads one",
        "pkg/a.py:10 imports pkg.light inside a function: it says it defers docker, but importing pkg.light "
        f"loads none of {', '.join(HEAVY)}",
    ]


def test_raydist_imports_its_own_modules_lazily_only_to_defer_a_heavy_library():
    assert unjustified_lazy_imports(ROOT, "raydist") == []


@pytest.mark.parametrize("entry", ["raydist.launch", "raydist.launch_problems", "raydist.launch_recall",
                                   "raydist.cli", "raydist.launcher"])
def test_an_entry_imports_no_ray_so_a_bad_setting_is_refused_before_ray_starts(entry):
    # the entries check every setting first (exit 2, one line); Ray comes with the first phase that uses it
    assert "ray" not in libraries_loaded(ROOT, entry)
