"""Files in ``<cache>/batches/`` are input: a hostile or broken batch manifest is reported
and left alone, and the user's key goes only to the endpoint the user gave.

Counted where it matters: at the simulator (batches created, files uploaded, pages of the
batch list), at a recording stub standing in for a foreign host (every request and its
headers), and on disk (the files a manifest names still there, the manifest unchanged).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
import warnings
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import framekit as fk
from framekit._errors import BatchPending
from framekit.engine.dryrun import plan_requests
from framekit.evaluators import RetrievalRelevance
from framekit.judges.batch import AnthropicBatchClient, OpenAIBatchClient
from framekit.judges.pricing import UNKNOWN_COST
from framekit.testing import JudgeSimulator, SimulatorConfig
from tests.helpers import API_KEY, MAPPING, batch_judge, retrieval_frame, score_retrieval

PRICED = "openai/gpt-4o-mini"
ROWS = 30


class Recorder(ThreadingHTTPServer):
    """A foreign host: records every request (method, path, headers, body) and answers
    each as a batch API would, so a client that came here would think it worked."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Record)
        self.seen: list[dict[str, Any]] = []

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Record(BaseHTTPRequestHandler):
    server: Recorder

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length).decode("latin-1")
        self.server.seen.append(
            {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
        )
        reply = {
            "id": "batch_stolen",
            "object": "batch",
            "status": "in_progress",
            "request_counts": {"total": ROWS, "completed": 0, "failed": 0},
            "data": [],
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, *args: object) -> None:  # quiet
        pass


@pytest.fixture
def sim() -> Iterator[JudgeSimulator]:
    with JudgeSimulator(SimulatorConfig(batch_seconds=0.1)) as s:
        yield s


@pytest.fixture
def foreign() -> Iterator[Recorder]:
    server = Recorder()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def score(cache: Path, judge: fk.Judge, **kw: Any) -> pl.DataFrame:
    return score_retrieval(retrieval_frame(ROWS), judge, cache, **kw)


def submitted(sim: JudgeSimulator, cache: Path) -> tuple[Path, dict[str, Any]]:
    """Submit this test's rows without waiting: the manifest left, and its content."""
    sim.configure(batch_seconds=600.0)
    with pytest.raises(BatchPending):
        score(cache, batch_judge(sim, wait=False))
    (path,) = (cache / "batches").glob("*.json")
    return path, json.loads(path.read_text())


# -- hostile manifests on the run path -------------------------------------------------


def _spool_outside(m: dict[str, Any], batches: Path, secret: Path, foreign: str) -> bytes:
    return _json({**m, "state": "uploading", "batch_id": None, "spool": str(secret)})


def _spool_symlink_out(m: dict[str, Any], batches: Path, secret: Path, foreign: str) -> bytes:
    (batches / f"{m['local_id']}.jsonl").symlink_to(secret)
    return _json({**m, "state": "uploading", "batch_id": None})


def _endpoint_elsewhere(m: dict[str, Any], batches: Path, secret: Path, foreign: str) -> bytes:
    return _json({**m, "endpoint": foreign})


def _endpoint_elsewhere_uploading(
    m: dict[str, Any], batches: Path, secret: Path, foreign: str
) -> bytes:
    return _json({**m, "endpoint": foreign, "state": "uploading", "batch_id": None})


def _unknown_state(m: dict[str, Any], batches: Path, secret: Path, foreign: str) -> bytes:
    return _json({**m, "state": "resubmit", "spool": str(secret)})


def _garbage(m: dict[str, Any], batches: Path, secret: Path, foreign: str) -> bytes:
    return b'{"local_id": "' + m["local_id"].encode() + b'", "state": "uploading", \x00\xff'


def _wrong_types(m: dict[str, Any], batches: Path, secret: Path, foreign: str) -> bytes:
    return _json({**m, "batch_id": 12345, "completed": "all"})


def _local_id_elsewhere(m: dict[str, Any], batches: Path, secret: Path, foreign: str) -> bytes:
    return _json({**m, "local_id": "../../outside", "state": "uploading", "batch_id": None})


def _json(data: dict[str, Any]) -> bytes:
    return json.dumps(data).encode()


HOSTILE: dict[str, Callable[[dict[str, Any], Path, Path, str], bytes]] = {
    "spool outside batches/": _spool_outside,
    "spool a symlink out of batches/": _spool_symlink_out,
    "endpoint elsewhere (submitted)": _endpoint_elsewhere,
    "endpoint elsewhere (uploading)": _endpoint_elsewhere_uploading,
    "unknown state": _unknown_state,
    "garbage, not JSON": _garbage,
    "wrong types": _wrong_types,
    "local_id naming another directory": _local_id_elsewhere,
}


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_a_hostile_manifest_is_reported_in_one_line_and_left_alone(
    kind: str, sim: JudgeSimulator, foreign: Recorder, tmp_path: Path
) -> None:
    # A real manifest for this run's rows (made in another cache), turned hostile.
    _, template = submitted(sim, tmp_path / "elsewhere")
    cache = tmp_path / "cache"
    batches = cache / "batches"
    batches.mkdir(parents=True)
    secret = tmp_path / "secret.txt"
    secret.write_text("a file the user never meant to upload or lose\n")
    hostile = batches / f"{template['local_id']}.json"
    hostile.write_bytes(HOSTILE[kind](template, batches, secret, foreign.api_base))
    before = {p.name: p.read_bytes() for p in batches.iterdir() if not p.is_symlink()}
    links = [p for p in batches.iterdir() if p.is_symlink()]
    sim.reset()
    sim.configure(batch_seconds=0.1)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = score(cache, batch_judge(sim))

    assert out["retrieval_relevance_score"].null_count() == 0
    # The run made its own batch: nothing of the hostile manifest was uploaded.
    stats = sim.stats()["batch"]
    assert stats["batches_created"] == 1 and stats["files_uploaded"] == 1
    assert stats["lines"] == ROWS and sim.stats()["chat"] == 0
    assert foreign.seen == []  # not one request to the foreign host
    # Nothing deleted or rewritten: the file it named, the manifest, its spool.
    assert secret.read_text() == "a file the user never meant to upload or lose\n"
    assert {p: hostile.parent.joinpath(p).read_bytes() for p in before} == before
    assert all(p.is_symlink() for p in links)
    assert not (tmp_path / "outside.json").exists()
    # One warning line, naming the manifest.
    notes = [str(w.message) for w in caught if "batch manifest" in str(w.message)]
    assert len(notes) == 1 and str(hostile) in notes[0] and "\n" not in notes[0], notes


# -- framekit batches: the key goes only where the user says ----------------------------


def test_framekit_batches_never_sends_the_key_to_the_endpoint_a_manifest_names(
    sim: JudgeSimulator,
    foreign: Recorder,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from framekit.cli import main

    cache = tmp_path / "cache"
    real, manifest = submitted(sim, cache)  # a real batch at the simulator
    stolen = {**manifest, "local_id": "20250101T000000-0badf00d", "batch_id": "batch_stolen"}
    stolen["spool"] = f"{stolen['local_id']}.jsonl"
    hostile = cache / "batches" / f"{stolen['local_id']}.json"
    hostile.write_text(json.dumps({**stolen, "endpoint": foreign.api_base}))
    (cache / "batches" / "garbage.json").write_bytes(b"\x1b[2J not json")
    recorded = hostile.read_bytes()
    for name in ("OPENAI_API_KEY", "FRAMEKIT_API_KEY"):
        monkeypatch.setenv(name, API_KEY)
    monkeypatch.delenv("FRAMEKIT_API_BASE", raising=False)
    retrieves = sim.stats()["batch"]["retrieves"]
    here = ["--cache", str(cache)]

    # No endpoint given: OpenAI's own, where no batch was recorded; nothing is asked.
    assert main(["batches", *here]) == 0
    assert foreign.seen == []  # not refreshed where the file says: the key stays home
    offline = capsys.readouterr()
    assert "batch_stolen" in offline.out and manifest["batch_id"] in offline.out
    assert "2 unfinished batch(es) recorded for another endpoint" in offline.err
    assert offline.err.count("garbage.json") == 1 and "\x1b" not in offline.err
    # The simulator given (flag, then variable): its batch is refreshed, the other not.
    assert main(["batches", *here, "--api-base", sim.api_base]) == 0
    monkeypatch.setenv("FRAMEKIT_API_BASE", sim.api_base)
    assert main(["batches", *here]) == 0
    listed = capsys.readouterr()
    assert sim.stats()["batch"]["retrieves"] == retrieves + 2
    assert "1 unfinished batch(es) recorded for another endpoint" in listed.err
    # Cancel refuses a batch recorded elsewhere, whatever endpoint is given.
    assert main(["batches", "cancel", "batch_stolen", *here]) == 2
    assert main(["batches", "cancel", "batch_stolen", *here, "--api-base", sim.api_base]) == 2
    refused = capsys.readouterr()
    assert "nothing was sent" in refused.err

    assert foreign.seen == []
    assert sim.stats()["batch"]["batches_cancelled"] == 0
    assert hostile.read_bytes() == recorded
    # The key scan: what was printed, what the foreign host received, the cache.
    seen = [offline.out, offline.err, listed.out, listed.err, refused.out, refused.err]
    seen += [json.dumps(foreign.seen)]
    seen += [p.read_bytes().decode("latin-1") for p in cache.rglob("*") if p.is_file()]
    assert real.exists() and len(seen) > 8
    for text in seen:
        assert API_KEY not in text and API_KEY[-8:] not in text


# -- a corrupt cache.db between submit and collect ----------------------------------------


def test_a_corrupt_cache_db_between_submit_and_collect_resumes_the_recorded_batch(
    sim: JudgeSimulator, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    manifest, _ = submitted(sim, cache)
    (cache / "cache.db").write_bytes(b"this is not a database " * 400)
    sim.configure(batch_seconds=0.1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = score(cache, batch_judge(sim))
    assert out["retrieval_relevance_score"].null_count() == 0
    assert sim.stats()["batch"]["batches_created"] == 1  # resumed, not paid twice
    assert any("was corrupt" in str(w.message) for w in caught)
    (aside,) = tmp_path.glob("cache.corrupt-*")
    assert (aside / "cache.db").read_bytes().startswith(b"this is not")
    assert not (aside / "batches").exists() and manifest.exists()


# -- prices: a custom api_base has none, in batch mode and in the dry run ---------------------


def test_a_custom_api_base_has_no_list_price_in_batch_mode_or_the_dry_run(
    sim: JudgeSimulator, tmp_path: Path
) -> None:
    out = score(tmp_path / "batch", batch_judge(sim), details=True)
    assert out["retrieval_relevance_cost_usd"].null_count() == ROWS
    run = fk.last_run()
    assert run is not None and run.batch_requests == ROWS and run.cost_usd is None
    assert f"cost {UNKNOWN_COST}" in run.summary()
    # The direct path (either transport) says the same, and so does the dry run, any way.
    direct = [
        fk.Judge(PRICED, api_base=sim.api_base, api_key=API_KEY, transport=transport)
        for transport in ("http", "litellm")
    ]
    for i, judge in enumerate(direct):
        score(tmp_path / f"direct{i}", judge)
        assert fk.last_run().cost_usd is None  # type: ignore[union-attr]
        assert f"cost {UNKNOWN_COST}" in fk.last_run().summary()  # type: ignore[union-attr]
    for planned in (*direct, batch_judge(sim)):
        plan = plan_requests(
            [retrieval_frame(ROWS)], [RetrievalRelevance()], MAPPING, judge=planned, cache=False
        )
        assert plan.requests == ROWS and not plan.cost_known and plan.cost_usd is None
        assert f"estimated cost: {UNKNOWN_COST}" in plan.describe()


# -- more than 100 batches at the provider ----------------------------------------------------


def _create_batches(client: type[Any], sim: JudgeSimulator, tmp_path: Path, n: int) -> None:
    """``n`` one-request batches at the simulator, as another tool or run would make them."""
    hello = [{"role": "user", "content": "hello"}]
    if client is OpenAIBatchClient:
        body = {"model": "gpt-4o-mini", "messages": hello}
        line = {"custom_id": "x", "method": "POST", "url": "/v1/chat/completions", "body": body}
        text = json.dumps(line) + "\n"
    else:
        params = {"model": "claude-3-5-haiku", "max_tokens": 8, "messages": hello}
        text = json.dumps({"requests": [{"custom_id": "x", "params": params}]})
    spool = tmp_path / "someone-else.jsonl"
    spool.write_text(text)

    async def create() -> None:
        maker = client(sim.api_base, API_KEY, "m")
        try:
            for i in range(n):
                await maker.submit(spool, 1, {"framekit": f"someone-else-{i}"})
        finally:
            await maker.close()

    asyncio.run(create())


def test_a_recorded_batch_past_the_first_100_at_the_provider_is_still_adopted(
    sim: JudgeSimulator, tmp_path: Path
) -> None:
    # Killed between "create batch" and "record its id": the manifest says uploading, and
    # 120 newer batches (another tool, another run) push it off the first page.
    cache = tmp_path / "cache"
    path, manifest = submitted(sim, cache)
    _create_batches(OpenAIBatchClient, sim, tmp_path, 120)
    path.write_text(json.dumps({**manifest, "state": "uploading", "batch_id": None}))
    sim.configure(batch_seconds=0.1)
    out = score(cache, batch_judge(sim))
    assert out["retrieval_relevance_score"].null_count() == 0
    stats = sim.stats()["batch"]
    assert stats["batches_created"] == 121  # the recorded one adopted, none paid again
    assert stats["lists"] == 2  # two pages of 100 (newest first); it was on the second
    assert json.loads(path.read_text())["batch_id"] == manifest["batch_id"]


@pytest.mark.parametrize("client", [OpenAIBatchClient, AnthropicBatchClient])
def test_the_batch_list_is_read_page_by_page(
    client: type[Any], sim: JudgeSimulator, tmp_path: Path
) -> None:
    _create_batches(client, sim, tmp_path, 230)

    async def listed() -> list[str]:
        reader = client(sim.api_base, API_KEY, "m")
        try:
            return [s.id async for s in reader.batches()]
        finally:
            await reader.close()

    ids = asyncio.run(listed())
    assert len(ids) == len(set(ids)) == 230
    assert ids == sorted(ids, reverse=True)  # newest first
    assert sim.stats()["batch"]["lists"] == 3


def test_spools_are_recorded_beside_their_manifest_so_a_copied_cache_resumes(
    sim: JudgeSimulator, tmp_path: Path
) -> None:
    # Caches are copied between CI jobs: a manifest names its spool by file name only.
    path, manifest = submitted(sim, tmp_path / "job1")
    assert manifest["spool"] == f"{manifest['local_id']}.jsonl"
    shutil.copytree(tmp_path / "job1", tmp_path / "job2")
    sim.configure(batch_seconds=0.1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = score(tmp_path / "job2", batch_judge(sim))
    assert out["retrieval_relevance_score"].null_count() == 0
    assert sim.stats()["batch"]["batches_created"] == 1
    assert not [w for w in caught if "batch manifest" in str(w.message)]


def test_a_spool_the_run_did_not_write_is_never_uploaded(
    sim: JudgeSimulator, tmp_path: Path
) -> None:
    # A run killed before its batch was created leaves an `uploading` manifest and its
    # spool. Whoever can write the cache can rewrite that spool (same custom_ids, other
    # prompts): the re-run must upload the requests of its own plan, not the file.
    cache, frame = tmp_path / "cache", retrieval_frame(ROWS, label="relevant")
    sim.configure(batch_seconds=600.0)
    with pytest.raises(BatchPending):
        score_retrieval(frame, batch_judge(sim, wait=False), cache)
    (path,) = (cache / "batches").glob("*.json")
    manifest = json.loads(path.read_text())
    spool = cache / "batches" / f"{manifest['local_id']}.jsonl"
    tampered = spool.read_text().replace("label=relevant", "label=irrelevant")
    assert "label=irrelevant" in tampered
    spool.write_text(tampered)
    path.write_text(json.dumps({**manifest, "state": "uploading", "batch_id": None}))
    sim.reset()  # the provider never created that batch
    sim.configure(batch_seconds=0.1)
    out = score_retrieval(frame, batch_judge(sim), cache)
    assert out["retrieval_relevance_label"].to_list() == ["relevant"] * ROWS
    stats = sim.stats()["batch"]
    assert stats["files_uploaded"] == 1 and stats["batches_created"] == 1
    assert not path.exists()  # the unadoptable record is gone; the new batch has its own
