"""A loopback OpenAI-compatible judge for framekit's tests and benchmarks.

The simulator answers ``POST /v1/chat/completions`` and ``POST /v1/embeddings`` with
deterministic, schema-conforming answers (the rule is in ``_sim_answers``), and injects
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
import functools
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, TypedDict, TypeVar

from framekit.testing._sim_echo import ECHO_MODES as _ECHO_MODES
from framekit.testing._sim_http import SimApp, serve
from framekit.testing._sim_logprobs import NoisyJudge

__all__ = [
    "JudgeSimulator",
    "NoisyJudge",
    "SimulatorConfig",
    "SimulatorProcess",
    "SimulatorStats",
    "main",
]

_T = TypeVar("_T")
_RETRY_AFTER_STYLES = (None, "seconds", "ms", "http-date")
_RATES = (
    "error_500_rate",
    "error_503_rate",
    "hang_rate",
    "drop_rate",
    "malformed_rate",
    "null_content_rate",
    "refusal_rate",
)


@dataclass(frozen=True)
class SimulatorConfig:
    """How the simulated judge behaves. Every field is optional; the default is a fast,
    faultless judge.

    Parameters
    ----------
    latency, latency_max : float
        Seconds before each answer: fixed ``latency``, or uniform in
        ``[latency, latency_max]`` when ``latency_max`` is set. Gateway rejections
        (401, storms, rpm 429s) are immediate.
    rpm : float, optional
        Requests per minute (chat and embeddings together), as a token bucket of capacity
        ``max(1, rpm / 60)`` (about one second of budget) refilled at ``rpm / 60`` per
        second; a request finding it empty gets 429.
    rpm_window : float, optional
        If set, ``rpm`` is enforced instead in fixed windows of this many seconds, at
        most ``rpm * rpm_window / 60`` requests each, as providers that quantise a
        minute's budget do (OpenAI counts 60,000 RPM as about 1,000 per second).
    rate_limit_headers : bool
        If True (and ``rpm`` is set), every API answer carries OpenAI's
        ``x-ratelimit-limit-requests`` (the rpm), ``x-ratelimit-remaining-requests`` and
        ``x-ratelimit-reset-requests`` (left in the current bucket or window, and when it
        is full again).
    retry_after : {"seconds", "ms", "http-date", None}
        The wait header on 429s and 429/503 storms: ``Retry-After: <int seconds, >= 1>``,
        ``retry-after-ms: <int ms>``, ``Retry-After: <HTTP date>``, or none.
    error_500_rate, error_503_rate, hang_rate, drop_rate, malformed_rate, \
