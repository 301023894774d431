"""A loopback OpenAI-compatible judge for framekit's tests and benchmarks.

The simulator answers ``POST /v1/chat/completions`` and ``POST /v1/embeddings`` with
deterministic, schema-conforming answers (the rule is in ``_sim_answers``), Anthropic's
``POST /v1/messages`` with the same answers in its shapes, reports cached prompt tokens
by the providers' rules (``_sim_cache``), and injects
the failures a real judge endpoint produces (latency, 429s with ``Retry-After``, 5xx,
hangs, torn connections, malformed or empty answers, refusals, storms) so the engine can
be tested through litellm's real client path::

    with JudgeSimulator(SimulatorConfig(rpm=600)) as sim:
        litellm.completion(model="openai/sim", api_base=sim.api_base, api_key="sk-x", ...)
        assert sim.stats()["by_status"][200] == 1

Control endpoints: ``GET /_sim/stats``, ``GET /_sim/requests[?limit=N]``,
``POST /_sim/reset``, ``GET|POST /_sim/config`` (JSON object of fields),
``POST /_sim/storm`` (``{"status": 503, "seconds": 30}``), ``GET /_sim/health``.
Run standalone with ``python -m framekit.testing.simulator --port 8199 --latency 0.2``.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import dataclasses
import http.client
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import typing
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, TypedDict, TypeVar

from framekit.testing._sim_config import SimulatorConfig
from framekit.testing._sim_http import SimApp, serve
from framekit.testing._sim_logprobs import NoisyJudge
from framekit.testing._sim_pairwise import PairwiseJudge

__all__ = [
    "JudgeSimulator",
    "NoisyJudge",
    "PairwiseJudge",
    "SimulatorConfig",
    "SimulatorProcess",
    "SimulatorStats",
    "main",
]

_T = TypeVar("_T")


class SimulatorStats(TypedDict):
    """The shape of ``stats()``. Control endpoints (``/_sim/...``) are never counted.

    ``total`` counts API requests received (chat, embeddings, unknown paths);
    ``by_status`` counts responses actually written, so a dropped connection or a hang the
    client abandoned appears in ``faults`` / ``abandoned`` and not there. ``faults`` counts
    each injected behaviour by name: ``auth``, ``storm``, ``rpm``, ``response_format``,
    ``500``, ``503``, ``429``, ``400``, ``401``, ``hang``, ``drop``, ``malformed``,
    ``null``, ``refusal``, and the unreadable answers a marker asks for: ``badutf8`` (a
    200 whose body is not UTF-8), ``error200`` (a 200 carrying an error object),
    ``echo500`` (a 500 quoting the request's headers).
    """

    total: int
    chat: int
    embeddings: int
    by_status: dict[int, int]
    by_endpoint: dict[str, int]
    #: API requests received per body ``model`` (chat and embeddings), plus batch lines
    #: answered per model: the work each model of a cascade was given.
    by_model: dict[str, int]
    #: Query strings of API requests that had one (``api-version=2024-06-01``: count).
    by_query: dict[str, int]
    faults: dict[str, int]
    abandoned: int
    in_flight: int
    max_in_flight: int
    #: Tokens of the chat answers sent: prompt (all), completion, the prompt tokens
    #: reported as read from the prompt cache (``SimulatorConfig.prompt_cache``) and, in
    #: Anthropic-style answers, as written to it.
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    cache_write_tokens: int
    #: Batch APIs: files_uploaded, files_downloaded, batches_created, batches_cancelled,
    #: batches_rejected, lines, lines_failed, lines_expired, retrieves, lists (pages of
    #: the batch list asked for), and the answered lines' prompt_tokens,
    #: completion_tokens, cached_tokens and cache_write_tokens.
    batch: dict[str, int]


class JudgeSimulator:
    """The simulator, served from a background thread with its own event loop.

    Examples
    --------
    >>> with JudgeSimulator(SimulatorConfig(latency=0.0)) as sim:
    ...     sim.base_url.startswith("http://127.0.0.1:")
    True
    """

    def __init__(
        self, config: SimulatorConfig | None = None, *, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self._app = SimApp(config or SimulatorConfig())
        self._host = host
        self.port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://{self._host}:{self.port}"

    @property
    def api_base(self) -> str:
        """``base_url + "/v1"``: what litellm takes as ``api_base``."""
        return self.base_url + "/v1"

    @property
    def config(self) -> SimulatorConfig:
        """The current configuration."""
        return self._call(lambda: self._app.config)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The recorded request bodies, oldest first (a copy)."""
        return self._call(lambda: list(self._app.requests))

    def stats(self) -> SimulatorStats:
        """Counters since start or the last :meth:`reset` (see :class:`SimulatorStats`)."""
        return typing.cast(SimulatorStats, self._call(self._app.stats))

    def reset(self) -> None:
        """Zero counters; forget recorded requests, ``first=N`` attempts and storms; refill
        the rpm bucket and reseed the RNG. The config is kept."""
        self._call(self._app.reset)

    def configure(self, **fields: Any) -> SimulatorConfig:
        """Change config fields while running; returns the new config."""
        return self._call(lambda: self._app.configure(fields))

    def storm(self, status: int = 503, seconds: float = 30.0) -> None:
        """Answer every API request with ``status`` for the next ``seconds``."""
        self._call(lambda: self._app.storm(status, seconds))

    def start(self) -> JudgeSimulator:
        """Start serving (idempotent); returns self."""
        if self._thread is not None:
            return self
        ready: concurrent.futures.Future[int] = concurrent.futures.Future()
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name="framekit-judge-simulator", daemon=True
        )
        self._thread.start()
        self.port = ready.result(timeout=10)
        return self

    def stop(self) -> None:
        """Stop serving and cut open connections (idempotent)."""
        if self._thread is None or self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._thread = None
        self._loop = None

    def __enter__(self) -> JudgeSimulator:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _run(self, ready: concurrent.futures.Future[int]) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            server = loop.run_until_complete(serve(self._app, self._host, self.port))
        except BaseException as exc:
            ready.set_exception(exc)
            loop.close()
            return
        self._loop = loop
        ready.set_result(server.sockets[0].getsockname()[1])
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self._app.shutdown(server))
            loop.close()

    def _call(self, fn: Callable[[], _T]) -> _T:
        # All state lives on the server's loop; run there so no locks are needed.
        loop = self._loop
        if loop is None or threading.current_thread() is self._thread:
            return fn()
        done: concurrent.futures.Future[_T] = concurrent.futures.Future()

        def run() -> None:
            try:
                done.set_result(fn())
            except BaseException as exc:
                done.set_exception(exc)

        loop.call_soon_threadsafe(run)
        return done.result(timeout=10)

    @staticmethod
    def subprocess(
        config: SimulatorConfig | None = None, *, port: int = 0, startup_timeout: float = 15.0
    ) -> SimulatorProcess:
        """The simulator in a child process (a context manager), for benchmarks: in-process
        the server competes with the client for the GIL.

        Examples
        --------
        >>> with JudgeSimulator.subprocess(SimulatorConfig()) as sim:  # doctest: +SKIP
        ...     sim.stats()["total"]
        0
        """
        return SimulatorProcess(config, port=port, startup_timeout=startup_timeout)


