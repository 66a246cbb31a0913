"""The built wheel: it carries the Hydra configs, the prompt templates and the base-image recipe,
and once installed (not editable) ``raydist`` composes its config from the installed package
in any directory."""

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def _clean_env() -> dict:
    # Neither the checkout (PYTHONPATH) nor a user site may supply raydist to the installed copy.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return {**env, "PYTHONNOUSERSITE": "1"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """raydist's wheel, built from a copy of the source (an in-tree build would leave build/
    and raydist.egg-info in the checkout)."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "raydist", src / "raydist", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                    str(src)], check=True, timeout=600)
    (built,) = out.glob("raydist-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A venv holding the installed wheel (--no-deps) whose dependencies come from this
    interpreter's site-packages through a .pth line (which does not run the .pth files there,
    so an editable raydist of this environment stays out)."""
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    py = root / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "raydist-test-deps.pth").write_text("".join(f"{d}\n" for d in sorted(deps)))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index", "-q",
                    str(wheel)], check=True, timeout=300, env=_clean_env())
    return root


def test_wheel_carries_configs_prompts_and_scripts(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for conf in ["config.yaml", "problems.yaml", "local_models.yaml", "benchmark/builtin.yaml",
                 "sandbox/docker.yaml", "cluster/local.yaml", "sweep/full_levels.yaml", "recall.yaml",
                 "benchmark/swe_qa.yaml", "benchmark/fresh.yaml", "integrity.yaml"]:
        assert f"raydist/conf/{conf}" in names
    prompts = {n for n in names if n.startswith("raydist/conf/prompts/")}
    assert prompts == {f"raydist/conf/prompts/{p.name}" for p in (ROOT / "raydist/conf/prompts").glob("*.j2")}
    assert len(prompts) == 19
    assert {"raydist/sandbox/base_image.sh", "raydist/problems/_run_program.sh",
            "raydist/tasks/builtin/instances.jsonl"} <= names
    entry_points = zipfile.ZipFile(wheel).read("raydist-0.1.0.dist-info/entry_points.txt").decode()
    assert "[console_scripts]\nraydist = raydist.cli:main\n" in entry_points


def test_installed_raydist_is_the_wheel_not_the_checkout(venv, tmp_path):
    out = subprocess.run([str(venv / "bin" / "python"), "-c", "import raydist; print(raydist.__file__)"],
                         cwd=tmp_path, env=_clean_env(), capture_output=True, text=True, check=True)
    assert out.stdout.startswith(str(venv / "lib"))


def test_installed_console_script_helps_and_composes_the_packaged_config(venv, tmp_path):
    raydist = venv / "bin" / "raydist"
    helped = subprocess.run([str(raydist), "--help"], cwd=tmp_path, env=_clean_env(), capture_output=True, text=True,
                            check=False)
    assert helped.returncode == 0, helped.stderr
    assert "usage: raydist [-h] COMMAND ..." in helped.stdout
    shown = subprocess.run([str(raydist), "config", "show", "agent=oracle", "+sweep=full_levels"], cwd=tmp_path,
                           env=_clean_env(), capture_output=True, text=True, timeout=300, check=False)
    assert shown.returncode == 0, shown.stderr
    shown_text = "\n" + shown.stdout  # the schema puts agent first
    assert "\nagent: oracle\n" in shown_text and "\nseeds:\n- 0\n- 1\n- 2\n" in shown_text
    assert list(tmp_path.iterdir()) == []  # composing writes nothing in the working directory


def test_installed_package_finds_its_prompts_and_base_image_recipe(venv, tmp_path):
    code = ("from raydist.prompts import DEFAULT_PROMPTS_DIR, read_templates; "
            "from raydist.sandbox.images import base_image_tag; "
            "print(DEFAULT_PROMPTS_DIR); print(sorted(read_templates('conf/prompts', {'s': 'system'}, 'agent'))); "
            "print(base_image_tag())")
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code], cwd=tmp_path, env=_clean_env(),
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    prompts_dir, fields, tag = out.stdout.splitlines()
    assert prompts_dir.startswith(str(venv / "lib")) and fields == "['s']"
    expected = subprocess.run(["bash", str(ROOT / "raydist/sandbox/base_image.sh"), "--print-tag"],
                              capture_output=True, text=True, check=True).stdout.strip()
    assert tag == expected
