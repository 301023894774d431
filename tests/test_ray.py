"""framekit on Ray Data: a local Ray instance (one per test session) and the simulator.

What is shared between workers, and what these tests prove:
- the rate limit: one named limiter actor grants every request of every worker;
- the cache: a directory all workers open (one machine here, as on a shared filesystem);
- a killed run's record: the finished slices (parts) beside the output, so a re-run of a
  killed driver pays only for the calls that were in flight.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import signal
import subprocess
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import framekit as fk
from framekit.evaluators import RetrievalRelevance
from tests.helpers import API_KEY, MAPPING, retrieval_frame, sim_judge

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[str]:
    """A local Ray instance for the whole session (it takes seconds to start); its address."""
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    # Ray's worker processes inherit the environment of the instance: this checkout's
    # framekit must be the one they import (the venv may hold another).
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), saved) if p)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def limiter_counts(judge: fk.Judge) -> dict[str, float]:
    import ray

    from framekit.ray._limiter import NAMESPACE, limiter_name

    actor = ray.get_actor(
        limiter_name(judge.model, judge.api_base, judge.rpm, judge.tpm), NAMESPACE
    )
    return ray.get(actor.counts.remote())  # type: ignore[no-any-return]


def collect(ds) -> pl.DataFrame:  # type: ignore[no-untyped-def]
    batches = [pl.from_arrow(b) for b in ds.iter_batches(batch_format="pyarrow", batch_size=None)]
    return pl.concat(batches).sort("row_id")  # type: ignore[arg-type]


def test_import_framekit_does_not_import_ray():
    code = (
        "import sys, framekit as fk; fk.evaluate_dataframe; fk.evaluate_parquet; fk.Judge; "
        "import framekit.cli; print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'ray')))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", "import json; " + code], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []


def test_unknown_engine_is_an_input_error(tmp_path):
    retrieval_frame(4).write_parquet(tmp_path / "in.parquet")
    with pytest.raises(fk.InputError, match="engine must be 'local' or 'ray'"):
        fk.evaluate_parquet(
            tmp_path / "in.parquet",
            tmp_path / "out.parquet",
            [RetrievalRelevance()],
            MAPPING,
            judge="local",
            engine="spark",
        )


def test_dataset_scores_like_evaluate_dataframe_dedups_per_block_and_shares_the_limit(
    ray_cluster, judge_simulator, tmp_path
):
    import ray

    import framekit.ray as fkray

    frame = retrieval_frame(120, distinct=30)
    judge = sim_judge(judge_simulator, rpm=6001, concurrency=4)
    scored = fkray.evaluate_dataset(
        ray.data.from_arrow(frame.to_arrow()),
        [RetrievalRelevance()],
        MAPPING,
        judge=judge,
        cache=False,
        workers=2,
        batch_rows=40,
    )
    got = collect(scored)
    # Three blocks of 40 rows, each holding all 30 distinct requests: deduplicated within
    # each block, and (with no cache) paid again in the next.
    assert judge_simulator.stats()["chat"] == 90
    # Every one of them was granted by the cluster's one limiter actor (besides grants
    # that reached a worker too late to be used, and were asked again).
    counts = limiter_counts(judge)
    assert counts["granted"] - counts["expired"] == 90
    expected = fk.evaluate_dataframe(frame, [RetrievalRelevance()], MAPPING, judge=judge,
                                     cache=False, progress=False)  # fmt: skip
    assert got.columns == expected.columns
    assert got.equals(expected)


def test_a_missing_column_is_an_input_error_before_any_worker_starts(ray_cluster, judge_simulator):
    import ray

    import framekit.ray as fkray

    ds = ray.data.from_arrow(retrieval_frame(4).to_arrow())
    with pytest.raises(fk.InputError, match="nope"):
        fkray.evaluate_dataset(ds, [RetrievalRelevance()], {"input": "nope", "context": "docs"},
                               judge=sim_judge(judge_simulator), cache=False)  # fmt: skip
    assert judge_simulator.stats()["chat"] == 0


def test_dataset_workers_share_one_cache_directory(ray_cluster, judge_simulator, tmp_path):
    import ray

    import framekit.ray as fkray

    frame = retrieval_frame(60, distinct=20)
    judge = sim_judge(judge_simulator, concurrency=4)
    ds = ray.data.from_arrow(frame.to_arrow())
    cache = tmp_path / "cache"
    first = collect(fkray.evaluate_dataset(ds, [RetrievalRelevance()], MAPPING, judge=judge,
                                           cache=cache, workers=2, batch_rows=20))  # fmt: skip
    paid = judge_simulator.stats()["chat"]
    assert 20 <= paid <= 60
    again = collect(fkray.evaluate_dataset(ds, [RetrievalRelevance()], MAPPING, judge=judge,
                                           cache=cache, workers=2, batch_rows=20))  # fmt: skip
    assert judge_simulator.stats()["chat"] == paid  # every answer came from the cache
    assert again.equals(first)


def test_parquet_on_ray_with_the_offline_judge_matches_the_local_engine(ray_cluster, tmp_path):
    frame = retrieval_frame(300, distinct=150)
    source = tmp_path / "in.parquet"
    frame.write_parquet(source, row_group_size=100)
    evs = [RetrievalRelevance()]
    local = fk.evaluate_parquet(source, tmp_path / "local.parquet", evs, MAPPING, judge="local",
                                cache=False, progress=False, slice_rows=100)  # fmt: skip
    on_ray = fk.evaluate_parquet(source, tmp_path / "ray.parquet", evs, MAPPING, judge="local",
                                 cache=False, progress=False, slice_rows=100, engine="ray",
                                 workers=2)  # fmt: skip
    assert on_ray.rows == local.rows == 300
    assert on_ray.slices == 3
    assert on_ray.stats.embeddings_computed == local.stats.embeddings_computed > 0
    assert pl.read_parquet(tmp_path / "ray.parquet").equals(
        pl.read_parquet(tmp_path / "local.parquet")
    )
    # The Ray output carries the same run record as the local engine's.
    on_ray_record = fk.io.read_provenance(tmp_path / "ray.parquet")
    local_record = fk.io.read_provenance(tmp_path / "local.parquet")
    assert on_ray_record is not None and local_record is not None
    for field in ("evaluators", "judges", "mapping", "source"):
        assert on_ray_record[field] == local_record[field]
    assert on_ray_record["counts"]["rows"] == 300
    assert not list(tmp_path.glob(".ray.parquet.framekit-parts"))


def test_a_cascade_on_ray_routes_like_the_local_engine(ray_cluster, simulator_factory, tmp_path):
    from framekit.testing import NoisyJudge

    sim = simulator_factory(noisy_judges={"weak": NoisyJudge(0.75), "strong": NoisyJudge(0.95)})
    cascade = fk.Cascade(
        [
            fk.Judge(f"openai/{m}", api_base=sim.api_base, api_key=API_KEY)
            for m in ("weak", "strong")
        ],
        escalate_below=[0.8],
    )
    source = tmp_path / "in.parquet"
    retrieval_frame(90).write_parquet(source)
    run = dict(judge=cascade, cache=False, progress=False, slice_rows=30, details=True)
    on_ray = fk.evaluate_parquet(source, tmp_path / "ray.parquet", [RetrievalRelevance()], MAPPING,
                                 engine="ray", workers=2, **run)  # fmt: skip
    by_model = sim.stats()["by_model"]
    local = fk.evaluate_parquet(source, tmp_path / "local.parquet", [RetrievalRelevance()],
                                MAPPING, **run)  # fmt: skip
    ray_out = pl.read_parquet(tmp_path / "ray.parquet")
    assert ray_out.drop(pl.selectors.ends_with("_latency_s")).equals(
        pl.read_parquet(tmp_path / "local.parquet").drop(pl.selectors.ends_with("_latency_s"))
    )
    assert by_model["weak"] == 90
    strong_rows = int((ray_out["retrieval_relevance_judge"] == "openai/strong").sum())
    assert by_model["strong"] == strong_rows < 0.75 * 90
    # The slices' stage counts add up to one entry per stage, as the local engine's.
    assert [s["rows_decided"] for s in on_ray.stats.stages] == [90 - strong_rows, strong_rows]
    assert on_ray.stats.stages == local.stats.stages


def test_a_budget_on_ray_is_one_budget_for_every_worker(ray_cluster, judge_simulator, tmp_path):
    from framekit.engine.budget import BUDGET_REACHED

    price = {"input": 2.0, "output": 8.0}
    judge = sim_judge(judge_simulator, price=price, concurrency=2, max_tokens=200)
    source = tmp_path / "in.parquet"
    rows = 60
    retrieval_frame(rows).write_parquet(source)

    def run(limit: float) -> Any:
        return fk.evaluate_parquet(
            source, tmp_path / "out.parquet", [RetrievalRelevance()], MAPPING, judge=judge,
            cache=tmp_path / "cache", progress=False, slice_rows=10, engine="ray", workers=2,
            max_cost_usd=limit,
        )  # fmt: skip

    budget = 0.02  # about 20 of the 60 requests: each costs about $0.001, holds $0.0023
    first = run(budget)
    counts = judge_simulator.stats()
    sent = counts["chat"]
    paid = (counts["prompt_tokens"] * 2.0 + counts["completion_tokens"] * 8.0) / 1e6
    # One budget for both workers: within it plus one concurrency's worth per worker.
    assert paid <= budget + 2 * 2 * 0.0012
    assert 0 < sent < rows and first.stats.rows_left == rows - sent
    out = pl.read_parquet(tmp_path / "out.parquet")
    left = out["retrieval_relevance_error"].str.starts_with(BUDGET_REACHED).fill_null(False)
    assert int(left.sum()) == rows - sent
    run(100.0)
    assert judge_simulator.stats()["chat"] == rows  # exactly the rows left


def test_a_key_from_the_environment_does_not_travel_to_the_workers(monkeypatch):
    import pickle

    from framekit.ray._dataset import run_spec

    monkeypatch.setenv("FRAMEKIT_API_KEY", "sk-from-env-CANARY-42")
    judge = fk.Judge("openai/sim", api_base="http://127.0.0.1:9/v1")
    spec = run_spec([RetrievalRelevance()], MAPPING, judge, False, False, False, False)
    assert spec.key_from_env
    assert b"CANARY-42" not in pickle.dumps(spec)
    assert judge.secrets == ["sk-from-env-CANARY-42"]  # the caller's judge is unchanged
    explicit = fk.Judge("openai/sim", api_key="sk-explicit-CANARY-7")
    assert not run_spec(
        [RetrievalRelevance()], MAPPING, explicit, False, False, False, False
    ).key_from_env


def _sent_per_prompt(sim) -> collections.Counter[str]:  # type: ignore[no-untyped-def]
    return collections.Counter(json.dumps(r["messages"]) for r in sim.requests)


def _quiet(sim, seconds: float = 1.5) -> None:  # type: ignore[no-untyped-def]
    """Wait until no request has arrived for ``seconds`` (the killed job's workers are gone)."""
    last, since = -1, time.monotonic()
    while time.monotonic() - since < seconds:
        now = sim.stats()["chat"]
        if now != last:
            last, since = now, time.monotonic()
        time.sleep(0.1)


def test_killed_driver_rerun_pays_only_for_calls_in_flight_and_unwritten_answers(
    ray_cluster, simulator_factory, tmp_path
):
    sim = simulator_factory(latency=0.05)
    rows, workers, concurrency = 200, 2, 4
    retrieval_frame(rows).write_parquet(tmp_path / "runs.parquet", row_group_size=40)
    # Not FRAMEKIT_API_KEY: that one is read from the workers' own environment (the Ray
    # instance's, started by this test session), where it is not set.
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SIM_KEY": "sk-test",
           "LITELLM_OFFLINE_MODE": "true"}  # fmt: skip
    env.pop("FRAMEKIT_JUDGE", None)
    command = [
        sys.executable, "-m", "framekit.cli", "evaluate", "runs.parquet",
        "-e", "retrieval_relevance", "--map", "input=question", "--map", "context=docs",
        "--judge", "openai/sim", "--api-base", sim.api_base, "--api-key-env", "SIM_KEY", "--concurrency", str(concurrency),
        "--engine", "ray", "--address", ray_cluster, "--workers", str(workers),
        "--cache", str(tmp_path / "cache"), "-o", "scored.parquet", "-q",
    ]  # fmt: skip
    driver = subprocess.Popen(command, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    try:
        while sim.stats()["chat"] < rows // 3 and driver.poll() is None:
            time.sleep(0.05)
        assert driver.poll() is None, driver.stderr.read() if driver.stderr else ""
        driver.send_signal(signal.SIGKILL)
    finally:
        driver.wait()
    _quiet(sim)
    first = sim.stats()["chat"]
    assert first < rows
    assert not (tmp_path / "scored.parquet").exists()

    again = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240
    )
    assert again.returncode == 0, again.stderr
    scored = pl.read_parquet(tmp_path / "scored.parquet")
    assert scored.height == rows
    assert scored["retrieval_relevance_error"].null_count() == rows
    sent = _sent_per_prompt(sim)
    assert len(sent) == rows  # every distinct request was answered once...
    paid_twice = sum(n - 1 for n in sent.values())
    # ...and only those in flight when the driver died went out again, with the answers
    # each worker's cache writer had not yet committed. At 50 ms latency and 4 calls per
    # worker (at most 80 answers/s each) a write group can only hold the few answers that
    # arrive during one transaction; 4 per worker is the margin allowed for them (not a
    # measured group size: the writer's groups are not counted in this test).
    lost = workers * (concurrency + 4)
    assert paid_twice <= lost, paid_twice
    assert sim.stats()["chat"] - first < rows - first + lost + 1