class SimulatorProcess:
    """A simulator running in a child process, controlled over its ``/_sim`` endpoints.

    Same surface as :class:`JudgeSimulator`: ``base_url``, ``api_base``, ``stats()``,
    ``requests``, ``reset()``, ``configure(**fields)``, ``storm()``.
    """

    def __init__(
        self,
        config: SimulatorConfig | None = None,
        *,
        port: int = 0,
        startup_timeout: float = 15.0,
    ) -> None:
        self._config = config or SimulatorConfig()
        self._port = port
        self._timeout = startup_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self.base_url = ""

    @property
    def api_base(self) -> str:
        """``base_url + "/v1"``."""
        return self.base_url + "/v1"

    @property
    def port(self) -> int:
        """The port the child listens on (0 before :meth:`start`)."""
        return int(self.base_url.rsplit(":", 1)[1]) if self.base_url else 0

    @property
    def pid(self) -> int | None:
        """The child's process id while running."""
        return self._proc.pid if self._proc is not None else None

    def start(self) -> SimulatorProcess:
        """Spawn the child and wait for its URL line; returns self."""
        if self._proc is not None:
            return self
        # The child must import framekit even when it is not installed (a source tree).
        root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        command = [
            sys.executable,
            "-m",
            "framekit.testing.simulator",
            "--port",
            str(self._port),
            "--config-json",
            json.dumps(self._config.to_dict()),
        ]
        # stderr goes to a file only read on failure: a pipe nobody drains could block it.
        with tempfile.TemporaryFile() as errors:
            proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, env=env)
            self._proc = proc
            assert proc.stdout is not None
            with selectors.DefaultSelector() as selector:
                selector.register(proc.stdout, selectors.EVENT_READ)
                line = proc.stdout.readline() if selector.select(self._timeout) else b""
            match = re.search(rb"http://\S+", line)
            if match is None:
                self.stop()
                errors.seek(0)
                detail = errors.read().decode(errors="replace").strip()[-2000:]
                raise RuntimeError(f"judge simulator subprocess failed to start: {detail}")
        self.base_url = match.group(0).decode()
        return self

    def stop(self) -> None:
        """Terminate the child (SIGTERM, then SIGKILL after 5 s)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    def __enter__(self) -> SimulatorProcess:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _request(self, method: str, path: str, payload: Any = None) -> Any:
        host = self.base_url.removeprefix("http://").rsplit(":", 1)[0]
        # http.client, not urllib: urllib would route 127.0.0.1 through $http_proxy.
        connection = http.client.HTTPConnection(host, self.port, timeout=10)
        try:
            body = None if payload is None else json.dumps(payload)
            connection.request(method, path, body, {"content-type": "application/json"})
            response = connection.getresponse()
            data = json.loads(response.read())
            if response.status != 200:
                raise ValueError(data.get("error", {}).get("message", f"HTTP {response.status}"))
            return data
        finally:
            connection.close()

    def stats(self) -> SimulatorStats:
        """As :meth:`JudgeSimulator.stats` (``by_status`` keys turned back into ints)."""
        data = self._request("GET", "/_sim/stats")
        data["by_status"] = {int(k): v for k, v in data["by_status"].items()}
        return typing.cast(SimulatorStats, data)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The recorded request bodies, oldest first."""
        return typing.cast("list[dict[str, Any]]", self._request("GET", "/_sim/requests"))

    def reset(self) -> None:
        """As :meth:`JudgeSimulator.reset`."""
        self._request("POST", "/_sim/reset", {})

    def configure(self, **fields: Any) -> SimulatorConfig:
        """As :meth:`JudgeSimulator.configure`."""
        return SimulatorConfig(**self._request("POST", "/_sim/config", fields))

    def storm(self, status: int = 503, seconds: float = 30.0) -> None:
        """As :meth:`JudgeSimulator.storm`."""
        self._request("POST", "/_sim/storm", {"status": status, "seconds": seconds})


