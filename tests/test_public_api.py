"""The public API at the top of the package: small, loaded on first use, and the very objects
of the modules that define them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _loaded_after(statement: str) -> list[str]:
    probe = f"import sys; {statement}; print(sorted(m for m in ('ray', 'docker', 'litellm') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stderr
    return eval(out.stdout)  # noqa: S307 - a list literal printed by the probe above


def test_import_raydist_loads_neither_ray_docker_nor_litellm():
    assert _loaded_after("import raydist") == []


def test_a_pure_public_name_loads_only_what_its_module_needs():
    assert _loaded_after("import raydist; raydist.build_view; raydist.NamespaceTranslator") == []
    # raydist.problems (its package face) reaches litellm through its LLM agents; never Ray or Docker.
    assert _loaded_after("import raydist; raydist.pass_at_k") == ["litellm"]


def test_importing_raydist_models_or_cluster_loads_no_ray():
    assert "ray" not in _loaded_after("import raydist.models, raydist.cluster")


def test_public_names_are_the_objects_of_their_modules():
    import raydist
    from raydist.cluster.unit_key import RunUnit
    from raydist.problems.metrics import dypass_at_k, pass_at_k
    from raydist.views.l2.translator import NamespaceTranslator
    from raydist.views.levels import build_view

    assert (raydist.RunUnit, raydist.build_view, raydist.NamespaceTranslator) == (RunUnit, build_view,
                                                                                  NamespaceTranslator)
    assert (raydist.pass_at_k, raydist.dypass_at_k) == (pass_at_k, dypass_at_k)
    assert raydist.pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert set(raydist.__all__) <= set(dir(raydist))


def test_every_public_name_resolves():
    import raydist

    missing = [name for name in raydist.__all__ if getattr(raydist, name, None) is None]
    assert missing == []


def test_an_unknown_name_is_an_attribute_error_listing_the_public_ones():
    import raydist

    with pytest.raises(AttributeError, match=r"no attribute 'oracle_agent'; its public names are Instance, Limits"):
        raydist.oracle_agent  # noqa: B018


def test_the_ray_backed_model_names_are_loaded_on_first_use():
    import raydist.models
    from raydist.models.server import ModelServer, follow_server

    assert (raydist.models.ModelServer, raydist.models.follow_server) == (ModelServer, follow_server)
    with pytest.raises(AttributeError, match="has no attribute 'llama_cpp_command'"):
        raydist.models.llama_cpp_command  # noqa: B018


@pytest.mark.parametrize("package", ["raydist", "raydist.agents", "raydist.cluster", "raydist.grading",
                                     "raydist.models"])
def test_a_lazy_package_name_stays_its_object_after_every_submodule_is_imported(package):
    # A public name spelled like one of its package's modules would be shadowed by that module
    # once anything imports it (Python sets the package attribute), and the facade's __getattr__
    # would never run: `from raydist.grading import grade` gave a module when grade.py existed.
    code = (f"import importlib, pkgutil, types\ng = importlib.import_module({package!r})\n"
            "for m in pkgutil.iter_modules(g.__path__): importlib.import_module(f'{g.__name__}.{m.name}')\n"
            "print([n for n in g.__all__ if isinstance(getattr(g, n), types.ModuleType)])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