class _ScriptedActor:
    """Stands in for the limiter actor's handle: grants ``(seconds from now to the slot,
    tolerance)`` from a script, and keeps each slot and what each ask reported."""

    def __init__(self, grants: list[tuple[float, float]]) -> None:
        self.grants = grants
        self.slots: list[float] = []
        self.reports: list[tuple[Any, ...]] = []
        self.acquire = types.SimpleNamespace(remote=self._acquire)

    async def _acquire(self, tokens: int, *report: Any) -> tuple[float, float, float]:
        self.reports.append(report)
        ahead, tolerance = self.grants.pop(0)
        now = time.time()
        self.slots.append(now + ahead)
        return now, now + ahead, tolerance


def test_a_grant_reaching_its_worker_after_the_tolerance_is_given_up_and_asked_again():
    from framekit.ray._limiter import RemoteLimiter

    # The first grant's slot passed 0.4 s before it arrived (a starved worker), beyond its
    # 30 ms tolerance; the next ones are ahead (with a tolerance no loaded test machine
    # misses).
    actor = _ScriptedActor([(-0.4, 0.03), (0.05, 5.0), (0.05, 5.0)])
    limiter = RemoteLimiter(actor)

    async def two_requests() -> list[float]:
        sent = []
        for _ in range(2):
            await limiter.acquire()
            sent.append(time.time())
        return sent

    sent = asyncio.run(two_requests())
    assert len(actor.reports) == 3  # the first request asked twice
    assert sent[0] >= actor.slots[1] and sent[1] >= actor.slots[2]  # never before a slot
    # What the worker told the actor when it asked again: one grant expired, 0.4 s late.
    successes, correction, timings, expired = actor.reports[1]
    assert (successes, correction, expired) == (0, 0, 1)
    assert len(timings) == 1 and timings[0][1] >= 0.4
    _, _, timings, expired = actor.reports[2]
    assert expired == 0 and len(timings) == 1 and timings[0][1] < 5.0


