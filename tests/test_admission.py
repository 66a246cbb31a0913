"""Admission control of model calls: the AIMD limit of calls in flight, Retry-After honoured
inside a call, and the launch's ledger of tokens and USD (``raydist.models.admission``).

The model is a scripted OpenAI-compatible server (``tests/openai_stub_server.py``): these
tests are about when calls are let through and what they are booked as, not about the LLM."""

from __future__ import annotations

import threading
import time

import litellm
import pytest

from raydist.models.admission import (
    FAILED,
    OK,
    THROTTLED,
    Admission,
    AIMDLimit,
    Budget,
    BudgetError,
    UsageTotals,
)
from raydist.models.completion import litellm_complete
from raydist.models.endpoint import ModelEndpoint
from raydist.models.retry import ModelUnreachable, call_with_retries
from tests.openai_stub_server import refuse, reply, scripted_server

ASK = [{"role": "user", "content": "hi"}]


# --- the rules, without Ray -----------------------------------------------------------------

def test_the_limit_halves_on_each_throttled_call_and_grows_by_one_after_a_run_of_successes():
    limit = AIMDLimit(8, increase_after=2)
    for outcome in [THROTTLED, THROTTLED, THROTTLED, THROTTLED, THROTTLED]:  # 8 4 2 1, then stays at 1
        limit.release(limit.try_acquire(), outcome)
    for _ in range(5):  # 2, 3, and one success towards the next
        limit.release(limit.try_acquire(), OK)
    limit.release(limit.try_acquire(), FAILED)  # neither grows nor shrinks, nor breaks the run
    limit.release(limit.try_acquire(), OK)
    limit.release(limit.try_acquire(), THROTTLED)
    assert limit.trace == [8, 4, 2, 1, 2, 3, 4, 2]
    assert limit.limit == 2 and limit.in_flight == 0


def test_no_call_starts_beyond_the_limit_and_a_lost_release_is_taken_back_after_its_lease():
    limit = AIMDLimit(2, lease_s=100)
    first, second = limit.try_acquire(now=0), limit.try_acquire(now=1)
    assert first and second and limit.try_acquire(now=2) is None
    limit.release(first, THROTTLED)  # limit 1, one still in flight
    assert limit.try_acquire(now=3) is None
    assert limit.try_acquire(now=102) is not None  # `second` was never released: its lease ran out


def test_a_budget_is_spent_when_the_totals_reach_a_bound():
    totals = UsageTotals()
    totals.add("agent", 60, 40, 0.25)
    assert Budget(tokens=101).spent_by(totals) is None
    assert Budget(tokens=100).spent_by(totals) == "budget.tokens=100 spent (100 tokens)"
    assert Budget(usd=0.25).spent_by(totals) == "budget.usd=0.25 spent (0.250000 USD)"
    assert Budget().spent_by(totals) is None and not Budget().bounded
    with pytest.raises(BudgetError, match=r"budget.tokens=-1: give a number of at least 0"):
        Budget(tokens=-1)


# --- one call, without admission actors -----------------------------------------------------

def test_a_429_with_retry_after_is_waited_out_inside_the_call_without_using_an_attempt():
    with scripted_server([refuse(429, retry_after=2), refuse(503, retry_after=1), reply("fine")]) as (server, base):
        endpoint = ModelEndpoint("openai/stub", api_base=base, local=True)
        started = time.monotonic()
        text = litellm_complete(endpoint, retries=1)(ASK, seed=0, max_tokens=8)
        waited = time.monotonic() - started
    assert text == "fine"
    assert [status for _, status, _ in server.log] == [429, 503, 200]
    assert server.log[1][0] - server.log[0][0] >= 2.0 and server.log[2][0] - server.log[1][0] >= 1.0
    assert waited < 8


def test_a_refusal_without_retry_after_uses_an_attempt():
    with scripted_server([refuse(429)]) as (server, base):
        endpoint = ModelEndpoint("openai/stub", api_base=base, local=True)
        with pytest.raises(ModelUnreachable, match=r"did not answer after 2 attempt\(s\): RateLimitError"):
            call_with_retries(lambda: litellm.completion(model="openai/stub", api_base=base, api_key="x",
                                                         messages=ASK, max_retries=0),
                              endpoint=endpoint, retries=2)
    assert server.calls == 2


# --- the launch's actors, on a real Ray -----------------------------------------------------

@pytest.mark.ray
def test_the_limiter_drops_under_a_burst_of_429s_and_recovers(ray_local):
    script = [refuse(429, retry_after=0)] * 3 + [reply()]
    with scripted_server(script) as (server, base), Admission(Budget(), max_calls=4, increase_after=2) as admission:
        endpoint = admission.attach(ModelEndpoint("openai/stub", api_base=base, local=True), "agent")
        complete = litellm_complete(endpoint, retries=1)
        for seed in range(6):
            assert complete(ASK, seed=seed, max_tokens=8) == reply()["content"]
        trace = admission.trace("openai/stub")
        totals = admission.totals()
    assert [status for _, status, _ in server.log] == [429, 429, 429] + [200] * 6
    assert trace == [4, 2, 1, 2, 3, 4]  # halved to 1 by the burst (a 3rd halving stays at 1), +1 per 2 answers
    assert (totals["calls"], totals["input_tokens"], totals["output_tokens"]) == (6, 42, 30)


@pytest.mark.ray
def test_calls_from_many_threads_never_exceed_the_limit_after_it_dropped(ray_local):
    with scripted_server([refuse(503, retry_after=0)] + [reply()], delay_s=0.3) as (server, base), \
            Admission(Budget(), max_calls=4, increase_after=100) as admission:
        endpoint = admission.attach(ModelEndpoint("openai/stub", api_base=base, local=True), "agent")
        complete = litellm_complete(endpoint, retries=1)
        complete(ASK, seed=0, max_tokens=8)  # one 503: the limit is 2 from now on
        threads = [threading.Thread(target=complete, args=(ASK,), kwargs={"seed": i, "max_tokens": 8})
                   for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        trace = admission.trace("openai/stub")
    assert trace == [4, 2]
    assert max(in_flight for _, _, in_flight in server.log[2:]) == 2  # 6 callers, 2 at a time


@pytest.mark.ray
def test_the_ledger_books_every_answer_by_purpose_and_says_when_the_budget_is_spent(ray_local):
    with scripted_server([reply(prompt_tokens=30, completion_tokens=20)]) as (_, base), \
            Admission(Budget(tokens=120), max_calls=2) as admission:
        plain = ModelEndpoint("openai/stub", api_base=base, local=True)
        view = litellm_complete(admission.attach(plain, "view"), retries=1)
        agent = litellm_complete(admission.attach(plain, "agent"), retries=1)
        view(ASK, seed=0, max_tokens=8)
        agent(ASK, seed=0, max_tokens=8)
        assert admission.spent() is None
        agent(ASK, seed=1, max_tokens=8)
        spent, totals = admission.spent(), admission.totals()
    assert spent == "budget.tokens=120 spent (150 tokens)"
    assert totals["by_purpose"] == {"agent": {"calls": 2, "input_tokens": 60, "output_tokens": 40, "usd": 0.0},
                                    "view": {"calls": 1, "input_tokens": 30, "output_tokens": 20, "usd": 0.0}}
    assert (totals["tokens"], totals["unpriced"]) == (150, 0)
