"""Pacing that reads the endpoint: announced limits, quantised windows, gentle 429 trims."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone

import pytest

import framekit as fk
from framekit.engine.limiter import RateLimiter, read_limits
from framekit.evaluators import RetrievalRelevance
from framekit.judges.faults import parse_retry_after
from tests.helpers import MAPPING, retrieval_frame, sim_judge

pytestmark = pytest.mark.usefixtures("transport")


def _run(sim, n: int, **options):
    return fk.evaluate_dataframe(retrieval_frame(n), [RetrievalRelevance()], MAPPING,
                                 judge=sim_judge(sim, **options), cache=False, progress=False)  # fmt: skip


def test_rpm_none_learns_the_limit_from_headers_instead_of_meeting_429s(simulator_factory):
    # 600 RPM counted in 1-second windows: at most 10 requests a second.
    told = simulator_factory(latency=0.02, rpm=600, rpm_window=1.0, rate_limit_headers=True)
    silent = simulator_factory(latency=0.02, rpm=600, rpm_window=1.0, retry_after="ms")
    out = _run(told, 40, concurrency=16)
    assert out["retrieval_relevance_score"].null_count() == 0
    _run(silent, 40, concurrency=16)
    learned, blind = told.stats()["by_status"], silent.stats()["by_status"]
    assert learned[200] == 40 and blind[200] == 40
    # Without headers the first 16 go out at once into a window of 10; with them, the
    # first answer sets the pace and (nearly) nothing is refused.
    assert blind.get(429, 0) >= 6
    assert learned.get(429, 0) <= 2


def test_rpm_given_is_paced_under_one_second_windows(simulator_factory):
    sim = simulator_factory(latency=0.02, rpm=600, rpm_window=1.0)
    _run(sim, 40, concurrency=16, rpm=600)
    assert sim.stats()["by_status"][200] == 40
    assert sim.stats()["by_status"].get(429, 0) <= 2


@pytest.mark.parametrize("transport", ["http"], indirect=True)
def test_an_announced_limit_lower_than_the_configured_one_wins(simulator_factory):
    sim = simulator_factory(latency=0.02, rpm=600, rpm_window=1.0, rate_limit_headers=True)
    _run(sim, 40, concurrency=16, rpm=60_000)
    assert sim.stats()["by_status"].get(429, 0) <= 2


def test_a_429_trims_a_known_rate_a_little_and_pauses_everyone():
    limiter = RateLimiter(rpm=600, seed=1)
    before = limiter.request_rate
    assert before is not None
    limiter.on_rate_limited(0.5, 0)
    assert limiter.request_rate == pytest.approx(before * RateLimiter.DECREASE)
    assert RateLimiter.DECREASE >= 0.9  # a trim, not a halving
    assert 0.3 < limiter.paused_for() <= 0.5


def test_pacing_keeps_a_margin_below_the_limit():
    limiter = RateLimiter(rpm=3000)
    assert limiter.request_rate == pytest.approx(50 * (1 - RateLimiter.MARGIN))


def test_no_requests_left_pauses_until_the_reset_and_the_limit_is_learned():
    limiter = RateLimiter()
    assert limiter.request_rate is None
    limiter.observe({"x-ratelimit-limit-requests": "600", "x-ratelimit-remaining-requests": "0",
                     "x-ratelimit-reset-requests": "400ms"})  # fmt: skip
    assert limiter.limit_rpm == 600
    assert 0.3 < limiter.paused_for() <= 0.4
    limiter.observe({"x-ratelimit-limit-requests": "6000"})
    assert limiter.limit_rpm == 6000  # rpm=None: the latest announcement is the limit


def test_configured_rpm_is_kept_when_the_announced_one_is_higher():
    limiter = RateLimiter(rpm=600)
    limiter.observe({"x-ratelimit-limit-requests": "10000"})
    assert limiter.limit_rpm == 600


def test_anthropic_and_openai_headers_are_read():
    reset = (datetime.now(timezone.utc) + timedelta(seconds=30)).isoformat()
    anthropic = read_limits({"anthropic-ratelimit-requests-limit": "50",
                             "anthropic-ratelimit-requests-remaining": "3",
                             "anthropic-ratelimit-requests-reset": reset,
                             "anthropic-ratelimit-tokens-limit": "40000"})  # fmt: skip
    assert anthropic is not None and anthropic.rpm == 50 and anthropic.tpm == 40000
    assert anthropic.requests_left == 3 and 28 < (anthropic.requests_reset_s or 0) <= 30
    openai = read_limits({"x-ratelimit-limit-requests": "10000", "x-ratelimit-limit-tokens": "2000000",
                          "x-ratelimit-reset-requests": "6m0s"})  # fmt: skip
    assert openai is not None and (openai.rpm, openai.tpm) == (10000, 2000000)
    assert openai.requests_reset_s == 360
    assert read_limits({"content-type": "application/json"}) is None
    assert parse_retry_after("1m30.5s") == 90.5 and parse_retry_after("garbage") is None


def test_the_simulator_enforces_one_second_windows_and_announces_them(simulator_factory):
    sim = simulator_factory(rpm=120, rpm_window=1.0, rate_limit_headers=True)
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    answers = []
    for _ in range(6):
        request = urllib.request.Request(sim.api_base + "/chat/completions", data=body,
                                         headers={"content-type": "application/json"})  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=5) as reply:
                answers.append((reply.status, dict(reply.headers)))
        except urllib.error.HTTPError as error:
            answers.append((error.code, dict(error.headers)))
    statuses = [status for status, _ in answers]
    # 2 per window: six quick requests span at most a few windows, so some are refused.
    assert statuses.count(200) >= 2 and statuses.count(429) >= 1
    assert sim.stats()["faults"]["rpm"] == statuses.count(429)
    headers = {k.lower(): v for k, v in answers[0][1].items()}
    assert headers["x-ratelimit-limit-requests"] == "120"
    assert int(headers["x-ratelimit-remaining-requests"]) <= 1
    assert headers["x-ratelimit-reset-requests"].endswith("ms")


def test_a_request_let_through_at_once_still_counts_against_the_limit_and_a_pause():
    # With nobody queued and nothing to wait for a request goes without the lock; it must
    # still take its share of the bucket, and a pause must still hold everyone.
    async def main() -> tuple[float, float]:
        limiter = RateLimiter(rpm=600)  # 9.4 a second, a bucket of one
        limiter.observe({})  # the first answer is in: the others no longer wait for it
        started = time.monotonic()
        await asyncio.gather(*(limiter.acquire() for _ in range(7)))
        paced = time.monotonic() - started
        limiter.pause(0.3)
        started = time.monotonic()
        await limiter.acquire()
        return paced, time.monotonic() - started

    paced, paused = asyncio.run(main())
    assert paced >= 0.5  # 6 after the first at 9.4 a second: 0.64 s
    assert paused >= 0.25
