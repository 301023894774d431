"""Shared fixtures: the loopback judge simulator and isolated caches."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

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


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections for the whole test: bound (so no other
    test, on any xdist worker, can start a server there meanwhile) but not listening."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield int(held.getsockname()[1])


@pytest.fixture(params=["http", "litellm"])
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test once per judge transport: ``sim_judge`` builds judges with it, so the
    fault matrix holds on both and the two cannot drift."""
    from tests import helpers

    monkeypatch.setattr(helpers, "TRANSPORT", request.param)
    return str(request.param)


# -- running under pytest-xdist (``make test`` passes ``-n``) ------------------------------

#: Modules whose tests share one heavy real component, started by a module- or
#: session-scoped fixture: a local Ray instance, a Phoenix server, a pool of judge worker
#: processes. Under xdist each such module runs whole on one worker, so the component starts
#: once per run rather than once per worker that happens to draw one of its tests.
SINGLETON_MODULES = {
    "tests/test_ray.py": "ray_cluster",
    "tests/test_phoenix_roundtrip.py": "phoenix",
    "tests/test_workers.py": "pooled",
    "tests/test_llm_judge_smollm2.py": "smollm2_server",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test elsewhere using one of those fixtures would start a second instance on
    another worker: refuse it here rather than find out from a slow or flaky run."""
    modules = {fixture: module for module, fixture in SINGLETON_MODULES.items()}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        for fixture in set(getattr(item, "fixturenames", ())) & modules.keys():
            if module != modules[fixture]:
                raise pytest.UsageError(
                    f"{item.nodeid} uses {fixture!r}: list its module in "
                    "tests/conftest.py SINGLETON_MODULES"
                )


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """``-n N`` (``--dist load``): every test is its own unit of work, handed to whichever
    worker is free, except the SINGLETON_MODULES, each one unit, dealt out first (the
    longest, they would otherwise end the run alone).

    xdist's own ``--dist loadgroup`` would do this with ``xdist_group`` marks, but it
    marks the groups by rewriting node ids, which pytest 9.2 ignores (pytest-xdist#1386):
    the groups silently split. Other ``--dist`` modes are left to xdist.
    """
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SingletonModulesFirst(LoadScopeScheduling):
        # LoadScopeScheduling queues the largest units first (--loadscope-reorder, on
        # by default): the modules above, then single tests in collection order.
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if module in SINGLETON_MODULES else nodeid

    return SingletonModulesFirst(config, log)
