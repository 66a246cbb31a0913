"""The pytest plugin that guards pytest's reporting during a grading run (runs in the container).

This file is not imported by raydist: ``raydist.grading.guard.guard_source`` fills in the
two placeholders below and the grading container loads the result with ``-p`` from a
root-owned directory the test user cannot write. It runs inside the test process, under
whatever Python and pytest the instance image has, so it uses neither f-strings nor
annotations (Python 3.5 syntax) and reaches pytest's and pluggy's internals defensively; it is
exercised with pytest 6.2 / pluggy 0.13, pytest 8.3 and pytest 9.2 / pluggy 1.7.

What it does:

- When imported (during pytest's argument parsing: after pytest's own plugins, before
  entry-point plugins, conftests and test modules), it takes a fingerprint of every loaded
  module of pytest and pluggy: each module-level function and class, every entry of those
  classes, and each function's code and defaults.
- At configure, at the end of collection, of the session and at unconfigure it compares that
  fingerprint. A change is tampering when the new value's code comes from repository code,
  when its origin cannot be traced, or when an entry was removed; an installed plugin that
  patches pytest (its code lies outside the repository) is no tampering. Repository code is
  any file under ``REPO`` other than a ``conftest.py``, pytest's own source and modules
  registered as plugins by pytest itself. A function's defaults changed in place are traced
  by an audit hook (Python 3.8+) that looks for repository code on the stack.
- It records a plugin registered while repository code is on the stack, a hook
  implementation of a plugin that is not registered, and a replaced hook executor.
- It keeps its own record of each test phase's outcome, read from ``call.excinfo`` in the
  outermost ``pytest_runtest_makereport`` wrapper, keyed like pytest's junit XML.
- At unconfigure it writes one JSON document ``{"tests": {key: {phase: kind}}, "tampered":
  [...]}`` to ``RECORD`` (a FIFO read by root).
"""
import json
import os
import sys
import types

import pytest

RECORD = "@RECORD@"
REPO = "@REPO@"

_open, _dumps, _getframe, _abspath = open, json.dumps, sys._getframe, os.path.abspath
_GUARDED = ("_pytest", "pytest", "pluggy")
_CODEISH = (types.FunctionType, types.BuiltinFunctionType, type, classmethod, staticmethod, property)
_MISSING = object()
_tests = {}
_tampered = []
_attributed = {}  # (id(function), attribute) -> None (trusted change) or where (repository code)
_trusted_files = set()
_untrusted_cache = {}
_machinery = {}


def _roots():
    import _pytest
    dirs = [os.path.dirname(_abspath(_pytest.__file__)) + os.sep]
    files = {_abspath(__file__), _abspath(pytest.__file__)}
    if os.path.basename(pytest.__file__).startswith("__init__."):
        dirs.append(os.path.dirname(_abspath(pytest.__file__)) + os.sep)
    return tuple(dirs), files


_TRUSTED_DIRS, _TRUSTED_ROOT_FILES = _roots()
_REPO_PREFIX = _abspath(REPO).rstrip(os.sep) + os.sep


def _untrusted(filename):
    hit = _untrusted_cache.get(filename)
    if hit is None:
        path = filename if not filename or filename[0] == "<" else _abspath(filename)
        hit = bool(path) and path.startswith(_REPO_PREFIX) and not path.startswith(_TRUSTED_DIRS) \
            and path not in _TRUSTED_ROOT_FILES and os.path.basename(path) != "conftest.py"
        _untrusted_cache[filename] = hit
    return hit and filename not in _trusted_files


def _repository_frame(depth=2):
    """``file:line`` of the innermost frame of repository code on the stack, else None."""
    frame = _getframe(depth)
    while frame is not None:
        name = frame.f_code.co_filename
        if _untrusted(name):
            return "%s:%d" % (name, frame.f_lineno)
        frame = frame.f_back
    return None


def _fingerprint(value):
    func = value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
    if isinstance(value, property):
        return (value, value.fget, value.fset, value.fdel)
    if isinstance(func, types.FunctionType):
        return (value, func, func.__code__, func.__defaults__, func.__kwdefaults__)
    return (value,)


def _guarded(name):
    return name.split(".", 1)[0] in _GUARDED


