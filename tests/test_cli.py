"""The ``framekit`` command, run as a user runs it: in a subprocess."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from tests.helpers import RETRIEVAL_CLI_ARGS

ROOT = Path(__file__).resolve().parents[1]


def framekit_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "framekit.cli", *args]


def framekit(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_OFFLINE_MODE": "true"}
    environ.pop("FRAMEKIT_JUDGE", None)
    environ.update(env or {})
    return subprocess.run(
        framekit_command(*args),
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def rag_parquet(tmp_path: Path) -> Path:
    """40 rows, 12 distinct (question, docs) pairs, one row with a null question."""
    questions = [f"What is item {i % 12}?" for i in range(40)]
    questions[5] = None  # type: ignore[call-overload]
    frame = pl.DataFrame(
        {
            "row_id": list(range(40)),
            "question": questions,
            "docs": [[f"Item {i % 12} is a thing."] for i in range(40)],
            "answer": [f"It is thing {i % 12}." for i in range(40)],
            "strategy": ["bm25", "dense"] * 20,
        }
    )
    path = tmp_path / "runs.parquet"
    frame.write_parquet(path)
    return path


def assert_input_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["missing.parquet", "-e", "retrieval_relevance"], ["no such file", "missing.parquet"]),
        (["notes.csv", "-e", "retrieval_relevance"], ["notes.csv", "is not a Parquet file"]),
        (
            ["runs.parquet", "-e", "retrieval_relevancy"],
            ["unknown evaluator 'retrieval_relevancy'"],
        ),
        (
            ["runs.parquet", "-e", "retrieval_relevance", "--map", "input=query"],
            ["no column 'query'", "'question'"],
        ),
        (
            ["runs.parquet", "-e", "retrieval_relevance", "--map", "input=question"],
            ["needs field 'context'"],
        ),
        (["runs.parquet", "-e", "coherence", "--map", "output"], ["expected FIELD=COLUMN"]),
        (["--sql", "select * from no_such_table", "-e", "coherence"], ["SQL query failed"]),
    ],
    ids=[
        "missing",
        "not-parquet",
        "unknown-evaluator",
        "missing-column",
        "unmapped-field",
        "bad-map",
        "bad-sql",
    ],
)
def test_input_errors_exit_2_with_a_message_and_leave_nothing(tmp_path, rag_parquet, args, needles):
    (tmp_path / "notes.csv").write_text("a,b\n1,2\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    result = framekit(
        "evaluate", *args, "-o", "out/scored.parquet", "--judge", "openai/never", cwd=tmp_path
    )
    assert_input_error(result, *needles)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no destination, no parts


def test_api_key_env_must_name_a_set_variable(tmp_path, rag_parquet):
    result = framekit(
        "evaluate",
        "runs.parquet",
        "-o",
        "o.parquet",
        *RETRIEVAL_CLI_ARGS,
        "--judge",
        "openai/x",
        "--api-key-env",
        "FRAMEKIT_TEST_UNSET_KEY",
        cwd=tmp_path,
    )
    assert_input_error(result, "FRAMEKIT_TEST_UNSET_KEY is not set")
    assert not (tmp_path / "o.parquet").exists()


def test_every_subcommand_has_help(tmp_path):
    for command, option in [
        ("evaluate", "--dry-run"),
        ("report", "--html"),
        ("compare", "--on"),
        ("demo", "--out"),
    ]:
        result = framekit(command, "--help", cwd=tmp_path)
        assert result.returncode == 0 and option in result.stdout
    top = framekit("--help", cwd=tmp_path)
    assert "FRAMEKIT_API_KEY" in top.stdout
    assert framekit(cwd=tmp_path).returncode == 2  # a subcommand is required


def test_dry_run_sends_nothing_and_predicts_the_real_run(tmp_path, rag_parquet, judge_simulator):
    common = [
        "runs.parquet",
        "-e",
        "retrieval_relevance,coherence",
        "--map",
        "input=question",
        "--map",
        "context=docs",
        "--map",
        "output=answer",
        "--judge",
        "openai/sim",
        "--api-base",
        judge_simulator.api_base,
        "--cache",
        "cache",
    ]
    env = {"FRAMEKIT_API_KEY": "sk-test"}
    dry = framekit("evaluate", *common, "--dry-run", cwd=tmp_path, env=env)
    assert dry.returncode == 0, dry.stderr
    assert judge_simulator.stats()["total"] == 0
    assert not (tmp_path / "cache").exists()  # a dry run creates nothing
    planned = int(re.search(r"requests to send: (\d+)", dry.stdout).group(1))  # type: ignore[union-attr]
    # Retrieval: 12 distinct (question, docs) pairs; the question-less row fails before
    # any call. Coherence: 12 distinct (answer, question) pairs, plus that row's answer
    # without a question (the question is optional for coherence).
    assert planned == 12 + 13, dry.stdout
    assert "1 evaluations will fail before any call" in dry.stdout
    assert "estimated tokens" in dry.stdout and "estimated cost" in dry.stdout

    real = framekit(
        "evaluate",
        *common,
        "-o",
        "scored.parquet",
        "-q",
        "--max-failures",
        "0",
        cwd=tmp_path,
        env=env,
    )
    assert real.returncode == 1, real.stderr  # the null question fails one row
    assert "1 rows failed, more than --max-failures 0" in real.stderr
    assert judge_simulator.stats()["chat"] == planned
    assert pl.read_parquet(tmp_path / "scored.parquet").height == 40

    again = framekit("evaluate", *common, "--dry-run", cwd=tmp_path, env=env)
    assert "requests to send: 0" in again.stdout
    assert f"{planned} already cached" in again.stdout
    ok = framekit(
        "evaluate",
        *common,
        "-o",
        "scored.parquet",
        "-q",
        "--max-failures",
        "1",
        cwd=tmp_path,
        env=env,
    )
    assert ok.returncode == 0, ok.stderr
    assert judge_simulator.stats()["chat"] == planned  # everything came from the cache


def _worker_pids_marked(mark: str, parent: int | None = None) -> list[int]:
    """Live judge worker processes whose environment carries ``mark`` (children of
    ``parent`` only, when given: a worker's own short-lived forks carry its command line
    until they exec, and are not workers)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            worker = b"framekit.judges.litellm.workers" in (proc / "cmdline").read_bytes()
            marked = worker and mark.encode() in (proc / "environ").read_bytes()
            stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            alive, ppid = stat[0] != "Z", int(stat[1])
            if marked and alive and (parent is None or ppid == parent):
                found.append(int(proc.name))
        except (OSError, ValueError):
            continue
    return found


