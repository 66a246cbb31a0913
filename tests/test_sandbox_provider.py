"""The sandbox provider seam (issue 31): no module outside ``raydist.sandbox`` reaches an engine's
client or a sandbox's container, the registry names the choices of ``sandbox.provider``, and a
launch with an unknown provider is refused at plan time in one line."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from raydist.sandbox import (
    PROVIDERS,
    DockerProvider,
    SandboxProvider,
    SandboxUnavailable,
    base_image_tag,
    connect,
    provider_class,
    register,
)

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "raydist"
SEAM = PACKAGE / "sandbox"

#: Modules outside ``raydist/sandbox`` that may import docker, and why. ``raydist/outcomes.py``
#: classifies a unit's exception (``docker.errors.DockerException`` is an infrastructure failure)
#: with a deferred import, reaching no engine: an exception's type is all it reads.
#: ``raydist/images_command.py`` names a refused image removal by ``docker.errors.APIError``
#: (its image store is read through ``raydist.sandbox.footprint``).
DOCKER_IMPORTERS = {"raydist/outcomes.py", "raydist/images_command.py"}
#: What a sandbox or provider holds of its engine, never touched outside the seam.
ENGINE_ATTRIBUTES = ("containers", "images", "api")


def seam_violations(source: str, where: str, *, may_import_docker: bool = False) -> list[str]:
    """One line per place in ``source`` (Python text of the module ``where``) that goes around
    the seam: an attribute ``.container`` (a sandbox's docker container), ``.client.containers``,
    ``.client.images`` or ``.client.api`` (an engine's client), and, unless
    ``may_import_docker``, an import of ``docker``."""
    problems: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, filename=where)):
        if isinstance(node, ast.Attribute):
            if node.attr == "container":
                problems.append((node.lineno, f"{where}:{node.lineno} reads .container: use the Sandbox's own methods"))
            elif (node.attr in ENGINE_ATTRIBUTES and isinstance(node.value, ast.Attribute)
                  and node.value.attr == "client"):
                problems.append((node.lineno,
                                 f"{where}:{node.lineno} reads .client.{node.attr}: ask the SandboxProvider"))
        elif not may_import_docker and isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(n == "docker" or n.startswith("docker.") for n in names) and not (
                    isinstance(node, ast.ImportFrom) and node.level):
                problems.append((node.lineno, f"{where}:{node.lineno} imports docker: go through raydist.sandbox"))
    return [line for _, line in sorted(problems)]


def test_no_module_outside_the_seam_reaches_the_engine():
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if SEAM in path.parents:
            continue
        where = path.relative_to(ROOT).as_posix()
        problems += seam_violations(path.read_text(encoding="utf-8"), where,
                                    may_import_docker=where in DOCKER_IMPORTERS)
    assert problems == []


def test_the_checker_finds_each_kind_of_planted_violation():
    planted = (
        "import docker\n"
        "from docker.errors import NotFound\n"
        "def tree(box, provider):\n"
        "    stream, _ = box.container.get_archive('/testbed')\n"
        "    provider.client.images.get('x')\n"
        "    box.client.containers.list()\n"
        "    provider.client.api.exec_create('id', ['true'])\n"
        "    from .docker import helper\n"  # a relative module named docker is not the library
    )
    assert seam_violations(planted, "raydist/x.py") == [
        "raydist/x.py:1 imports docker: go through raydist.sandbox",
        "raydist/x.py:2 imports docker: go through raydist.sandbox",
        "raydist/x.py:4 reads .container: use the Sandbox's own methods",
        "raydist/x.py:5 reads .client.images: ask the SandboxProvider",
        "raydist/x.py:6 reads .client.containers: ask the SandboxProvider",
        "raydist/x.py:7 reads .client.api: ask the SandboxProvider",
    ]
    assert seam_violations(planted, "raydist/outcomes.py", may_import_docker=True) == [
        "raydist/outcomes.py:4 reads .container: use the Sandbox's own methods",
        "raydist/outcomes.py:5 reads .client.images: ask the SandboxProvider",
        "raydist/outcomes.py:6 reads .client.containers: ask the SandboxProvider",
        "raydist/outcomes.py:7 reads .client.api: ask the SandboxProvider",
    ]


def test_an_unknown_provider_names_the_setting_the_value_and_the_choices():
    with pytest.raises(ValueError) as exc:
        provider_class("nope")
    assert str(exc.value) == "sandbox.provider='nope' is not a sandbox provider; choose one of: docker, podman"
    with pytest.raises(ValueError) as exc:
        connect("nope")
    assert str(exc.value) == "sandbox.provider='nope' is not a sandbox provider; choose one of: docker, podman"


def test_the_registry_holds_docker_and_refuses_a_second_class_under_its_name():
    assert PROVIDERS["docker"] is DockerProvider
    assert register(DockerProvider) is DockerProvider  # registering the same class again is harmless

    class Impostor(DockerProvider):
        name = "docker"

    with pytest.raises(ValueError) as exc:
        register(Impostor)
    assert str(exc.value).startswith("sandbox provider 'docker' is already DockerProvider")
    assert PROVIDERS["docker"] is DockerProvider


def test_an_unreachable_provider_names_the_engine_the_address_the_remedy_and_the_provider(tmp_path):
    dead = f"unix://{tmp_path}/no-daemon.sock"
    with pytest.raises(SandboxUnavailable) as exc:
        connect("docker", dead, timeout=2)
    message = str(exc.value)
    assert message.startswith(f"cannot reach the Docker daemon at {dead} (")
    assert message.endswith(") for sandbox.provider=docker; start it with `bash launch/setup.sh`, or set "
                            "sandbox.docker_host")


@pytest.mark.docker
def test_connect_of_docker_is_a_docker_provider_whose_sandboxes_copy_out_and_read_their_tree(client, tmp_path):
    provider = connect("docker")
    assert type(provider) is DockerProvider and isinstance(provider, SandboxProvider)
    assert provider.address == (os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock")
    assert provider.image_exists(base_image_tag()) and not provider.image_exists("raydist/no-such-image:0")
    with provider.create(base_image_tag(), name="seam") as box:
        assert box.provider is provider
        box.write_files({"a/b.bin": b"\x00\xff\r\n", "a/run.sh": "#!/bin/sh\n"}, root="/tmp")
        assert box.exec("chmod 755 /tmp/a/run.sh", timeout=30, cwd="/").returncode == 0
        assert box.copy_out("/tmp/a", tmp_path / "out") == tmp_path / "out"
        assert (tmp_path / "out" / "b.bin").read_bytes() == b"\x00\xff\r\n"
        assert (tmp_path / "out" / "run.sh").stat().st_mode & 0o777 == 0o755
        box.copy_out("/tmp/a/b.bin", tmp_path / "one.bin")
        assert (tmp_path / "one.bin").read_bytes() == b"\x00\xff\r\n"
        with pytest.raises(FileNotFoundError) as exc:
            box.copy_out("/tmp/none", tmp_path / "none")
        assert str(exc.value) == f"/tmp/none does not exist in sandbox {box.name}"
        assert box.read_tree("/no-such-root") is None
        with box.read_tree("/tmp/a") as tree, tarfile.open(fileobj=tree, mode="r|") as archive:
            assert sorted(m.name for m in archive) == ["a", "a/b.bin", "a/run.sh"]


def test_a_plan_with_an_unknown_provider_exits_2_with_one_line(tmp_path):
    run = subprocess.run([sys.executable, "-m", "raydist.cli", "plan", "--dry-run", "sandbox.provider=nope",
                          f"output_root={tmp_path}", f"cache_dir={tmp_path / 'cache'}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert (run.returncode, run.stdout, run.stderr) == (
        2, "", "raydist: error: sandbox.provider='nope' is not a sandbox provider; choose one of: docker, podman\n")
    assert list(tmp_path.iterdir()) == []  # refused before any run folder was made
