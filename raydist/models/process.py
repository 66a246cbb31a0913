"""An OpenAI-compatible model server as a child process: started with a command, checked for
health and liveness, stopped with its process group (llama.cpp here, `vllm serve` on GPU nodes).

The server command is data: a list of strings whose `{host}`, `{port}`, `{model_path}` and
`{llama_server}` placeholders are filled in at start, on the node that runs the server, so the
same code launches

    {llama_server} --model {model_path} --host {host} --port {port} ...
    vllm serve {model_path} --host {host} --port {port} ...

`raydist.models.supervisor` keeps one answering; `raydist.models.server` runs that under Ray.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from pathlib import Path

from raydist.models.llama_server import LlamaServerMissing, llama_server_path
from raydist.models.local import embedded_model_path

_PR_SET_PDEATHSIG = 1
LOG_TAIL_LINES = 30

DEFAULT_HOST = "127.0.0.1"
"""The interface a model server binds unless its ``local_models`` entry names one (``host``):
loopback, so only this machine reaches it."""

ALL_INTERFACES = "0.0.0.0"


class ModelServerError(RuntimeError):
    """The model server did not start or stopped answering; the message holds its log tail."""


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port on `host` that is free now (the OS picks it; it may be taken later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing listens on (or holds) `host:port` now, so a server may bind it.

    SO_REUSEADDR as servers set it: a port whose only traces are TIME_WAIT connections of a
    dead server counts as free, one with a live listener does not."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def _die_with_parent(parent_pid: int):
    """preexec_fn: ask the kernel to SIGKILL the child when the forking thread's process dies."""

    def _preexec() -> None:
        if sys.platform.startswith("linux"):
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            # The parent may have died between fork and prctl; then no signal would ever come.
            if os.getppid() != parent_pid:
                os._exit(1)

    return _preexec


