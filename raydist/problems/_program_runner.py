"""Runs one program inside a program sandbox: ``python3 -I -B _program_runner.py NAME.py``
with the secret on fd 0, the proof file on fd ``PROOF_FD`` and the program on fd
``PROGRAM_FD``.

This file is copied into each sandbox of :class:`raydist.problems.execute.ProgramRunner` and
runs there as the unprivileged program user, alone (``-I``: no sibling module is importable);
on the host it is imported for its exit codes only (what a program is, as the host builds it,
lives in :mod:`raydist.problems.program`). The program is JSON, ``{"kind": "tests", "solution":
..., "setup": ..., "tests": [...]}`` (a completion and the tests that score it) or ``{"kind":
"script", "source": ...}`` (any program); ``NAME.py`` is only the file name tracebacks show.
It arrives on a descriptor the runner closes, so no file the program can open holds its tests.

**The verdict is a proof, never an exit code or printed text.** The harness that started this
process passes a fresh random secret on fd 0 and a write-only file on fd ``PROOF_FD``. The
runner reads the secret before any program code exists in the process (fd 0 then becomes
``/dev/null``) and keeps it in the main thread's frame only; the program runs in a second
thread. When, and only when, every test statement returned normally and every ``assert`` of
the tests executed (each is followed by a call to a counter, put there by rewriting the
tests' syntax tree), the main thread writes ``<secret>:<asserts that ran>:<asserts>`` to the
proof file and ends the process with ``os._exit(0)``. The harness scores ``passed`` only for
exactly that line with all asserts counted. An early exit of any kind (``sys.exit``,
``exit()``, ``os._exit``, ``posix._exit``, libc ``_exit``, a signal, ``SystemExit`` or
``KeyboardInterrupt`` raised anywhere, ``os.exec*``) leaves no proof; printed text and bytes
written to fd 1 or 2 are only output.

What the program could reach in its own process, and how each is closed (``"tests"`` kind):

* the secret: it is a local of the main thread's frame, and frames are hidden: the audit
  hook (PEP 578) makes ``sys._getframe`` raise ``ValueError`` (what the stdlib's callers
  already expect: ``namedtuple``, ``typing``, ``enum``, ``warnings`` fall back) and the
  ``tb_frame``/``gi_frame``/``cr_frame``/``ag_frame`` attributes raise ``AttributeError``;
  ``sys._current_frames``, ``gc.get_objects``/``get_referrers``/``get_referents``,
  ``sys.settrace``/``setprofile`` (line tracers that jump over asserts) and
  ``sys.addaudithook`` end the program;
* the process's memory and descriptors: opening, listing or entering anything under
  ``/proc`` (``/proc/self/mem``, ``/proc/self/fd``; symbolic links resolved) ends the
  program, and so does native code: ``ctypes``, any extension module outside the
  interpreter's own ``lib-dynload`` directory, its test modules, ``_posixsubprocess``, and
  crafted bytecode (``code.__new__``/``code.replace``, assigning a function's ``__code__``);
  the proof file itself is write-only and root's;
* the tests: they run in their own namespace (a copy of the solution's, then the test
  set-up), with a private copy of the builtins and of every module the tests import, taken
  before the solution ran, so a solution that patches ``builtins.abs``, ``math.isclose`` or
  rebinds a helper of the tests (``global poly``) changes only its own view; a change to the
  tests' namespace, builtins or modules is detected when the tests end (``TestsTampered``);
* the runner itself: every function it calls after the program started was bound before
  (``exec``, ``os.write``, ``os._exit``...), so patching ``builtins`` or ``os`` cannot make it
  skip a test or write a proof; the hook's policy lives in a closure no name reaches.

What remains open: an object whose ``__eq__`` (or ``__bool__``, ``__lt__``...) always agrees
makes ``assert f(x) == y`` hold without the right answer; that is a property of the
benchmark's tests, not of the execution, and is not closed here. So is patching a method of
a stdlib *class* the tests use (``collections.Counter.__eq__``), bytecode crafted through
``marshal.loads`` (the import system reads every ``.pyc`` with it, so it cannot be refused
cheaply), and a way around the audit hook that CPython itself has no event for. ``"script"``
programs get the same proof channel (an early exit is never ``passed``) but none of the closures
above, and may use ``ctypes`` (the sandbox's own tests need it to get past the hook): a script's
``passed`` is not proof against a hostile program, which is why scoring uses ``"tests"``.

Always blocked (ends the program at once, so no ``except`` can swallow it): every
``socket.*`` event and every way to start a process (``os.fork``, ``os.forkpty``,
``os.exec*``, ``os.posix_spawn``, ``os.spawn*``, ``os.system``, ``subprocess.Popen``).
Benchmark programs are pure functions plus asserts; refusing both turns a fork bomb or a
network probe into a clear ``error``. The hook is a tripwire, not the boundary: code that
goes around it still meets the unprivileged user, the rlimits, the container's limits and
its missing network. Exit codes:

``0``              the proof was written (the harness still checks it)
``1``              an uncaught exception (a failed ``assert`` included), ``sys.exit(code != 0)``
``EXIT_EARLY``     it ended early with status 0 (``sys.exit()``, ``exit()``, ``os._exit(0)``)
``EXIT_BLOCKED``   it attempted an operation the audit hook blocks (message on stderr)
``EXIT_MEMORY``    an uncaught ``MemoryError`` (the address-space limit)
``EXIT_LIMIT``     another resource limit refused it: a file larger than the file-size limit
                   (``EFBIG``) or a thread or process beyond the process limit
``EXIT_TAMPERED``  the tests' namespace, builtins or modules changed while they ran
"""

