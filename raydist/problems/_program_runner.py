"""Runs one program inside a program sandbox: ``python3 -I -B _program_runner.py PROGRAM.py``.

This file is copied into each sandbox of :class:`raydist.problems.execute.ProgramRunner` and
runs there as the unprivileged program user; on the host it is only imported for its exit
codes. It compiles the program, installs an audit hook (PEP 578), then ``exec``s the program
as ``__main__``. The exit code says how the program ended:

``0``              it ran to its last line
``1``              an uncaught exception (a failed ``assert`` included), or ``sys.exit(code != 0)``
``EXIT_EARLY``     it ended early with status 0 (``sys.exit()``, ``exit()``, ``os._exit(0)``,
                   ``unittest.main()`` in 3.11 with no tests): statements after it, the tests
                   of an assembled program among them, never ran
``EXIT_BLOCKED``   it attempted an operation the audit hook blocks (message on stderr)
``EXIT_MEMORY``    an uncaught ``MemoryError`` (the address-space limit)
``EXIT_LIMIT``     another resource limit refused it: a file larger than the file-size limit
                   (``EFBIG``) or a thread or process beyond the process limit

Blocked (a blocked operation ends the program at once, so no ``except`` can swallow it):
every ``socket.*`` event (creating, connecting, binding, resolving), and every way to start a
process: ``os.fork``, ``os.forkpty``, ``os.exec*``, ``os.posix_spawn``, ``os.spawn*``,
``os.system``, ``subprocess.Popen``. Benchmark programs are pure functions plus asserts; they
do not open sockets or spawn processes, and refusing both turns a fork bomb or a network
probe into a clear ``error`` instead of a fight with the limits. The hook is a tripwire, not
the boundary: code that goes around it (``ctypes``) still meets the unprivileged user, the
rlimits, the container's limits and its missing network.
"""

import errno
import os
import sys
import traceback

EXIT_EARLY = 90
EXIT_BLOCKED = 91
EXIT_MEMORY = 92
EXIT_LIMIT = 93

BLOCKED_PREFIXES = ("socket.",)
BLOCKED_EVENTS = frozenset({
    "os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn", "os.system",
    "os.startfile", "subprocess.Popen",
})

_real_exit = os._exit


def _finish(code: int, message: str = "") -> None:
    """Flush what the program wrote, add ``message`` on stderr, and end the process now."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a full or closed stream must not change the verdict
            pass
    if message:
        try:
            os.write(2, message.encode("utf-8", "replace"))
        except OSError:
            pass
    _real_exit(code)


def _audit(event: str, args: tuple) -> None:
    if event in BLOCKED_EVENTS or event.startswith(BLOCKED_PREFIXES):
        _finish(EXIT_BLOCKED, f"\nBlockedBySandbox: {event} is not allowed in the program sandbox\n")


def _os_exit(code: int) -> None:
    if code == 0:
        _finish(EXIT_EARLY, "\nEarlyExit: os._exit(0) before the program's last line\n")
    _finish(code)


def _exit_code(error: BaseException) -> int:
    if isinstance(error, MemoryError):
        return EXIT_MEMORY
    if isinstance(error, OSError) and error.errno == errno.EFBIG:
        return EXIT_LIMIT
    if isinstance(error, BlockingIOError) or "can't start new thread" in str(error):
        return EXIT_LIMIT
    return 1


def _report(error: BaseException) -> None:
    """Print the traceback without this file's frame, as ``python3 program.py`` would, after
    what the program printed (stdout is a buffered file, stderr is not)."""
    try:
        sys.stdout.flush()
    except Exception:
        pass
    try:
        traceback.print_exception(type(error), error, error.__traceback__.tb_next)
    except Exception:  # stderr may be the file that hit the size limit
        pass


def main(path: str) -> None:
    with open(path, encoding="utf-8") as handle:
        source = handle.read()
    try:
        code = compile(source, path, "exec")
    except (SyntaxError, ValueError) as error:
        traceback.print_exception(type(error), error, None)
        _finish(1)
    sys.argv = [path]
    os._exit = _os_exit
    sys.addaudithook(_audit)
    namespace = {"__name__": "__main__", "__file__": path, "__builtins__": __builtins__}
    try:
        exec(code, namespace)
        sys.stdout.flush()  # a write error still belongs to the program, not to shutdown
        sys.stderr.flush()
    except SystemExit as error:
        if error.code is None or error.code == 0:
            _finish(EXIT_EARLY, f"\nEarlyExit: {error!r} before the program's last line\n")
        raise
    except BaseException as error:
        _report(error)
        _finish(_exit_code(error))


if __name__ == "__main__":
    main(sys.argv[1])