def _take_snapshot():
    entries, classes = {}, {}
    for modname, module in sorted(sys.modules.items(), key=lambda kv: kv[0]):
        if module is None or not (_guarded(modname) or modname == __name__):
            continue
        for name, value in list(vars(module).items()):
            if isinstance(value, _CODEISH):
                entries[("module", modname, name)] = (module, _fingerprint(value))
            if isinstance(value, type) and _guarded(str(getattr(value, "__module__", ""))):
                classes[id(value)] = value
    keys = {}
    for cls in classes.values():
        names = set()
        for name, value in list(vars(cls).items()):
            if isinstance(value, _CODEISH):
                entries[("class", cls, name)] = (cls, _fingerprint(value))
                names.add(name)
        keys[id(cls)] = (cls, names)
    return entries, keys


def _label(owner):
    return "%s.%s" % (getattr(owner, "__module__", "?"),
                      getattr(owner, "__qualname__", getattr(owner, "__name__", "?")))


def _origin(value):
    """The files the code of ``value`` comes from, or None when that cannot be told."""
    if isinstance(value, (classmethod, staticmethod)):
        value = value.__func__
    if isinstance(value, property):
        parts = [_origin(f) for f in (value.fget, value.fset, value.fdel) if f is not None]
        return None if any(p is None for p in parts) else [f for p in parts for f in p]
    if isinstance(value, types.FunctionType):
        return [value.__code__.co_filename]
    if isinstance(value, type):
        module = sys.modules.get(str(getattr(value, "__module__", "")))
        return [getattr(module, "__file__", None) or "<built-in>"] if module is not None else None
    if isinstance(value, types.BuiltinFunctionType):
        return ["<built-in>"]
    return None


def _why(before, now):
    """Why the change of one fingerprinted entry from ``before`` to ``now`` is tampering, or
    None: the new code comes from outside the repository (an installed plugin, pytest)."""
    if now is _MISSING:
        return "removed"
    func = before[1] if len(before) > 1 else None
    if now is before[0] and func is not None:  # the same function, mutated in place
        if func.__code__ is not before[2]:
            files = [func.__code__.co_filename]
        else:
            where = _attributed.get((id(func), "__defaults__"), _attributed.get((id(func), "__kwdefaults__"), ""))
            return None if where is None else "defaults changed by %s" % (where or "code the guard could not see")
    else:
        files = _origin(now)
    if files is None:
        return "replaced by %r, whose code the guard cannot trace" % (now,)
    untrusted = [f for f in files if _untrusted(f)]
    return "replaced by code of %s" % untrusted[0] if untrusted else None


def _compare(stage):
    entries, keys = _SNAPSHOT
    for (kind, scope, name), (owner, before) in entries.items():
        now = vars(owner).get(name, _MISSING)
        after = (now,) if now is _MISSING else _fingerprint(now)
        if len(after) == len(before) and all(a is b for a, b in zip(after, before)):
            continue
        why = _why(before, now)
        if why:
            _tamper("%s: %s.%s %s" % (stage, scope if kind == "module" else _label(scope), name, why))
    for cls, names in keys.values():
        for name, value in sorted(vars(cls).items(), key=lambda kv: kv[0]):
            if name in names or not isinstance(value, _CODEISH):
                continue
            why = _why((_MISSING,), value)
            if why:
                _tamper("%s: %s.%s added, %s" % (stage, _label(cls), name, why))


def _tamper(message):
    if message not in _tampered:
        _tampered.append(message)


def _audit(event, args):
    # CPython audits the assignment of a function's __code__ / __defaults__, not a class's
    # attributes: those are traced by the origin of their new value (_why).
    if event != "object.__setattr__" or not isinstance(args[0], types.FunctionType):
        return
    module = str(getattr(args[0], "__module__", "") or "")
    if _guarded(module) or module == __name__:
        _attributed[(id(args[0]), args[1])] = _repository_frame(2)


def _hookimpls(caller):
    if hasattr(caller, "get_hookimpls"):
        return list(caller.get_hookimpls())
    return list(getattr(caller, "_nonwrappers", [])) + list(getattr(caller, "_wrappers", []))