# -- command line ---------------------------------------------------------------------------


def _field_parser(annotation: str) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        if text.lower() in ("none", "null") and "None" in annotation:
            return None
        if annotation.startswith("bool"):
            return text.lower() in ("1", "true", "yes", "on")
        if annotation.startswith("int"):
            return int(text)
        if annotation.startswith("float"):
            return float(text)
        return text

    return parse


def _parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, SimulatorConfig]:
    parser = argparse.ArgumentParser(
        prog="python -m framekit.testing.simulator",
        description="Serve framekit's loopback OpenAI-compatible judge until SIGINT/SIGTERM.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--config-json", default=None, help="all fields as one JSON object")
    parser.add_argument(
        "--error-rate",
        dest="error_500_rate",
        type=float,
        default=argparse.SUPPRESS,
        help="alias of --error-500-rate",
    )
    for field in dataclasses.fields(SimulatorConfig):
        option = "--" + field.name.replace("_", "-")
        parser.add_argument(
            option,
            dest=field.name,
            type=_field_parser(str(field.type)),
            default=argparse.SUPPRESS,  # so that an explicit "none" is told apart from absence
            help=f"{field.type} (default {field.default!r})",
        )
    args = parser.parse_args(argv)
    base = json.loads(args.config_json) if args.config_json else {}
    names = [f.name for f in dataclasses.fields(SimulatorConfig)]
    base.update({n: getattr(args, n) for n in names if hasattr(args, n)})
    return args, SimulatorConfig(**base)


async def _serve_forever(host: str, port: int, config: SimulatorConfig) -> None:
    app = SimApp(config)
    server = await serve(app, host, port)
    bound = server.sockets[0].getsockname()[1]
    print(f"framekit judge simulator listening on http://{host}:{bound}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await app.shutdown(server)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m framekit.testing.simulator``."""
    args, config = _parse_args(argv)
    asyncio.run(_serve_forever(args.host, args.port, config))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