import _thread
import ast
import builtins
import errno
import json
import linecache
import os
import sys
import sysconfig
import traceback
import types
from dataclasses import dataclass  # noqa: F401 - see below

# ``dataclasses`` (with inspect, copy, re) is unused here but stays loaded: the process image a
# program starts from is what the limits were measured with; without it the container OOM case
# of tests/test_problems_execute.py ends at the wall limit instead of the OOM kill.

EXIT_EARLY = 90
EXIT_BLOCKED = 91
EXIT_MEMORY = 92
EXIT_LIMIT = 93
EXIT_TAMPERED = 94
PROOF_FD = 3
PROGRAM_FD = 4
COUNTER = "__raydist_assert_ran__"

BLOCKED_PREFIXES = ("socket.",)
BLOCKED_EVENTS = frozenset({
    "os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn", "os.system",
    "os.startfile", "subprocess.Popen",
})
STRICT_EVENTS = frozenset({
    "sys.settrace", "sys.setprofile", "sys._current_frames", "sys._current_exceptions",
    "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys.addaudithook",
    "code.__new__",
})
STRICT_PREFIXES = ("ctypes.",)
FRAME_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
NATIVE_MODULES = ("_ctypes", "ctypes", "_posixsubprocess", "_test", "_xx")
PATH_EVENTS = frozenset({"open", "os.listdir", "os.scandir", "os.chdir"})


class _CountAsserts(ast.NodeTransformer):
    """After each ``assert``, a call ``COUNTER(k)`` (k = 0, 1, ... in ``ast.walk`` order, the
    order :func:`raydist.problems.program.assert_sites` counts in); the statement is unchanged."""

    def __init__(self, numbers: dict):
        self.numbers = numbers

    def visit_Assert(self, node: ast.Assert):
        call = ast.Expr(ast.Call(ast.Name(COUNTER, ast.Load()), [ast.Constant(self.numbers[id(node)])], []))
        return [node, ast.copy_location(call, node)]


def _instrument(tests: list, paths: list) -> tuple:
    """The compiled code of each test (named ``paths[k]``) with its asserts counted, and how
    many asserts there are."""
    codes, first = [], 0
    for test, path in zip(tests, paths):
        tree = ast.parse(test, path)
        numbers = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assert):
                numbers[id(node)] = first + len(numbers)
        first += len(numbers)
        tree = ast.fix_missing_locations(_CountAsserts(numbers).visit(tree))
        codes.append(compile(tree, path, "exec"))
    return tuple(codes), first


_real_exit = os._exit
_real_write = os.write
_real_read = os.read


