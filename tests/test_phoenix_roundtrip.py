"""A real round trip through a real Phoenix server: spans in, scores back, read back.

The server is ``arize-phoenix`` from PyPI, run from its own virtual environment
(``make phoenix`` builds ``.venv-phoenix``; ``FRAMEKIT_PHOENIX_BIN`` names another
``phoenix`` executable) on 127.0.0.1 with its SQLite default in a temporary directory.
framekit's side uses only the light client packages (``framekit[phoenix]``).
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import framekit as fk
from framekit.evaluators import ResponseRelevance, RetrievalRelevance

# A cold Phoenix start takes ~40 s on a quiet 2-core machine, minutes on a loaded one.
pytestmark = [pytest.mark.phoenix_server, pytest.mark.timeout(900)]
ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location(
    "make_genai", ROOT / "scripts" / "make_genai_traces.py"
)
assert _spec is not None and _spec.loader is not None
genai = importlib.util.module_from_spec(_spec)
sys.modules["make_genai"] = genai
_spec.loader.exec_module(genai)


def _phoenix_bin() -> str | None:
    candidates = [
        os.environ.get("FRAMEKIT_PHOENIX_BIN"),
        str(ROOT / ".venv-phoenix" / "bin" / "phoenix"),
        "/work/venvs/phoenix/bin/phoenix",
        shutil.which("phoenix"),
    ]
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Phoenix server on 127.0.0.1, started and stopped here; yields its base URL."""
    binary = _phoenix_bin()
    if binary is None:
        pytest.skip("arize-phoenix is not installed: `make phoenix` builds .venv-phoenix")
    pytest.importorskip("phoenix.client", reason="framekit[phoenix] (arize-phoenix-client)")
    workdir = tmp_path_factory.mktemp("phoenix")
    port, grpc = _free_port(), _free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(workdir),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = (workdir / "server.log").open("wb")
    server = subprocess.Popen([binary, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    import httpx

    try:
        deadline = time.monotonic() + 600
        while True:
            if server.poll() is not None:
                text = (workdir / "server.log").read_text(errors="replace")[-2000:]
                pytest.fail(f"phoenix serve exited with {server.returncode}:\n{text}")
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("phoenix serve did not answer /healthz within 600 s")
            time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def _otlp_protobuf(request: dict[str, Any]) -> bytes:
    """An OTLP/JSON request (hex ids) as the protobuf bytes Phoenix's receiver takes."""
    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    def b64(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                k: base64.b64encode(bytes.fromhex(v)).decode()
                if k in ("traceId", "spanId", "parentSpanId") and v
                else b64(v)
                for k, v in node.items()
            }
        return [b64(v) for v in node] if isinstance(node, list) else node

    return ParseDict(b64(request), ExportTraceServiceRequest()).SerializeToString()


def test_scores_logged_to_phoenix_come_back_on_the_same_spans(phoenix: str, tmp_path: Path) -> None:
    import httpx
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult
    from phoenix.client import Client

    # In: OpenInference spans through the OpenTelemetry SDK's OTLP exporter ...
    oi_spans = genai.record("openinference", seed=1)
    exporter = OTLPSpanExporter(endpoint=f"{phoenix}/v1/traces")
    assert exporter.export(oi_spans) == SpanExportResult.SUCCESS
    exporter.shutdown()
    # ... and an OTel-GenAI span file (OTLP/JSON lines) through the same OTLP receiver.
    otlp_file, _ = genai.write(tmp_path, "genai", seed=2)
    for line in otlp_file.read_text().splitlines():
        sent = httpx.post(
            f"{phoenix}/v1/traces",
            content=_otlp_protobuf(json.loads(line)),
            headers={"content-type": "application/x-protobuf"},
        )
        assert sent.status_code < 300, sent.text
    expected_spans = 2 * len(oi_spans)

    # Export with Phoenix's own client (ingestion is asynchronous: wait for every span).
    client = Client(base_url=phoenix)
    deadline = time.monotonic() + 60
    while True:
        exported = client.spans.get_spans_dataframe(project_identifier="default", limit=10_000)
        if len(exported) >= expected_spans or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert len(exported) == expected_spans
    export_path = tmp_path / "phoenix_export.parquet"
    exported.to_parquet(export_path)

    traces = fk.traces.load(export_path)
    steps = fk.traces.load(export_path, level="span")
    # Both conventions became the same rows: 4 traces and 3 retrieval steps each.
    assert traces.height == 8 and steps.height == 6
    assert traces["input"].null_count() == 0 and traces["output"].null_count() == 0
    by_text = traces.group_by("input", "output").len()
    assert by_text["len"].to_list() == [2] * 4

    scored = fk.evaluate_dataframe(traces, [ResponseRelevance()], judge="local", cache=False,
                                   progress=False)  # fmt: skip
    scored_steps = fk.evaluate_dataframe(steps, [RetrievalRelevance()], judge="local",
                                         cache=False, progress=False)  # fmt: skip
    # Through a proxy that answers the first annotation request with a 503: retried.
    with _flaky_proxy(phoenix, fail_first=1) as (proxy, seen):
        result = fk.traces.log_to_phoenix(scored, endpoint=proxy, project="default", chunk_size=3)
    assert result.sent == 8 and result.skipped_failed == {"response_relevance": 0}
    posts = [status for method, status in seen if method == "POST"]
    assert posts == [503, 200, 200, 200]  # 8 annotations in chunks of 3, one retried
    more = fk.traces.log_to_phoenix(scored_steps, endpoint=phoenix)
    assert more.sent == 6

    # Read back through Phoenix's client: the same span ids carry the same scores.
    ids = scored["span_id"].to_list() + scored_steps["span_id"].to_list()
    back = client.spans.get_span_annotations(span_ids=ids, project_identifier="default")
    got = {(a["span_id"], a["name"]): (a["result"].get("score"), a["result"].get("label"))
           for a in back}  # fmt: skip
    sent_scores = {
        (row["span_id"], name): (row[f"{name}_score"], row[f"{name}_label"])
        for frame, name in ((scored, "response_relevance"), (scored_steps, "retrieval_relevance"))
        for row in frame.iter_rows(named=True)
    }
    assert got == sent_scores
    assert all(a["annotator_kind"] == "LLM" for a in back)


class _FlakyProxy(ThreadingHTTPServer):
    upstream: str
    fail_first: int
    seen: list[tuple[str, int]]


class _Forward(BaseHTTPRequestHandler):
    server: _FlakyProxy

    def _forward(self) -> None:
        import httpx

        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.command == "POST" and self.server.fail_first > 0:
            self.server.fail_first -= 1
            self.server.seen.append((self.command, 503))
            self.send_response(503)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        headers = {
            k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")
        }
        reply = httpx.request(self.command, self.server.upstream + self.path, content=body,
                              headers=headers)  # fmt: skip
        self.server.seen.append((self.command, reply.status_code))
        self.send_response(reply.status_code)
        self.send_header("content-type", reply.headers.get("content-type", "application/json"))
        self.send_header("content-length", str(len(reply.content)))
        self.end_headers()
        self.wfile.write(reply.content)

    do_GET = do_POST = _forward  # noqa: N815

    def log_message(self, *args: Any) -> None:
        pass


class _flaky_proxy:  # noqa: N801
    """A loopback proxy to ``upstream`` that answers the first ``fail_first`` POSTs 503."""

    def __init__(self, upstream: str, fail_first: int) -> None:
        self.server = _FlakyProxy(("127.0.0.1", 0), _Forward)
        self.server.upstream, self.server.fail_first, self.server.seen = upstream, fail_first, []

    def __enter__(self) -> tuple[str, list[tuple[str, int]]]:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}", self.server.seen

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_phoenix_refusal_names_the_problem_without_the_key(phoenix: str) -> None:
    scored = pl.DataFrame(
        {"span_id": ["0123456789abcdef"], "coherence_score": [1.0], "coherence_error": [None]},
        schema_overrides={"coherence_error": pl.String},
    )
    with pytest.raises(fk.traces.PhoenixError, match="no-such-project") as caught:
        fk.traces.log_to_phoenix(
            scored, endpoint=phoenix, project="no-such-project", api_key="sk-secret-123456789"
        )
    assert "sk-secret" not in str(caught.value) and "56789" not in str(caught.value)
