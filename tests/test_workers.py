"""``Judge(processes=N)``: litellm calls made in worker processes, everything else here.

One simulator and one two-worker judge serve the whole module (each worker imports
litellm: seconds); tests switch the simulator's behaviour with ``configure``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

import framekit as fk
from framekit.evaluators import RetrievalRelevance
from framekit.testing import JudgeSimulator, SimulatorConfig
from tests.helpers import API_KEY, MAPPING, retrieval_frame, sim_judge

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def sim() -> Iterator[JudgeSimulator]:
    with JudgeSimulator(SimulatorConfig()) as simulator:
        yield simulator


@pytest.fixture(scope="module")
def pooled(sim: JudgeSimulator) -> Iterator[fk.Judge]:
    with sim_judge(sim, processes=2, concurrency=16, max_retries=3) as judge:
        # Start the workers here, not in whichever test happens to run first: a test
        # that reaches into the pool finds it whatever the order (or the xdist worker).
        fk.evaluate_dataframe(retrieval_frame(1), [RetrievalRelevance()], MAPPING, judge=judge,
                              cache=False, progress=False)  # fmt: skip
        yield judge


@pytest.fixture(autouse=True)
def fresh_simulator(sim: JudgeSimulator) -> Iterator[None]:
    sim.configure(**SimulatorConfig().to_dict())
    sim.reset()
    yield


def _score(df: pl.DataFrame, judge: fk.Judge, cache: Path) -> pl.DataFrame:
    return fk.evaluate_dataframe(
        df, [RetrievalRelevance()], MAPPING, judge=judge, cache=cache, progress=False
    )


def _mixed_frame() -> pl.DataFrame:
    return pl.concat(
        [retrieval_frame(30, label="relevant"), retrieval_frame(30, label="irrelevant")]
    ).with_columns(
        pl.int_range(pl.len()).alias("row_id"),
        pl.col("question") + pl.int_range(pl.len()).cast(pl.String),
    )


def test_workers_give_the_same_frame_as_one_process(sim, pooled, tmp_path):
    df = _mixed_frame()
    out = _score(df, pooled, tmp_path / "pooled")
    assert sim.stats()["chat"] == 60
    in_process = _score(df, sim_judge(sim), tmp_path / "single")
    assert out.equals(in_process)
    assert out["retrieval_relevance_score"].to_list() == [1.0] * 30 + [0.0] * 30
    assert fk.last_run().tokens > 0


def test_faults_are_classified_in_the_worker_and_named_per_row(sim, pooled, tmp_path):
    df = pl.DataFrame(
        {
            "question": [
                "fine @sim(label=relevant)",
                "a @sim(fault=malformed)",
                "b @sim(fault=null)",
                "c @sim(fault=refusal)",
                "d @sim(fault=400)",
                "e @sim(fault=500, first=2) @sim(label=irrelevant)",
            ],
            "docs": ["x"] * 6,
        }
    )
    out = _score(df, pooled, tmp_path)
    errors = out["retrieval_relevance_error"].to_list()
    assert errors[0] is None and errors[5] is None
    assert "not valid JSON" in errors[1]
    assert "content: null" in errors[2]
    assert errors[3].startswith("judge refused")
    assert errors[4].startswith("BadRequestError")
    assert out["retrieval_relevance_score"].to_list() == [1.0, None, None, None, None, 0.0]
    assert sim.stats()["by_status"][500] == 2
    assert fk.last_run().retries == 2


def test_429s_from_workers_reach_the_shared_limiter(sim, pooled, tmp_path):
    sim.configure(rpm=600)
    out = _score(retrieval_frame(40), pooled, tmp_path)
    assert out["retrieval_relevance_score"].null_count() == 0
    answered_429 = sim.stats()["by_status"].get(429, 0)
    assert answered_429 > 0, "the test needs the server to push back"
    assert fk.last_run().rate_limited == answered_429


def test_rejected_key_stops_the_run_and_is_not_shown(sim, pooled, tmp_path):
    sim.configure(require_api_key="sk-some-other-key")
    with pytest.raises(fk.JudgeAuthenticationError) as info:
        _score(retrieval_frame(30), pooled, tmp_path)
    assert API_KEY not in str(info.value) and API_KEY[-8:] not in str(info.value)
    assert sim.stats()["total"] <= 16


def test_a_killed_worker_is_replaced_and_its_calls_retried(sim, pooled, tmp_path):
    sim.configure(latency=0.3)
    victim = pooled._transport.pool._workers[0].process  # type: ignore[union-attr]

    def kill_when_busy() -> None:
        deadline = time.monotonic() + 20
        while sim.stats()["chat"] < 8 and time.monotonic() < deadline:
            time.sleep(0.01)
        victim.send_signal(signal.SIGKILL)

    killer = threading.Thread(target=kill_when_busy)
    killer.start()
    out = _score(retrieval_frame(40), pooled, tmp_path)
    killer.join()
    assert out["retrieval_relevance_score"].null_count() == 0
    assert victim.wait(10) == -signal.SIGKILL
    assert fk.last_run().retries >= 1, "the killed worker's calls in flight were sent again"
    assert pooled._transport.pool._workers[0].process.pid != victim.pid  # type: ignore[union-attr]


def test_the_workers_hold_no_judge_each_call_carries_its_parameters(sim, pooled, tmp_path):
    import asyncio

    _score(retrieval_frame(1), pooled, tmp_path / "a")
    assert sim.requests[-1]["temperature"] == 0.0
    with pytest.raises(AttributeError):  # a judge's values do not change under its workers
        pooled.temperature = 0.7  # type: ignore[misc]
    # A worker answers with the parameters its call carries, never ones it kept.
    transport = pooled._transport
    params = {**transport.params(), "temperature": 0.7}
    call = {"messages": [{"role": "user", "content": "hi"}]}
    asyncio.run(transport.pool.call(params, call, transport._secrets))  # type: ignore[union-attr]
    assert sim.requests[-1]["temperature"] == 0.7


def test_processes_is_validated_and_shown():
    with pytest.raises(fk.InputError, match="processes"):
        fk.Judge("openai/x", processes=0)
    assert "processes=2" in repr(fk.Judge("openai/x", processes=2))
    assert "processes" not in repr(fk.Judge("openai/x"))


_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    import polars as pl
    import framekit as fk
    from framekit.evaluators import RetrievalRelevance

    judge = fk.Judge("openai/sim-judge", api_base=sys.argv[1], api_key=sys.argv[2], processes=2)
    df = pl.DataFrame({"question": [f"q{i}" for i in range(10)], "docs": ["d"] * 10})
    out = fk.evaluate_dataframe(df, [RetrievalRelevance()], {"input": "question", "context": "docs"},
                                judge=judge, cache=False, progress=False)
    pids = [w.process.pid for w in judge._transport.pool._workers]
    print(json.dumps({"scored": out["retrieval_relevance_score"].null_count() == 0, "pids": pids,
                      "litellm_here": "litellm" in sys.modules}), flush=True)
    if sys.argv[3] == "close":
        judge.close()
        print("closed", flush=True)
    else:
        time.sleep(60)
    """
)