def _finish(code: int, message: str = "") -> None:
    """Flush what the program wrote, add ``message`` on stderr, and end the process now."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # a full, closed or replaced stream must not change the verdict
            pass
    if message:
        try:
            _real_write(2, message.encode("utf-8", "replace"))
        except OSError:
            pass
    _real_exit(code)


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
    """Print the traceback without the runner's frames, as ``python3 program.py`` would,
    after what the program printed (stdout is a buffered file, stderr is not)."""
    try:
        sys.stdout.flush()
    except BaseException:
        pass
    try:
        tb = error.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
            tb = tb.tb_next
        traceback.print_exception(type(error), error, tb)
    except BaseException:  # stderr may be the file that hit the size limit
        pass


def _make_hook(strict: bool, allow_frames: list, finish=_finish, realpath=os.path.realpath,
               isinstance=isinstance, str=str, bytes=bytes,
               dynload=sysconfig.get_path("platstdlib")):  # noqa: B008 - a str, bound once at definition on purpose
    """The audit hook; everything it uses is bound here, out of the program's reach."""
    blocked, prefixes = BLOCKED_EVENTS, BLOCKED_PREFIXES
    strict_events, strict_prefixes, frames, paths = STRICT_EVENTS, STRICT_PREFIXES, FRAME_ATTRIBUTES, PATH_EVENTS
    natives = NATIVE_MODULES
    dynload = os.path.join(dynload, "lib-dynload") + os.sep

    def block(event: str) -> None:
        finish(EXIT_BLOCKED, f"\nBlockedBySandbox: {event} is not allowed in the program sandbox\n")

    def hook(event: str, args: tuple) -> None:
        if event in blocked or event.startswith(prefixes):
            block(event)
        if not strict:
            return
        if event in strict_events or event.startswith(strict_prefixes):
            block(event)
        elif event == "sys._getframe":
            if not allow_frames[0]:
                raise ValueError("call stack is not deep enough")
        elif event == "object.__getattr__":
            if args[1] in frames and not allow_frames[0]:
                raise AttributeError(f"{args[1]} is not available in the program sandbox")
        elif event == "object.__setattr__":
            if args[1] == "__code__":
                block("assigning __code__")
        elif event in paths:
            path = args[0]
            if isinstance(path, (str, bytes)):
                resolved = realpath(path)
                if (resolved.startswith("/proc") if isinstance(resolved, str) else resolved.startswith(b"/proc")):
                    block(f"{event} of {path!r}")
        elif event == "import":
            name, filename = args[0], args[1]
            if name.startswith(natives) or (isinstance(filename, str) and filename.endswith(".so")
                                            and not filename.startswith(dynload)):
                block(f"import of {name}")

    return hook