null_content_rate, refusal_rate : float
        Per chat request probabilities (one draw, so they are mutually exclusive and
        must sum to <= 1) of: 500, 503, sleeping ``hang_seconds`` before answering,
        closing the connection mid-body, a 200 with truncated JSON, ``content: null``,
        and a refusal (``content: null``, ``message.refusal`` set).
    hang_seconds : float
        How long a hang lasts (default 120 s, longer than any sane client timeout).
    trickle_seconds : float
        If > 0, every 200 chat answer is written in 8 pieces spread over this long.
    require_api_key : str, optional
        If set, requests without ``Authorization: Bearer <key>`` get 401.
    reject_response_format : bool
        If True, chat requests with ``response_format.type == "json_schema"`` get 400
        (``param: "response_format"``), so clients fall back to tool calls.
    reject_logprobs : bool
        If True, chat requests asking for ``logprobs`` get 400 (``param: "logprobs"``), as
        OpenAI's reasoning models answer: clients must ask again without them.
    sample_at_temperature : bool
        If True, a chat request at ``temperature`` > 0 gets a label drawn from its
        distribution (the one its logprobs report) rather than the likeliest, as a model
        sampling would: asked several times, it may disagree with itself (batch lines and
        requests at temperature 0 are unchanged).
    echo_headers : {None, "error", "error_500", "answer"}
        Echo the request line and headers (the key among them) in a 400 or 500 error
        body, or inside the answer's explanation (see ``_sim_echo``).
    reply_template : str, optional
        If set, every text answer (not a tool call) is this text with ``{answer}``
        replaced by the answer's JSON: a judge that wraps its verdict in prose, which may
        quote other JSON objects before or after it.
    embedding_dimensions : int
        Vector length when a request gives no ``dimensions``.
    max_recorded : int
        How many request bodies ``requests`` keeps (oldest dropped first).
    batch_seconds : float
        How long a batch (either batch API) takes from creation to completed.
    batch_failed_rate, batch_expired_rate : float
        Fractions of batch lines that fail (HTTP 500 / ``errored``) or expire.
    batch_validation_error : str, optional
        If set, every batch is rejected as a whole with this reason.
    seed : int, optional
        Seed of the fault / latency RNG (``None``: unseeded). ``reset()`` reseeds.
    noisy_judges : mapping of str to NoisyJudge
        Model name (the request body's ``model``, e.g. ``"weak"`` for litellm's
        ``"openai/weak"``) -> a :class:`NoisyJudge` that picks the label, right with a
        probability it reports (or, miscalibrated, does not); ``"*"`` stands for every
        model not named. One simulator serves a weak and a strong judge as two model
        names, and ``stats()["by_model"]`` counts each one's requests. A label's truth is
        the ``@sim(truth=...)`` marker, else the sha256 choice. Dicts of the fields (or
        that mapping as a JSON string, on the command line) are accepted.

    Examples
    --------
    >>> SimulatorConfig(latency=0.05, rpm=600).rpm
    600
    """

    latency: float = 0.0
    latency_max: float | None = None
    rpm: float | None = None
    rpm_window: float | None = None
    rate_limit_headers: bool = False
    retry_after: str | None = "seconds"
    error_500_rate: float = 0.0
    error_503_rate: float = 0.0
    hang_rate: float = 0.0
    hang_seconds: float = 120.0
    drop_rate: float = 0.0
    malformed_rate: float = 0.0
    null_content_rate: float = 0.0
    refusal_rate: float = 0.0
    trickle_seconds: float = 0.0
    require_api_key: str | None = None
    reject_response_format: bool = False
    reject_logprobs: bool = False
    sample_at_temperature: bool = False
    echo_headers: str | None = None
    reply_template: str | None = None
    embedding_dimensions: int = 256
    max_recorded: int = 10_000
    seed: int | None = 0
    batch_seconds: float = 1.0
    batch_failed_rate: float = 0.0
    batch_expired_rate: float = 0.0
    batch_validation_error: str | None = None
    noisy_judges: Mapping[str, NoisyJudge] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        judges: Any = self.noisy_judges
        if isinstance(judges, str):
            judges = json.loads(judges)
        if not isinstance(judges, Mapping):
            raise ValueError("noisy_judges must map model names to NoisyJudge fields")
        coerced = {str(model): NoisyJudge.coerce(j) for model, j in judges.items()}
        object.__setattr__(self, "noisy_judges", coerced)
        if self.latency < 0 or (self.latency_max is not None and self.latency_max < self.latency):
            raise ValueError("need 0 <= latency <= latency_max")
        if self.rpm is not None and self.rpm <= 0:
            raise ValueError("rpm must be positive (or None for no limit)")
        if self.rpm_window is not None and self.rpm_window <= 0:
            raise ValueError("rpm_window must be positive seconds (or None for a token bucket)")
        if self.retry_after not in _RETRY_AFTER_STYLES:
            raise ValueError(f"retry_after must be one of {_RETRY_AFTER_STYLES}")
        rates = [getattr(self, name) for name in _RATES]
        if any(not 0.0 <= r <= 1.0 for r in rates) or sum(rates) > 1.0 + 1e-9:
            raise ValueError(f"each of {', '.join(_RATES)} must be in [0, 1], summing to <= 1")
        if self.echo_headers not in _ECHO_MODES:
            raise ValueError(f"echo_headers must be one of {_ECHO_MODES}")
        if self.hang_seconds < 0 or self.trickle_seconds < 0:
            raise ValueError("hang_seconds and trickle_seconds must be >= 0")
        batch_rates = (self.batch_failed_rate, self.batch_expired_rate)
        if (
            self.batch_seconds < 0
            or any(not 0 <= r <= 1 for r in batch_rates)
            or sum(batch_rates) > 1
        ):
            raise ValueError("need batch_seconds >= 0 and batch rates in [0, 1] summing to <= 1")
        if self.embedding_dimensions < 1 or self.max_recorded < 0:
            raise ValueError("embedding_dimensions must be >= 1 and max_recorded >= 0")

    @functools.cached_property
    def any_rate(self) -> bool:
        """Whether any random fault can fire (saves an RNG draw per request otherwise)."""
        return any(getattr(self, name) for name in _RATES)

    def noisy_judge(self, model: Any) -> NoisyJudge | None:
        """The noisy judge answering as ``model`` (its own entry, else ``"*"``), if any."""
        judges = self.noisy_judges
        if not judges:
            return None
        return judges.get(str(model)) or judges.get("*")

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict."""
        return dataclasses.asdict(self)


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
    prompt_tokens: int
    completion_tokens: int
    #: Batch APIs: files_uploaded, files_downloaded, batches_created, batches_cancelled,
    #: batches_rejected, lines, lines_failed, lines_expired, retrieves, lists (pages of
    #: the batch list asked for).
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