class ServerProcess:
    """A model server child process with a health check.

    Args:
        command: argv with optional `{host}`, `{port}`, `{model_path}` placeholders.
        host: IPv4 interface to bind: 127.0.0.1 keeps traffic on loopback; 0.0.0.0 (all
            interfaces) or a node address lets other machines reach the server.
        port: TCP port; None picks a free one.
        health_path: HTTP path that answers 200 once the model is loaded.
        liveness_path: HTTP path that answers 200 while the server runs, even when busy
            generating (`alive()`); None: `health_path` (which must then not wait behind a
            generation, as llama-server's and vLLM's `/health` do not).
        startup_timeout: seconds to wait for health before giving up.
        model_path: fills `{model_path}`; None means the embedded Gemma GGUF.
        advertise_host: host written into `api_base` (e.g. the node IP when binding 0.0.0.0).
        log_path: file receiving the server's stdout and stderr; default a temporary file.

    The child dies with this process (PR_SET_PDEATHSIG on Linux). The signal is tied to the
    *thread* that forks, so call `start()` from a long-lived thread (a Ray actor's methods run
    on its main thread).
    """

    def __init__(
        self,
        command: list[str],
        *,
        host: str = DEFAULT_HOST,
        port: int | None = None,
        health_path: str = "/v1/models",
        liveness_path: str | None = None,
        startup_timeout: float = 180,
        model_path: str | None = None,
        advertise_host: str | None = None,
        log_path: str | os.PathLike | None = None,
    ):
        if not command or not all(isinstance(part, str) for part in command):
            raise ValueError(f"server command must be a non-empty list of strings, got {command!r}")
        self.command = list(command)
        self.host = host
        self.port = port
        self.health_path = health_path
        self.liveness_path = liveness_path or health_path
        self.startup_timeout = startup_timeout
        self.model_path = model_path
        self.advertise_host = advertise_host or host
        self.log_path = Path(log_path) if log_path else None
        self._proc: subprocess.Popen | None = None

    @property
    def api_base(self) -> str:
        """`http://<host>:<port>/v1`, the OpenAI-compatible base URL; ModelServerError before start."""
        if self.port is None or self._proc is None:
            raise ModelServerError("the model server has not been started; call start() first")
        return f"http://{self.advertise_host}:{self.port}/v1"

    @property
    def probe_host(self) -> str:
        """Where this process checks its own server: loopback when it binds all interfaces,
        else the bound address."""
        return "127.0.0.1" if self.host == ALL_INTERFACES else self.host

    @property
    def pid(self) -> int | None:
        """Process id of the running server, or None when not running."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def argv(self) -> list[str]:
        """The command with its placeholders filled in (port chosen if still None).

        Raises:
            ModelServerError: the command runs `{llama_server}` and this node has none built
                (the message says how to build it).
            ValueError: the command uses a placeholder other than the four above.
        """
        if self.port is None:
            self.port = free_port(self.host)
        values = {"host": self.host, "port": str(self.port)}
        if any("{model_path}" in part for part in self.command):
            values["model_path"] = self.model_path or embedded_model_path()
        if any("{llama_server}" in part for part in self.command):
            # Imported here, not at the top, so `python -m raydist.models.llama_server` (which
            # imports this package first) runs its module only once.
            try:
                values["llama_server"] = llama_server_path()
            except LlamaServerMissing as exc:
                raise ModelServerError(str(exc)) from exc
        try:
            return [part.format(**values) for part in self.command]
        except (KeyError, IndexError) as exc:
            raise ValueError(
                f"server command {self.command!r} uses an unknown placeholder {exc}; "
                "only {host}, {port}, {model_path} and {llama_server} are filled in"
            ) from exc

    @property
    def exit_code(self) -> int | None:
        """The exit status of a server that stopped by itself (-9: SIGKILL), None while it runs
        or when it was never started."""
        return self._proc.poll() if self._proc is not None else None

    def start(self, cancel: threading.Event | None = None) -> str:
        """Start the server and wait until `health_path` answers 200. Calling it again after
        the server died starts it anew (same port; set `port` first to move it), appending to
        the same log.

        Args:
            cancel: when set during the wait, the server is killed and the start fails.

        Returns:
            `api_base`.

        Raises:
            ModelServerError: the process exited or was not healthy within `startup_timeout`
                seconds; the message carries the last lines of its log.
        """
        if self.pid is not None:
            return self.api_base
        argv = self.argv()
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix=f"raydist-model-server-{self.port}-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        with open(self.log_path, "ab") as log:
            log.write(f"--- raydist: starting {argv!r}\n".encode())
            log.flush()
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                # own process group, so stop() also reaches the server's children
                start_new_session=True,
                preexec_fn=_die_with_parent(os.getpid()),
            )
        self._wait_healthy(cancel)
        return self.api_base

    def healthy(self, timeout: float = 5.0) -> bool:
        """True when the process runs and `health_path` answers 200 within `timeout` seconds."""
        return self._answers(self.health_path, timeout)

    def alive(self, timeout: float = 5.0) -> bool:
        """True when the process runs and `liveness_path` answers 200 within `timeout` seconds
        (a stopped or hung process does not)."""
        return self._answers(self.liveness_path, timeout)

    def _answers(self, path: str, timeout: float) -> bool:
        if self.pid is None:
            return False
        url = f"http://{self.probe_host}:{self.port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def stop(self, grace: float = 10.0) -> None:
        """Terminate the server's process group (SIGTERM, then SIGKILL after `grace` seconds)."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()

    def kill(self) -> None:
        """SIGKILL the server's process group at once (a hung or stopped server ignores
        SIGTERM) and reap it; also clears what is left of a server that died by itself."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()

    def note(self, line: str) -> None:
        """Append `--- raydist: <line>` to the server log (restarts show up beside its output)."""
        if self.log_path is not None:
            with open(self.log_path, "a") as log:
                log.write(f"--- raydist: {line}\n")

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last `lines` lines of the server log ('' when there is none)."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        with open(self.log_path, errors="replace") as log:
            return "".join(deque(log, maxlen=lines))

    def _wait_healthy(self, cancel: threading.Event | None = None) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if cancel is not None and cancel.is_set():
                self.kill()
                raise ModelServerError(self._failure("was stopped during startup"))
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self._proc = None
                raise ModelServerError(self._failure(f"exited with code {code} during startup"))
            if self.healthy(timeout=2.0):
                return
            time.sleep(0.5)
        self.stop(grace=2.0)
        raise ModelServerError(self._failure(f"was not healthy after {self.startup_timeout:g} s"))

    def _failure(self, what: str) -> str:
        return (
            f"model server {self.command[:3]!r}... on {self.host}:{self.port} {what}; "
            f"log {self.log_path}, last lines:\n{self.log_tail()}"
        )

    def __enter__(self) -> ServerProcess:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