def main(path: str) -> None:
    secret = _real_read(0, 256).strip()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    with os.fdopen(PROGRAM_FD, encoding="utf-8") as handle:
        spec = json.load(handle)
    strict = spec["kind"] == "tests"
    sources = ([spec["solution"], spec["setup"]] if strict else [spec["source"]])
    filename = path
    folder = os.path.dirname(filename)
    names = [filename, os.path.join(folder, "test_setup.py")]
    test_names = [os.path.join(folder, f"test_{k}.py") for k in range(len(spec.get("tests", ())))]
    # For tracebacks; the tests' lines are added only after the program ran (linecache is
    # a module the program can import).
    lines = {name: (len(source), None, source.splitlines(keepends=True), name)
             for name, source in zip(names + test_names, sources + list(spec.get("tests", ())))}
    linecache.cache[filename] = lines[filename]
    try:
        codes = [compile(source, name, "exec") for source, name in zip(sources, names)]
        tests, sites = _instrument(list(spec["tests"]), test_names) if strict else ((), 0)
    except (SyntaxError, ValueError) as error:
        traceback.print_exception(type(error), error, None)
        _finish(1)
    # What the tests may import, as private copies made before any program code runs.
    clones = {}
    for name in _imported_names(spec.get("setup", ""), *spec.get("tests", ())):
        try:
            module = __import__(name)
        except BaseException:
            continue
        clone = types.ModuleType(name)
        clone.__dict__.update(module.__dict__)
        clones[name] = (clone, dict(module.__dict__))
    test_builtins = dict(builtins.__dict__)
    real_import = builtins.__import__

    def test_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and name in clones:
            return clones[name][0]
        return real_import(name, globals, locals, fromlist, level)

    test_builtins["__import__"] = test_import
    builtins_before = dict(test_builtins)

    module = types.ModuleType("__main__")
    module.__file__ = filename
    namespace = module.__dict__
    namespace["__builtins__"] = builtins
    hits = [0] * sites

    def count(number, hits=hits):
        hits[number] += 1

    ok = object()
    outcome = [None, None]  # ok or the exception, and what the tamper check found
    done = _thread.allocate_lock()
    done.acquire()
    # Bound now: the program may patch builtins, os or this module's globals.
    run, copy, items, flush_out, flush_err = exec, dict, dict.items, sys.stdout.flush, sys.stderr.flush
    tampering, write, exit_now, total = _tampering, _real_write, _real_exit, sum

    def worker():
        try:
            run(codes[0], namespace)
            if strict:
                tests_ns = copy(namespace)
                tests_ns["__builtins__"] = test_builtins
                run(codes[1], tests_ns)
                bound = copy(tests_ns)
                tests_ns[COUNTER] = count
                for code in tests:
                    run(code, tests_ns)
                outcome[1] = tampering(tests_ns, bound, test_builtins, builtins_before, clones, items)
            flush_out()  # a write error still belongs to the program, not to shutdown
            flush_err()
            outcome[0] = ok
        except BaseException as error:
            outcome[0] = error
        finally:
            done.release()

    allow_frames = [False]
    sys.argv = [filename]
    sys.modules["__main__"] = module
    os._exit = _os_exit
    sys.modules["posix"]._exit = _os_exit
    sys.addaudithook(_make_hook(strict, allow_frames))
    try:
        _thread.start_new_thread(worker, ())
        done.acquire()
        if outcome[0] is ok and outcome[1] is None:
            ran = total(1 for hit in hits if hit)
            if ran == sites:
                write(PROOF_FD, b"%s:%d:%d" % (secret, ran, sites))
                exit_now(0)
    except BaseException as error:  # KeyboardInterrupt in the main thread: a signal, interrupt_main
        outcome[0] = error
    del secret
    allow_frames[0] = True
    linecache.cache.update(lines)
    error = outcome[0]
    if error is ok and outcome[1] is not None:
        _finish(EXIT_TAMPERED, f"\nTestsTampered: {outcome[1]}\n")
    if error is ok:
        ran = sum(1 for hit in hits if hit)
        _finish(1, f"\nAssertsSkipped: {sites - ran} of the tests' {sites} asserts never ran\n")
    if isinstance(error, SystemExit):
        if error.code is None or error.code == 0:
            _finish(EXIT_EARLY, f"\nEarlyExit: {error!r} before the program's last line\n")
        code = error.code if isinstance(error.code, int) else 1
        if not isinstance(error.code, int):
            try:
                print(error.code, file=sys.stderr)
            except BaseException:
                pass
        _finish(code if 0 < code < 256 else 1)
    _report(error)
    _finish(_exit_code(error))


def _imported_names(*sources: str) -> list:
    """Top-level modules that ``import`` statements of ``sources`` name (unparsable: none)."""
    names = []
    for source in sources:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names += [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.append(node.module.split(".")[0])
    return list(dict.fromkeys(names))


def _tampering(tests_ns, bound, test_builtins, builtins_before, clones, items):
    """What changed in the tests' view while they ran (None when nothing did)."""
    for name, value in items(bound):
        if name != COUNTER and tests_ns.get(name) is not value:
            return f"the tests' name {name!r} was rebound while they ran"
    if test_builtins.keys() != builtins_before.keys() or any(
            test_builtins[name] is not value for name, value in items(builtins_before)):
        return "the tests' builtins changed while they ran"
    for name, (clone, before) in items(clones):
        now = clone.__dict__
        if now.keys() != before.keys() or any(now[key] is not value for key, value in items(before)):
            return f"the tests' module {name!r} changed while they ran"
    return None


if __name__ == "__main__":
    main(sys.argv[1])