def test_late_wake_ups_widen_the_tolerance_and_slow_the_pace_to_fit_the_window():
    from framekit.ray._limiter import MIN_TOLERANCE_S, _LimiterActor

    actor = _LimiterActor(rpm=600, tpm=None)

    async def grant(timings: list[tuple[float, float]]) -> tuple[float, float, float]:
        return await actor.acquire(0, 0, 0, timings, 0)

    async def scenario() -> tuple[tuple[float, float, float], tuple[float, float, float]]:
        quiet = await grant([(0.003, 0.001)] * 50)
        await actor.observe({})  # the first answer: the limiter paces the rest
        # Workers that wake 0.3 s after their slots (a starved machine).
        busy = await grant([(0.003, 0.3)] * 200)
        return quiet, busy

    quiet, busy = asyncio.run(scenario())
    assert quiet[2] == MIN_TOLERANCE_S and quiet[1] - quiet[0] == pytest.approx(0.1)
    assert busy[2] == pytest.approx(0.3)
    # Sends anywhere within 0.3 s of their slots: the grants of any 1.27 s (beyond what the
    # margin absorbs) may share one window, so the pace drops to 1 / 1.27 of 9.4 a second.
    assert actor._limiter.request_rate == pytest.approx(10 * 0.94 / (1 + 0.3 - MIN_TOLERANCE_S))


