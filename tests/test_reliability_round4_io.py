"""Issue 39, outputs and bad input: destinations that are not regular files, ``-o -``,
string columns holding invalid UTF-8, and the smaller input faults of the same round.

Every CLI case ends in one line naming the path, column or argument, exit 2, and no
request at the simulator.
"""

from __future__ import annotations

import io
import json
import os
import pty
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import framekit as fk
from framekit.analysis.report import write_html_report
from framekit.evaluators import RetrievalRelevance
from tests.helpers import API_KEY, MAPPING, RETRIEVAL_CLI_ARGS, retrieval_frame, sim_judge

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str, cwd: Path, env: dict[str, str] | None = None, **run: object):
    environ = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    environ.update(PYTHONPATH=str(ROOT), LITELLM_OFFLINE_MODE="true", **(env or {}))
    environ.pop("FRAMEKIT_JUDGE", None)
    run.setdefault("capture_output", True)
    return subprocess.run(
        [sys.executable, "-m", "framekit.cli", *args], cwd=cwd, env=environ, timeout=180, **run
    )


def _sim_args(sim) -> list[str]:
    return ["--judge", "openai/sim-judge", "--api-base", sim.api_base, *RETRIEVAL_CLI_ARGS]


def _one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


# -- destinations that are not regular files ------------------------------------------


def _refused_and_left(target: Path, is_kind, sim, cwd: Path) -> None:
    run = _cli("evaluate", "in.parquet", "-o", str(target), *_sim_args(sim), cwd=cwd,
               env={"FRAMEKIT_API_KEY": API_KEY}, text=True)  # fmt: skip
    assert is_kind(os.stat(target).st_mode)  # still the FIFO, still the device
    assert run.returncode == 2, run.stderr
    line = _one_line(run.stderr)
    assert str(target) in line and "not a regular file" in line
    assert sim.stats()["total"] == 0
    assert not list(target.parent.glob(f".{target.name}*"))  # no parts, no probe left


def test_a_fifo_at_o_is_refused_in_one_line_and_never_replaced(tmp_path, judge_simulator):
    retrieval_frame(4).write_parquet(tmp_path / "in.parquet")
    os.mkfifo(tmp_path / "pipe")
    _refused_and_left(tmp_path / "pipe", stat.S_ISFIFO, judge_simulator, tmp_path)