def _start_script(sim: JudgeSimulator, mode: str) -> tuple[subprocess.Popen[str], dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("FRAMEKIT_API_KEY", None)
    proc = subprocess.Popen(
        [sys.executable, "-c", _SCRIPT, sim.api_base, API_KEY, mode],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())


def _gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # A zombie (exited, not yet reaped by init in a container) counts as gone.
        if (
            Path(f"/proc/{pid}/stat").exists()
            and Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
        ):
            return True
        time.sleep(0.05)
    return False


def test_close_stops_the_workers_and_litellm_stays_out_of_the_caller(sim):
    proc, report = _start_script(sim, "close")
    assert report["scored"] is True
    assert report["litellm_here"] is False, "the calls were made in the workers, not here"
    assert proc.stdout is not None and proc.stdout.readline().strip() == "closed"
    assert all(_gone(pid, 10) for pid in report["pids"])
    assert proc.wait(30) == 0


def test_workers_die_with_a_killed_parent_and_never_hold_the_key_in_argv_or_env(sim):
    proc, report = _start_script(sim, "sleep")
    try:
        for pid in report["pids"]:
            for name in ("cmdline", "environ"):
                assert API_KEY.encode() not in Path(f"/proc/{pid}/{name}").read_bytes()
    finally:
        proc.kill()
        proc.wait(10)
    assert all(_gone(pid, 15) for pid in report["pids"]), "workers outlived a SIGKILLed parent"


def test_a_copied_judge_starts_its_own_workers(sim, pooled, tmp_path):
    import copy
    import pickle

    _score(retrieval_frame(2), pooled, tmp_path / "a")  # the module's judge has workers
    for clone in (copy.deepcopy(pooled), pickle.loads(pickle.dumps(pooled))):
        assert clone._transport.pool is None and clone.processes == 2
        assert clone.cache_identity() == pooled.cache_identity()
    assert pooled._transport.pool is not None


def test_a_worker_that_cannot_start_is_one_clear_error_with_its_stderr(
    sim, tmp_path, monkeypatch, capsys
):
    # Stands in for a broken environment: the "interpreter" prints a traceback-like line,
    # the key among it, and exits.
    fake = tmp_path / "python"
    fake.write_text(
        f"#!/bin/sh\necho 'ImportError: no module named litellm ({API_KEY})' >&2\nexit 3\n"
    )
    fake.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(fake))
    judge = sim_judge(sim, processes=2)
    with pytest.raises(fk.JudgeError) as info:
        _score(retrieval_frame(3), judge, tmp_path / "cache")
    message = str(info.value)
    assert "exited with code 3" in message and "no module named litellm" in message
    assert API_KEY not in message and API_KEY[-8:] not in message
    relayed = capsys.readouterr().err
    assert "no module named litellm (***)" in relayed and API_KEY[-8:] not in relayed
    assert sim.stats()["total"] == 0
    # Once the environment is mended, the same judge starts fresh workers.
    monkeypatch.undo()
    with judge:
        out = _score(retrieval_frame(3), judge, tmp_path / "cache")
    assert out["retrieval_relevance_score"].null_count() == 0
