"""Shared fixtures: the loopback judge simulator and isolated caches."""

from __future__ import annotations

import os

import pytest

# litellm must never reach the network (model cost map, tokenizer downloads).
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.pop("FRAMEKIT_JUDGE", None)

pytest_plugins = ["framekit.testing.pytest_plugin"]


@pytest.fixture(autouse=True)
def _isolated_cache_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No test writes to the user's real cache directory."""
    monkeypatch.setenv("FRAMEKIT_CACHE_DIR", str(tmp_path_factory.mktemp("default-cache")))


@pytest.fixture(params=["http", "litellm"])
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test once per judge transport: ``sim_judge`` builds judges with it, so the
    fault matrix holds on both and the two cannot drift."""
    from tests import helpers

    monkeypatch.setattr(helpers, "TRANSPORT", request.param)
    return str(request.param)
