"""L4's rewrite loop (raydist.views.l4.prepare) with a gate and a model written for the case:
which failures of the model end the loop, and which are recorded attempts."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from raydist.views import RepoFiles, ViewOptions
from raydist.views.l4.prepare import GateVerdict, rewrite_loop, rewrite_targets

MODULE = "def f(a):\n    b = a + 1\n    return b\n"
TINY = SimpleNamespace(instance_id="tiny", patch=(
    "--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,3 @@\n def f(a):\n-    b = a + 1\n+    b = a + 2\n     return b\n"))


class ServerDown(Exception):
    pass


def _down(messages, *, seed, max_tokens, grammar=None):
    raise ServerDown("connection refused")


@pytest.fixture
def repo(tmp_path):
    (tmp_path / "m.py").write_text(MODULE)
    return RepoFiles(tmp_path)


def test_the_target_is_the_function_around_the_hunk(repo):
    assert rewrite_targets(TINY, repo) == [("m.py", "f")]


def test_a_fatal_model_error_ends_the_loop_and_nothing_is_recorded(repo):
    with pytest.raises(ServerDown, match="connection refused"):
        rewrite_loop(TINY, 0, repo, ViewOptions(l4_llm_attempts=2), lambda files: GateVerdict(True, ""), _down,
                     fatal=(ServerDown,))


def test_any_other_model_error_is_a_recorded_attempt(repo):
    gated = []
    record = rewrite_loop(TINY, 0, repo, ViewOptions(l4_llm_attempts=2),
                          lambda files: gated.append(dict(files)) or GateVerdict(False, "tests broke"), _down)
    entry = record["functions"]["m.py::f"]
    assert entry["attempts"] == 2
    assert entry["feedback"] == ["LLM call failed: ServerDown: connection refused"] * 2
    assert entry["source"] == "unchanged" and record["files"] == {}
    assert len(gated) == 1 and entry["reason"].startswith("the deterministic rewrite failed the test gate: tests broke")
