"""llama.cpp's own HTTP server (`llama-server`), the embedded model's server.

Why this server: llama-cpp-python's Python server answers one request at a time and applies a
GBNF grammar by checking every one of Gemma 3's 262,144 vocabulary tokens at every step, while
`llama-server` runs several slots in parallel (continuous batching), keeps each slot's prompt
cache so a conversation's next step only evaluates its new messages, and samples under a grammar
lazily. On this project's 2-core reference machine the README's main job spends almost all its
time in the model, and `bench/serving.py` measured the same requests 7.7x faster here.

No wheel on PyPI ships the binary, so it is compiled once per machine from the llama.cpp sources
vendored in the llama-cpp-python sdist of `LLAMA_CPP_PYTHON_VERSION` (downloaded by pip from
PyPI, checked against `SDIST_SHA256`), and kept in `~/.cache/raydist/llama-server/<version>-<options>/`.
`launch/setup.sh` does it; by hand: `python -m raydist.models.llama_server build`.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

# The llama-cpp-python release whose vendored llama.cpp is built, and its sdist's sha256 on PyPI.
LLAMA_CPP_PYTHON_VERSION = "0.3.36"
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
ENV_VAR = "RAYDIST_LLAMA_SERVER"
BINARY = "llama-server"
# Only the server, statically linked so the cached binary needs no library path; no web UI
# (it is downloaded at build time), no TLS, no tests or examples.
CMAKE_FLAGS = [
    "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DGGML_BUILD_TESTS=OFF",
    "-DGGML_BUILD_EXAMPLES=OFF",
]
# x86 instruction sets compiled in when /proc/cpuinfo lists every flag of the entry. Not
# `-march=native`: that also turns on AMX wherever the CPU advertises it, and a virtual machine can
# advertise AMX without granting its tile state, where llama.cpp's AMX kernels die with SIGILL
# on the first matrix product (seen on a Xeon guest). The rest are kept: AVX-512 matters here.
X86_FEATURES = {
    "GGML_SSE42": ("sse4_2",), "GGML_AVX": ("avx",), "GGML_AVX2": ("avx2",), "GGML_FMA": ("fma",),
    "GGML_F16C": ("f16c",), "GGML_BMI2": ("bmi2",), "GGML_AVX_VNNI": ("avx_vnni",),
    "GGML_AVX512": ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"),
    "GGML_AVX512_VBMI": ("avx512vbmi",), "GGML_AVX512_VNNI": ("avx512_vnni",),
    "GGML_AVX512_BF16": ("avx512_bf16",),
}


class LlamaServerMissing(FileNotFoundError):
    """No `llama-server` binary was found; the message says how to build one."""


def cpu_options(cpuinfo: str | None = None, machine: str | None = None) -> list[str]:
    """CMake options choosing the instruction sets of the build: on x86-64, `GGML_NATIVE=OFF` and
    each `X86_FEATURES` entry whose flags all appear in `cpuinfo` (default: /proc/cpuinfo's first
    `flags` line), never AMX; elsewhere none (llama.cpp's native detection).

    Returns:
        e.g. `["-DGGML_NATIVE=OFF", "-DGGML_SSE42=ON", "-DGGML_AVX=ON", ...]`.
    """
    machine = machine or os.uname().machine
    if machine not in ("x86_64", "AMD64"):
        return []
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    line = next((ln for ln in cpuinfo.splitlines() if ln.startswith("flags")), "")
    flags = set(line.partition(":")[2].split())
    on = [name for name, needs in X86_FEATURES.items() if flags.issuperset(needs)]
    return ["-DGGML_NATIVE=OFF", *(f"-D{name}=ON" for name in on)]


def cache_dir(version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    """`$XDG_CACHE_HOME/raydist/llama-server/<version>-<8 hex>` (default `~/.cache/...`): where
    `build` puts the binary and `llama_server_path` looks for it. The hex names the configure
    options (`CMAKE_FLAGS` and `cpu_options()`), so a binary built with other options is never
    taken for this one."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    digest = hashlib.sha256(" ".join([*CMAKE_FLAGS, *cpu_options()]).encode()).hexdigest()[:8]
    return base / "raydist" / "llama-server" / f"{version}-{digest}"


def llama_server_path() -> str:
    """The `llama-server` binary this node runs: `$RAYDIST_LLAMA_SERVER` when set, else the
    one `build` cached (`cache_dir()`), else `llama-server` on PATH.

    Returns:
        Absolute path of an executable file (str).

    Raises:
        LlamaServerMissing: none of the three exists (or `$RAYDIST_LLAMA_SERVER` names no
            executable); the message gives the build command.
    """
    named = os.environ.get(ENV_VAR)
    if named:
        if os.path.isfile(named) and os.access(named, os.X_OK):
            return os.path.abspath(named)
        raise LlamaServerMissing(f"{ENV_VAR}={named} is not an executable file; point it at a llama-server "
                                 f"binary or unset it to use the one `python -m {__name__} build` makes")
    cached = cache_dir() / BINARY
    if cached.is_file() and os.access(cached, os.X_OK):
        return str(cached)
    on_path = shutil.which(BINARY)
    if on_path:
        return on_path
    raise LlamaServerMissing(
        f"llama.cpp's {BINARY} is not built on this machine (looked at ${ENV_VAR}, {cached} and PATH); "
        f"build it with `bash launch/setup.sh setup` or `python -m {__name__} build` (needs cmake and a "
        "C++ compiler, a few minutes), or set $RAYDIST_LLAMA_SERVER to an existing binary")


def build(version: str = LLAMA_CPP_PYTHON_VERSION, *, jobs: int | None = None, force: bool = False) -> Path:
    """Compile `llama-server` from the llama-cpp-python `version` sdist into `cache_dir(version)`,
    unless a binary is there already (`force` rebuilds).

    The sdist comes through `pip download` (PyPI, or the index pip is configured with) and must
    match `SDIST_SHA256` when `version` is the pinned one. The binary is moved into place only
    once it has built and answered `--version`, so an interrupted build leaves nothing behind.

    Args:
        version: llama-cpp-python release whose vendored llama.cpp is built.
        jobs: parallel compile jobs; default the number of CPUs.
        force: rebuild even when a binary is cached.

    Returns:
        Path of the binary.

    Raises:
        RuntimeError: cmake is missing, or the download, hash check, configure or build failed
            (the message carries the failing command's last output lines).
    """
    target = cache_dir(version) / BINARY
    if target.is_file() and not force:
        return target
    if shutil.which("cmake") is None:
        raise RuntimeError("building llama-server needs cmake and a C++ compiler: apt-get install cmake "
                           "build-essential (or pip install cmake), then build again")
    jobs = jobs or os.cpu_count() or 1
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="llama-server-build-", dir=target.parent) as work:
        work = Path(work)
        source = _download_sources(version, work)
        build_dir = work / "build"
        _run(["cmake", "-S", str(source), "-B", str(build_dir), *CMAKE_FLAGS, *cpu_options()], "configure")
        _run(["cmake", "--build", str(build_dir), "--target", BINARY, "-j", str(jobs)], "build")
        built = build_dir / "bin" / BINARY
        _run([str(built), "--version"], "check")
        os.replace(built, target)
    return target