#: A process keeping one core busy until it is killed, or for at most a minute.
_CPU_HOG = "import time\nend = time.monotonic() + 60\nwhile time.monotonic() < end:\n    pass\n"


@pytest.mark.cpu_hog
def test_the_shared_limit_holds_a_one_second_window_under_a_cpu_hog_on_both_cores(
    ray_cluster, simulator_factory
):
    import threading

    import ray

    import framekit.ray as fkray

    # 600 RPM counted per fixed 1-second window: at most 10 requests in each.
    sim = simulator_factory(latency=0.05, latency_max=0.2, rpm=600, rpm_window=1.0)
    judge = sim_judge(sim, rpm=600, concurrency=16)
    rows = 200
    frame = retrieval_frame(rows)
    hogs: list[subprocess.Popen[bytes]] = []
    done = threading.Event()

    def starve_once_scoring_starts() -> None:
        # Once the workers are sending (their start-up is not what is under test): a busy
        # loop on each of the machine's two cores, competing with the workers, the limiter
        # actor and the simulator.
        while sim.stats()["chat"] == 0 and not done.wait(0.02):
            pass
        if not done.is_set():
            hogs.extend(subprocess.Popen([sys.executable, "-c", _CPU_HOG]) for _ in range(2))

    starter = threading.Thread(target=starve_once_scoring_starts, daemon=True)
    starter.start()
    try:
        blocks = [frame.slice(i, 50).to_arrow() for i in range(0, rows, 50)]
        scored = collect(
            fkray.evaluate_dataset(ray.data.from_arrow(blocks), [RetrievalRelevance()], MAPPING,
                                   judge=judge, cache=False, workers=2, batch_rows=50)
        )  # fmt: skip
    finally:
        done.set()
        starter.join()
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert hogs, "the run ended before the CPU hogs started"
    assert scored["retrieval_relevance_error"].null_count() == rows
    by_status = sim.stats()["by_status"]
    assert by_status[200] == rows
    # Under the hogs, grants reach the starved workers late: sent on arrival, they bunch
    # into some windows (before slots expired: 3 429s of 200 here, 4 of 300 at 1,200 RPM,
    # at load averages of 55-60). At most 1 %.
    assert by_status.get(429, 0) <= rows // 100, by_status
