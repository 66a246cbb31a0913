"""The steps that turn the base image into an instance image, as shell commands.

Each step runs in the build container (network none) from ``/testbed``; their order is the
recipe's: pins into a fresh venv, the repository's own install, the injected defect, then the
git repository whose HEAD is the base state every run and grading starts from. Last, the
unprivileged user every sandbox of the image runs as: ``agent`` owns ``/testbed`` and
nothing else; its home is ``/tmp`` and no other directory is writable to it, so all it can
write lands in the sandbox's bounded volumes (:mod:`raydist.sandbox.container`).
"""
from __future__ import annotations

import io
import shlex
import tarfile
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from raydist.sandbox.container import Sandbox

VENV = "/opt/venv"
WHEELS = "/wheels"
PATH = f"{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
INJECTED = "/tmp/raydist-injected.patch"
GIT_AS_RAYDIST = "git -c user.name=raydist -c user.email=raydist@localhost"
# Build byproducts stay out of the base commit, so views and recovered patches see sources only.
GIT_EXCLUDE = "*.egg-info/\n__pycache__/\n*.py[co]\n.pytest_cache/\n"
# `bash -l` reads /etc/profile, which resets PATH; this puts the venv back in front.
PROFILE = f"export VIRTUAL_ENV={VENV}\nexport PATH={VENV}/bin:$PATH\n"
AGENT_USER, AGENT_UID = "agent", 1000
# Bumped whenever the steps change what an image holds, so images of an older layout are
# rebuilt although their recipe key is unchanged (2: the ``agent`` user).
BUILD_VERSION = "2"
OFFLINE_PIP = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": WHEELS, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def copy_inputs(box: Sandbox, source: Path, wheels: Path, injected_patch: str) -> None:
    """Copy the unpacked sdist to ``/testbed``, the wheelhouse to ``/wheels`` and the
    injected patch to ``/tmp``, as one archive through ``put_archive``."""
    with tempfile.TemporaryFile(prefix="raydist-build-", suffix=".tar") as fh:
        with tarfile.open(fileobj=fh, mode="w") as tar:
            tar.add(source, arcname="testbed")
            for wheel in sorted(wheels.glob("*.whl")):
                tar.add(wheel, arcname=f"wheels/{wheel.name}")
            if injected_patch:
                data = (injected_patch if injected_patch.endswith("\n")
                        else injected_patch + "\n").encode("utf-8")
                info = tarfile.TarInfo(INJECTED.lstrip("/"))
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        fh.seek(0)
        box.container.put_archive("/", fh)


def plan(recipe) -> list[tuple[str, str, dict, float]]:
    """``[(step, command, env, timeout_s)]`` building the instance from ``recipe``."""
    env = {**OFFLINE_PIP, "PATH": PATH, "VIRTUAL_ENV": VENV}
    steps: list[tuple[str, str, dict, float]] = [("venv", f"python3 -m venv {VENV} && printf %s {shlex.quote(PROFILE)} "
                      "> /etc/profile.d/raydist-venv.sh", {}, 300)]
    if recipe.install:
        pins = shlex.join(recipe.install)
        steps.append(("install pins", f"{VENV}/bin/pip install --no-index --find-links "
                                      f"{WHEELS} {pins}", env, 3600))
    if recipe.install_repo:
        steps.append(("install_repo", recipe.install_repo, env, 3600))
    if recipe.injected_patch:
        steps.append(("injected_patch", f"git apply --verbose {INJECTED}", {}, 120))
    steps.append(("git base commit", _git_base(), {}, 300))
    steps.append(("clean up", f"rm -rf {WHEELS} /root/.cache/pip {INJECTED}", {}, 300))
    steps.append(("agent user", _agent_user(), {}, 300))
    return steps


def _agent_user() -> str:
    # /var/tmp becomes /tmp (bounded); every other world-writable bit goes, so the agent can
    # only write to /testbed and /tmp.
    return (f"useradd --uid {AGENT_UID} --user-group --home-dir /tmp --no-create-home "
            f"--shell /bin/bash {AGENT_USER} && chown -R {AGENT_USER}:{AGENT_USER} /testbed && "
            "rm -rf /var/tmp && ln -s /tmp /var/tmp && "
            "find / -xdev -perm -0002 ! -type l -exec chmod o-w {} + && "
            f"test -z \"$(find / -xdev -user {AGENT_USER} ! -path '/testbed*' -print -quit)\"")


def _git_base() -> str:
    return (f"git init -q && printf %s {shlex.quote(GIT_EXCLUDE)} >> .git/info/exclude && "
            f"git add -A && {GIT_AS_RAYDIST} commit -q --no-verify -m 'raydist base state'")


def image_changes(key: str) -> list[str]:
    """Dockerfile instructions applied when the build container is committed."""
    return [f"ENV PATH={PATH}", f"ENV VIRTUAL_ENV={VENV}", "WORKDIR /testbed", f"USER {AGENT_USER}",
            f"LABEL raydist.instance-recipe={key}", f"LABEL raydist.build={BUILD_VERSION}"]