def test_o_dev_null_is_refused_and_dev_null_stays_a_device(tmp_path, judge_simulator):
    retrieval_frame(4).write_parquet(tmp_path / "in.parquet")
    if os.geteuid() == 0:
        # As root, code that replaces its destination destroys /dev/null (the old code
        # did): a device node of the same kind in tmp_path is tried first, so that such
        # code fails here and never reaches the real one.
        copy = tmp_path / "null"
        os.mknod(copy, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        _refused_and_left(copy, stat.S_ISCHR, judge_simulator, tmp_path)
    _refused_and_left(Path("/dev/null"), stat.S_ISCHR, judge_simulator, tmp_path)


def test_every_library_writer_refuses_a_fifo_and_leaves_it(tmp_path, judge_simulator):
    src = tmp_path / "in.parquet"
    retrieval_frame(4).write_parquet(src)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    scored = retrieval_frame(2).with_columns(
        pl.lit(1.0).alias("retrieval_relevance_score"),
        pl.lit(None, pl.String).alias("retrieval_relevance_error"),
        span_id=pl.Series(["0123456789abcdef", "0123456789abcdee"]),
        trace_id=pl.Series(["0" * 31 + "1", "0" * 31 + "2"]),
    )
    writers = {
        "evaluate_parquet": lambda: fk.evaluate_parquet(
            src,
            fifo,
            [RetrievalRelevance()],
            MAPPING,
            judge=sim_judge(judge_simulator),
            cache=False,
            progress=False,
        ),  # fmt: skip
        "write_parquet": lambda: fk.io.write_parquet(scored, fifo, provenance={"x": 1}),
        "write_html_report": lambda: write_html_report(scored, fifo),
        "to_otel_events": lambda: fk.traces.to_otel_events(scored, fifo),
    }
    for name, write in writers.items():
        with pytest.raises(fk.InputError, match="FIFO") as raised:
            write()  # a FIFO opened for writing would block: the check comes first
        assert str(fifo) in str(raised.value), name
        assert stat.S_ISFIFO(os.stat(fifo).st_mode), name
    assert judge_simulator.stats()["total"] == 0


def test_report_html_to_a_fifo_exits_2_before_the_summary(tmp_path):
    scored = retrieval_frame(4).with_columns(
        pl.lit(0.5).alias("retrieval_relevance_score"),
        pl.lit(None, pl.String).alias("retrieval_relevance_error"),
    )
    scored.write_parquet(tmp_path / "scored.parquet")
    os.mkfifo(tmp_path / "r.html")
    run = _cli("report", "scored.parquet", "--html", "r.html", cwd=tmp_path, text=True)
    assert run.returncode == 2 and run.stdout == ""
    assert "r.html" in _one_line(run.stderr)


# -- -o - ------------------------------------------------------------------------------


def test_o_dash_writes_the_parquet_file_and_its_run_record_to_stdout(tmp_path, judge_simulator):
    retrieval_frame(5).write_parquet(tmp_path / "in.parquet")
    run = _cli("evaluate", "in.parquet", "-o", "-", "-q", *_sim_args(judge_simulator),
               cwd=tmp_path, env={"FRAMEKIT_API_KEY": API_KEY})  # fmt: skip
    assert run.returncode == 0, run.stderr
    table = pq.read_table(io.BytesIO(run.stdout))
    assert table.num_rows == 5 and "retrieval_relevance_score" in table.column_names
    (tmp_path / "piped.parquet").write_bytes(run.stdout)
    record = fk.io.read_provenance(tmp_path / "piped.parquet")
    assert record is not None and record["judges"]
    assert not (tmp_path / "-").exists()  # was: a file named "-"
    assert judge_simulator.stats()["total"] == 5


def test_o_dash_is_refused_on_a_terminal_and_with_no_wait(tmp_path, judge_simulator):
    retrieval_frame(3).write_parquet(tmp_path / "in.parquet")
    leader, follower = pty.openpty()
    try:
        run = _cli("evaluate", "in.parquet", "-o", "-", *_sim_args(judge_simulator),
                   cwd=tmp_path, env={"FRAMEKIT_API_KEY": API_KEY}, capture_output=False,
                   stdout=follower, stderr=subprocess.PIPE, text=True)  # fmt: skip
    finally:
        os.close(follower)
        os.close(leader)
    assert run.returncode == 2
    assert "terminal" in _one_line(run.stderr)
    run = _cli("evaluate", "in.parquet", "-o", "-", "--batch", "--no-wait",
               *_sim_args(judge_simulator), cwd=tmp_path, env={"FRAMEKIT_API_KEY": API_KEY},
               text=True)  # fmt: skip
    assert run.returncode == 2 and "--no-wait" in _one_line(run.stderr)
    assert judge_simulator.stats()["total"] == 0


# -- a string column holding invalid UTF-8 ---------------------------------------------


def _invalid_utf8_parquet(path: Path) -> None:
    """A Parquet file whose String column holds bytes that are not UTF-8, as a writer
    that casts binary data to string without checking it leaves one."""
    raw = pa.array([b"Item 0 is a thing.", b"caf\xe9 \xff\xfe", b"Item 2."], type=pa.binary())
    questions = pa.array([f"What is item {i}?" for i in range(3)])
    pq.write_table(pa.table({"question": questions, "docs": raw.view(pa.string())}), path)


def test_a_string_column_holding_invalid_utf8_is_one_line_naming_the_column(
    tmp_path, judge_simulator
):
    _invalid_utf8_parquet(tmp_path / "in.parquet")
    run = _cli("evaluate", "in.parquet", "-o", "out.parquet", *_sim_args(judge_simulator),
               cwd=tmp_path, env={"FRAMEKIT_API_KEY": API_KEY}, text=True)  # fmt: skip
    assert run.returncode == 2, run.stderr  # was: polars' ComputeError traceback, exit 1
    line = _one_line(run.stderr)
    assert "'docs'" in line and "UTF-8" in line and "in.parquet" in line
    assert judge_simulator.stats()["total"] == 0
    assert not (tmp_path / "out.parquet").exists()
    with pytest.raises(fk.InputError, match="column 'docs'"):
        fk.evaluate_parquet(
            tmp_path / "in.parquet", tmp_path / "out.parquet", [RetrievalRelevance()], MAPPING,
            judge=sim_judge(judge_simulator), cache=False, progress=False,
        )  # fmt: skip
    dry = _cli("evaluate", "in.parquet", "--dry-run", *_sim_args(judge_simulator),
               cwd=tmp_path, text=True)  # fmt: skip
    assert dry.returncode == 2 and "'docs'" in _one_line(dry.stderr)


# -- the smaller faults ------------------------------------------------------------------


def test_a_cascade_summary_says_how_many_rows_its_last_stage_failed(judge_simulator, capsys):
    frame = retrieval_frame(12).with_columns(
        question=pl.when(pl.col("row_id") % 4 == 0)
        .then(pl.col("question") + " @sim(fault=400)")
        .otherwise(pl.col("question"))
    )
    stages = [sim_judge(judge_simulator), sim_judge(judge_simulator, temperature=0.5)]
    out = fk.evaluate_dataframe(
        frame, [RetrievalRelevance()], MAPPING, judge=fk.Cascade(stages, [0.9]), cache=False,
    )  # fmt: skip
    failed = int(out["retrieval_relevance_error"].is_not_null().sum())
    assert failed == 3
    line = next(s for s in capsys.readouterr().err.splitlines() if "framekit: cascade" in s)
    last = fk.last_run().stages[-1]
    assert last["rows_failed"] == 3 and last["rows_decided"] == last["rows"]
    # Was: "decided 9 of 9 rows" though 3 of them are errors.
    shown = f"(stage 2) decided {last['rows'] - 3} of {last['rows']} rows, failed 3"
    assert line.endswith(f"{shown} ({last['requests']} requests)"), line


class _Stub:
    """A server on 127.0.0.1 answering every POST with HTTP 200 and ``body``."""

    def __init__(self, body: bytes) -> None:
        import http.server
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                self.rfile.read(int(self.headers.get("content-length", 0)))
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.api_base = f"http://127.0.0.1:{self.server.server_port}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (
            json.dumps({"error": {"message": "The model is overloaded (ref 7f3a)"}}).encode(),
            "HTTP 200 with an error: The model is overloaded (ref 7f3a)",
        ),
        (b'{"choices": [{"message": {"content": "caf\xe9 \xff"}}]}', "not valid UTF-8"),
    ],
    ids=["error_object", "invalid_utf8"],
)
def test_an_unreadable_200_is_reported_in_the_endpoints_words(body, said):
    stub = _Stub(body)
    try:
        judge = fk.Judge("openai/stub", api_base=stub.api_base, api_key=API_KEY, max_retries=0,
                         transport="http")  # fmt: skip
        out = fk.evaluate_dataframe(
            retrieval_frame(1), [RetrievalRelevance()], MAPPING, judge=judge, cache=False,
            progress=False,
        )  # fmt: skip
    finally:
        stub.close()
    error = out["retrieval_relevance_error"][0]
    assert said in error and "not a chat completion" not in error, error