def test_processes_flag_scores_through_worker_processes_that_exit_with_the_command(
    tmp_path, rag_parquet, judge_simulator
):
    mark = f"framekit-cli-test-{os.getpid()}"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "FRAMEKIT_API_KEY": "sk-test",
        "FRAMEKIT_TEST_MARK": mark,
    }
    env.pop("FRAMEKIT_JUDGE", None)
    command = framekit_command(
        "evaluate",
        "runs.parquet",
        *RETRIEVAL_CLI_ARGS,
        "--judge",
        "openai/sim",
        "--api-base",
        judge_simulator.api_base,
        "--processes",
        "2",
        "--no-cache",
        "-o",
        "scored.parquet",
        "-q",
        "--max-failures",
        "1",
    )
    proc = subprocess.Popen(command, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    seen: set[int] = set()
    while proc.poll() is None:
        seen.update(_worker_pids_marked(mark, parent=proc.pid))
        time.sleep(0.05)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    assert len(seen) == 2, "the calls were made by two worker processes"
    assert judge_simulator.stats()["chat"] == 12
    scored = pl.read_parquet(tmp_path / "scored.parquet")
    assert scored["retrieval_relevance_score"].null_count() == 1  # the row without a question
    assert _worker_pids_marked(mark) == [], "workers outlived the command"


def test_sql_dry_run_reads_the_input_as_a_view(tmp_path, rag_parquet):
    result = framekit(
        "evaluate",
        "runs.parquet",
        "--sql",
        "select * from input where strategy = 'dense'",
        "-e",
        "coherence",
        "--map",
        "output=answer",
        "--judge",
        "openai/gpt-4o-mini",
        "--no-cache",
        "--dry-run",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "dry run: 20 rows" in result.stdout
    # gpt-4o-mini is in litellm's price map, so the estimate has a price.
    assert re.search(r"estimated cost: \$\d+\.\d{4}", result.stdout)


def scored_file(path: Path) -> Path:
    n = 40
    pl.DataFrame(
        {
            "question_id": [i // 2 for i in range(n)],
            "strategy": ["bm25", "dense"] * (n // 2),
            "coherence_score": [0.25 if i % 2 == 0 else 1.0 for i in range(n)],
            "coherence_label": [
                "Not Generally" if i % 2 == 0 else "Completely Yes" for i in range(n)
            ],
            "coherence_explanation": ["..."] * n,
            "coherence_passed": [i % 2 == 1 for i in range(n)],
            "coherence_error": [None] * n,
        },
        schema_overrides={"coherence_error": pl.String},
    ).write_parquet(path)
    return path


def test_report_prints_summaries_and_writes_html_and_png(tmp_path):
    scored_file(tmp_path / "scored.parquet")
    result = framekit(
        "report",
        "scored.parquet",
        "--by",
        "strategy",
        "--html",
        "r.html",
        "--png",
        "charts",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "coherence" in result.stdout and "dense" in result.stdout
    assert "<table>" in (tmp_path / "r.html").read_text()
    for name in ("score_distributions.png", "scores_by_strategy.png"):
        assert (tmp_path / "charts" / name).read_bytes()[:4] == b"\x89PNG"
    missing = framekit("report", "scored.parquet", "--by", "model", cwd=tmp_path)
    assert_input_error(missing, "no column 'model'")
    plain = tmp_path / "plain.parquet"
    pl.DataFrame({"a": [1]}).write_parquet(plain)
    assert_input_error(framekit("report", "plain.parquet", cwd=tmp_path), "no framekit result")


def test_compare_names_the_better_strategy(tmp_path):
    scored_file(tmp_path / "scored.parquet")
    result = framekit(
        "compare", "scored.parquet", "--by", "strategy", "--on", "question_id", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert "coherence: dense is better than bm25" in result.stdout


def _offline_method_test_frame(tmp_path: Path) -> Path:
    source = tmp_path / "answers.parquet"
    pl.DataFrame(
        {
            "question": ["When did the tower open?"],
            "answer": ["The tower opened in 1889."],
            "docs": [["The Eiffel Tower is in Paris. It opened in 1889."]],
        }
    ).write_parquet(source)
    return source


def test_likelihood_flags_choose_how_the_offline_judge_reads_groundedness(tmp_path):
    from framekit.judges.local import likelihood as lk
    from framekit.judges.local.embedder import local_model_available

    if not local_model_available():
        pytest.skip("the offline embedder is not installed")
    source = _offline_method_test_frame(tmp_path)
    common = ("-e", "groundedness", "--map", "input=question", "--map", "output=answer",
              "--map", "context=docs", "--judge", "local", "--no-cache")  # fmt: skip
    proxy = framekit("evaluate", str(source), "-o", "proxy.parquet", *common,
                     "--no-likelihood", cwd=tmp_path)  # fmt: skip
    assert proxy.returncode == 0, proxy.stderr
    explained = pl.read_parquet(tmp_path / "proxy.parquet")["groundedness_explanation"]
    assert explained[0].startswith("Local similarity proxy")
    required = framekit("evaluate", str(source), "-o", "lm.parquet", *common, "--likelihood",
                        cwd=tmp_path)  # fmt: skip
    if not lk.likelihood_available():  # required and absent: stopped, with the install line
        assert required.returncode == 2 and "pip install" in required.stderr
        return
    assert required.returncode == 0, required.stderr
    explained = pl.read_parquet(tmp_path / "lm.parquet")["groundedness_explanation"]
    assert explained[0].startswith("Local likelihood")


def test_likelihood_flags_reach_a_cascades_offline_stage_and_a_model_judge_ignores_them(
    capsys: pytest.CaptureFixture[str],
):
    from framekit.cli.main import build_parser
    from framekit.cli.options import judge_of
    from framekit.judges.local import LocalJudge

    parser = build_parser()
    args = parser.parse_args(["evaluate", "x.parquet", "-o", "y.parquet", "--no-likelihood",
                              "--cascade", "local,openai/gpt-4o-mini", "--escalate-below", "0.8"])  # fmt: skip
    cascade = judge_of(args)
    offline = cascade.judges[0]
    assert isinstance(offline, LocalJudge) and offline.likelihood is False
    args = parser.parse_args(["evaluate", "x.parquet", "-o", "y.parquet", "--likelihood"])
    assert isinstance(judge_of(args), LocalJudge) and judge_of(args).likelihood is True
    args = parser.parse_args(["evaluate", "x.parquet", "-o", "y.parquet"])
    assert judge_of(args) is None  # the default judge, resolved as before
    args = parser.parse_args(["evaluate", "x.parquet", "-o", "y.parquet", "--likelihood",
                              "--judge", "openai/gpt-4o-mini"])  # fmt: skip
    assert judge_of(args).model == "openai/gpt-4o-mini"
    assert "--likelihood ignored by the model judge openai/gpt-4o-mini" in capsys.readouterr().err
    args = parser.parse_args(
        ["evaluate", "x.parquet", "-o", "y.parquet", "--relevant-share", "0.3"]
    )
    assert judge_of(args).relevant_share == 0.3 and judge_of(args).likelihood is None


def test_a_relevant_share_outside_0_1_is_an_input_error(tmp_path, rag_parquet):
    result = framekit("evaluate", str(rag_parquet), "-o", "out.parquet", *RETRIEVAL_CLI_ARGS,
                      "--judge", "local", "--relevant-share", "5", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2
    assert "relevant_share must be a share between 0 and 1" in result.stderr
    assert not (tmp_path / "out.parquet").exists()