def _download_sources(version: str, work: Path) -> Path:
    """The llama.cpp source tree inside the downloaded, hash-checked sdist."""
    requirement = f"llama-cpp-python=={version}"
    if version == LLAMA_CPP_PYTHON_VERSION:
        requirement += f" --hash=sha256:{SDIST_SHA256}"
    requirements = work / "requirements.txt"
    requirements.write_text(requirement + "\n")
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--progress-bar", "off",
               "-r", str(requirements), "-d", str(work)]
    if version == LLAMA_CPP_PYTHON_VERSION:
        command.append("--require-hashes")
    _run(command, "download")
    (sdist,) = work.glob("llama_cpp_python-*.tar.gz")
    with tarfile.open(sdist) as archive:
        archive.extractall(work / "src", filter="data")
    (root,) = (work / "src").iterdir()
    return root / "vendor" / "llama.cpp"


def _run(argv: list[str], what: str) -> None:
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join(done.stdout.splitlines()[-25:])
        raise RuntimeError(f"llama-server {what} failed (exit {done.returncode}): {' '.join(argv)}\n{tail}")


def main(argv: list[str] | None = None) -> int:
    """`python -m raydist.models.llama_server build [--force] [--jobs N]` builds and prints the
    binary's path; `... path` prints the binary a server would run, or why there is none (exit 1)."""
    parser = argparse.ArgumentParser(prog=f"python -m {__name__}", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("build", help="compile llama-server into the cache unless it is there")
    make.add_argument("--force", action="store_true", help="rebuild even when a binary is cached")
    make.add_argument("--jobs", type=int, default=None, help="parallel compile jobs (default: all CPUs)")
    sub.add_parser("path", help="print the llama-server binary a model server would run")
    args = parser.parse_args(argv)
    try:
        print(build(jobs=args.jobs, force=args.force) if args.command == "build" else llama_server_path())
    except (RuntimeError, LlamaServerMissing) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