@pytest.mark.parametrize("output", ["out.parquet", "-"])
def test_the_interrupt_message_of_a_parquet_run_counts_every_answer_it_saved(
    simulator_factory, tmp_path, output
):
    sim = simulator_factory(latency=0.05)
    retrieval_frame(400).write_parquet(tmp_path / "in.parquet")
    environ = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    environ.update(PYTHONPATH=str(ROOT), LITELLM_OFFLINE_MODE="true", FRAMEKIT_API_KEY=API_KEY)
    proc = subprocess.Popen(
        [sys.executable, "-m", "framekit.cli", "evaluate", "in.parquet", "-o", output,
         "--slice-rows", "40", "--concurrency", "4", "--cache", "cache", "-q", *_sim_args(sim)],
        cwd=tmp_path, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 90
    while sim.stats()["by_status"].get(200, 0) < 100:  # two slices done, a third begun
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130 and stdout == "", stderr
    said = re.search(r"(\d+) responses received before the stop are saved", stderr)
    assert said is not None, stderr
    saved = len(fk.Cache(tmp_path / "cache"))
    # Was: only the slice under way (e.g. 20 said, 100 saved).
    assert int(said.group(1)) == saved >= 100 - 4, stderr  # 4 in flight may be lost
    finished = re.search(r"\b(\d+) of 10 slices are finished", stderr)
    if output == "-":  # the temporary directory, and its finished slices, are gone
        assert finished is None and "finished slices are not kept" in stderr, stderr
    else:
        assert finished is not None and int(finished.group(1)) >= 2, stderr


def test_a_file_name_that_is_not_utf8_is_one_line_naming_it(tmp_path, judge_simulator):
    latin1 = os.fsdecode(b"caf\xe9.parquet")  # a name written under Latin-1
    retrieval_frame(3).write_parquet(tmp_path / "in.parquet")
    os.replace(tmp_path / "in.parquet", tmp_path / latin1)
    cases = [
        ("evaluate", latin1, "-o", "out.parquet", *_sim_args(judge_simulator)),
        ("evaluate", latin1, "--dry-run", *_sim_args(judge_simulator)),
        ("report", latin1),
    ]
    retrieval_frame(3).write_parquet(tmp_path / "ok.parquet")
    cases.append(("evaluate", "ok.parquet", "-o", latin1 + ".out", *_sim_args(judge_simulator)))
    for args in cases:
        run = _cli(*args, cwd=tmp_path, env={"FRAMEKIT_API_KEY": API_KEY}, text=True,
                   errors="backslashreplace")  # fmt: skip
        assert run.returncode == 2, (args, run.stderr)
        line = _one_line(run.stderr)  # was: "Object does not have a .read() method."
        assert "caf\\xe9.parquet" in line and "not valid UTF-8" in line, line
    assert judge_simulator.stats()["total"] == 0


@pytest.mark.parametrize("model", ["openai/", "openai/ ", "hosted_vllm/"])
def test_a_provider_without_a_model_is_refused_in_one_line(tmp_path, model):
    with pytest.raises(fk.InputError, match="but no model after it"):
        fk.Judge(model, api_key=API_KEY)
    retrieval_frame(2).write_parquet(tmp_path / "in.parquet")
    run = _cli("evaluate", "in.parquet", "-o", "out.parquet", "--judge", model,
               *RETRIEVAL_CLI_ARGS, cwd=tmp_path, text=True)  # fmt: skip
    assert run.returncode == 2 and "but no model after it" in _one_line(run.stderr)
    assert not (tmp_path / "out.parquet").exists()


def test_text_cut_to_fit_is_counted_in_the_summary_and_last_run(judge_simulator, tmp_path, capsys):
    huge = "All work and no play makes Jack a dull boy. " * 23_832  # about 1 MB
    frame = pl.DataFrame(
        {"question": ["What does Jack do?", "Short?", "Again?"],
         "docs": [[huge], ["Jack works."], [huge + "!"]]}
    )  # fmt: skip
    fk.evaluate_dataframe(frame, [RetrievalRelevance()], MAPPING,
                          judge=sim_judge(judge_simulator), cache=False)  # fmt: skip
    assert fk.last_run().cut_to_fit == 2
    summary = capsys.readouterr().err
    assert "2 evaluations had their text cut to fit the judge's context window" in summary
    frame.write_parquet(tmp_path / "in.parquet")
    run = fk.evaluate_parquet(tmp_path / "in.parquet", tmp_path / "out.parquet",
                              [RetrievalRelevance()], MAPPING, judge=sim_judge(judge_simulator),
                              cache=False, slice_rows=2)  # fmt: skip
    assert run.stats.cut_to_fit == 2 and "2 evaluations had their text cut" in run.summary()