def _check_machinery(config, stage):
    manager = config.pluginmanager
    plugins = set(id(p) for p in manager.get_plugins())
    for name, caller in sorted(vars(manager.hook).items(), key=lambda kv: kv[0]):
        for impl in _hookimpls(caller):
            if id(impl.plugin) not in plugins:
                _tamper("%s: hook %s has an implementation of a plugin that is not registered" % (stage, name))
        before = _machinery.get(name)
        if before is not None and getattr(caller, "_hookexec", None) is not before:
            _tamper("%s: the executor of hook %s was replaced" % (stage, name))
    if _machinery.get(None) is not None and getattr(manager, "_inner_hookexec", None) is not _machinery[None]:
        _tamper("%s: pluggy's hook executor was replaced" % stage)


def _check(config, stage):
    _compare(stage)
    _check_machinery(config, stage)


def _junit_key(item):
    from _pytest.junitxml import mangle_test_address
    names = mangle_test_address(item.nodeid)
    classname = ".".join(names[:-1])
    prefix = _PREFIX.get("prefix")
    if prefix:
        classname = prefix + "." + classname
    return "%s::%s" % (_escape(classname), _escape(names[-1]))


def _escape(text):
    try:
        from _pytest.junitxml import bin_xml_escape
    except ImportError:
        return text
    escaped = bin_xml_escape(text)
    return str(getattr(escaped, "uniobj", escaped))


_SKIP = tuple(e for e in (getattr(pytest.skip, "Exception", None),) if e)
_XFAIL = tuple(e for e in (getattr(getattr(pytest, "xfail", None), "Exception", None),) if e)
_PREFIX = {}


def _kind(item, excinfo):
    import unittest
    if excinfo is None:
        return "passed"
    value = excinfo.value
    if _XFAIL and isinstance(value, _XFAIL):
        return "xfailed"
    if isinstance(value, _SKIP + (unittest.SkipTest,)):
        return "skipped"
    marked = item.iter_markers(name="xfail") if hasattr(item, "iter_markers") else [item.get_marker("xfail")]
    return "xfailed" if any(m is not None for m in marked) else "raised"


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    # Read before and after every other implementation ran: an inner wrapper may clear
    # call.excinfo, and a unittest item's failure reaches call.excinfo only inside the hook.
    pending = getattr(item, "_excinfo", None)
    before = _kind(item, call.excinfo or (pending[0] if pending else None))
    yield
    after = _kind(item, call.excinfo)
    _tests.setdefault(_junit_key(item), {})[call.when] = "raised" if "raised" in (before, after) else after


def _declaring_module():
    """The file of the module whose ``pytest_plugins`` is being loaded, when it is repository
    code (a test module, not a conftest), else None."""
    frame = _getframe(2)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "consider_module" and code.co_filename.startswith(_TRUSTED_DIRS):
            path = getattr(frame.f_locals.get("mod"), "__file__", None)
            return path if path and _untrusted(path) else None
        frame = frame.f_back
    return None


def pytest_plugin_registered(plugin, manager):
    where = _repository_frame()
    if where:
        _tamper("a pytest plugin (%r) was registered by %s" % (plugin, where))
        return
    path = getattr(plugin, "__file__", None)
    declared = _declaring_module() if path and _untrusted(path) else None
    if declared:
        _tamper("a pytest plugin of the repository (%s) was declared by %s" % (path, declared))
        return
    if isinstance(plugin, types.ModuleType) and path:
        _trusted_files.add(path)
        _trusted_files.add(_abspath(path))


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    try:
        _PREFIX["prefix"] = config.getini("junit_prefix")
    except (ValueError, KeyError):
        pass
    _machinery[None] = getattr(config.pluginmanager, "_inner_hookexec", None)
    for name, caller in vars(config.pluginmanager.hook).items():
        _machinery[name] = getattr(caller, "_hookexec", None)
    _check(config, "configure")


def pytest_collection_finish(session):
    _check(session.config, "collection")


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_sessionfinish(session):
    _check(session.config, "sessionfinish")
    yield


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    _check(config, "unconfigure")
    with _open(RECORD, "w") as out:
        out.write(_dumps({"tests": _tests, "tampered": _tampered}))


_SNAPSHOT = _take_snapshot()
if hasattr(sys, "addaudithook"):
    sys.addaudithook(_audit)
