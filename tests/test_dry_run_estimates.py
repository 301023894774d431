"""The dry run's cost and time for a custom ``api_base`` with ``--rpm`` are what the run
then reports: cost unknown in both (no list price at someone else's endpoint), and the
time the rpm pacing imposes."""

from __future__ import annotations

import re
from pathlib import Path

from framekit.engine.limiter import RateLimiter
from framekit.judges.pricing import UNKNOWN_COST
from framekit.testing import JudgeSimulator
from tests.helpers import API_KEY, RETRIEVAL_CLI_ARGS, retrieval_frame
from tests.test_cli import framekit


def test_dry_run_cost_and_time_match_the_run_at_a_custom_api_base(
    judge_simulator: JudgeSimulator, tmp_path: Path
) -> None:
    retrieval_frame(40).write_parquet(tmp_path / "in.parquet")
    # A model litellm has a list price for: at a custom endpoint it still has none.
    common = [
        "evaluate", "in.parquet", *RETRIEVAL_CLI_ARGS, "--judge", "openai/gpt-4o-mini",
        "--api-base", judge_simulator.api_base, "--rpm", "600", "--cache", "cache",
    ]  # fmt: skip
    env = {"FRAMEKIT_API_KEY": API_KEY}
    dry = framekit(*common, "--dry-run", cwd=tmp_path, env=env)
    assert dry.returncode == 0, dry.stderr
    out = dry.stdout + dry.stderr
    assert "requests to send: 40" in out
    assert f"estimated cost: {UNKNOWN_COST}" in out
    (estimate,) = map(float, re.findall(r"estimated time: at least (\d+\.\d) s", out))
    # 40 requests at 600 per minute, paced 6 % under it as the limiter does.
    assert estimate == round(40 / (600 / 60 * (1 - RateLimiter.MARGIN)), 1) == 4.3

    run = framekit(*common, "-o", "out.parquet", cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr
    assert "40 requests sent" in run.stderr
    assert f"cost {UNKNOWN_COST}" in run.stderr
    (took,) = map(float, re.findall(r"in (\d+\.\d)s", run.stderr))
    # The pacing holds the run to the estimate at least...
    assert took >= 0.8 * estimate, (estimate, took)
    # ...and costs no more than half as much again on top of the same run unpaced,
    # measured now, on this machine's load (quiet: about 4.5 s paced, 1 s bare; the
    # run waits for the first answer before pacing the rest, which the estimate
    # cannot know and leaves out).
    unpaced = [a for a in common if a not in ("--rpm", "600")]
    unpaced[unpaced.index("cache")] = "cache-bare"
    bare = framekit(*unpaced, "-o", "bare.parquet", cwd=tmp_path, env=env)
    assert bare.returncode == 0 and "40 requests sent" in bare.stderr, bare.stderr
    (took_bare,) = map(float, re.findall(r"in (\d+\.\d)s", bare.stderr))
    assert took <= 1.5 * estimate + took_bare, (estimate, took, took_bare)

    empty = framekit(*common, "--dry-run", cwd=tmp_path, env=env)  # now all cached
    assert "requests to send: 0" in empty.stdout + empty.stderr
    assert "estimated time" not in empty.stdout + empty.stderr
