"""``framekit export-annotations`` with credentials in the URL and in headers.

The key scan of ``test_reliability_faults.py`` (zero hits in stdout, stderr, logs and files)
extended to the export commands, against a stub Phoenix / OTLP collector on 127.0.0.1
that records every request and, in its error mode, quotes the request back (its request
line, every header, the basic-auth header decoded) in the body and in the HTTP reason
phrase. Also: the one-line errors of an HTML login page and of ids that are not hex.
"""

from __future__ import annotations

import base64
import logging
import secrets
import sys
import threading
import traceback
import warnings
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import framekit as fk
from framekit.cli import main

pytest.importorskip("opentelemetry.sdk", reason="the OTLP export needs framekit[otel]")

USER = "exporter"
# Set afresh for every test (see _fresh_key): the key, basic auth's base64 of it, and
# every form of it that must never come out (itself, its tail, the base64).
API_KEY = BASIC = ""
FORBIDDEN: tuple[str, ...] = ()


@pytest.fixture(autouse=True)
def _fresh_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """A key no other test has used. Secrets registered for log redaction stay registered
    for the whole process, so a key shared with earlier tests (the judge's) would be
    masked in the logs even if the export forgot to register its own."""
    key = f"sk-export-SECRET-{secrets.token_hex(8)}"
    basic = base64.b64encode(f"{USER}:{key}".encode()).decode()
    module = sys.modules[__name__]
    monkeypatch.setattr(module, "API_KEY", key)
    monkeypatch.setattr(module, "BASIC", basic)
    monkeypatch.setattr(module, "FORBIDDEN", (key, key[-8:], basic))


_LOGGERS = ("", "httpx", "httpcore", "urllib3", "opentelemetry", "framekit")
_LOGIN_PAGE = b"<!doctype html>\n<html><body>\n<form action='/login'>Sign in</form>\n</body></html>"


class _Stub(ThreadingHTTPServer):
    mode: str
    seen: list[tuple[str, str, dict[str, str]]]


class _Handler(BaseHTTPRequestHandler):
    server: _Stub

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.server.seen.append((self.command, self.path, headers))
        mode = self.server.mode
        if mode == "echo":  # a careless gateway: quotes the request, credentials first
            scheme, _, token = headers.get("authorization", "").partition(" ")
            # The credential bare (a bearer token, basic auth decoded), as "invalid token
            # ..." messages quote it, and every header as sent.
            bare = base64.b64decode(token).decode() if scheme == "Basic" else token
            quoted = ", ".join(f"{k}: {v}" for k, v in headers.items())
            echo = f"you sent {self.command} {self.path} as {bare} with headers {quoted}"
            self._send(401, echo.encode(), "text/plain", reason=echo)
        elif mode == "html":  # a login page in front of the service, answering 200
            self._send(200, _LOGIN_PAGE, "text/html; charset=utf-8")
        elif self.path.startswith("/v1/logs"):
            self._send(200, b"", "application/x-protobuf")
        else:
            self._send(200, b'{"data": [{"id": "U3BhbkFubm90YXRpb246MQ=="}]}', "application/json")

    def _send(self, status: int, body: bytes, kind: str, reason: str | None = None) -> None:
        self.send_response(status, reason)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer  # noqa: N815

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def stub() -> Iterator[_Stub]:
    server = _Stub(("127.0.0.1", 0), _Handler)
    server.mode, server.seen = "ok", []
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _port(server: _Stub) -> int:
    return int(server.server_address[1])


def _scored_file(path: Path, trace_ids: list[str]) -> Path:
    """A scored trace table of two spans, both scored."""
    pl.DataFrame({
        "trace_id": trace_ids,
        "span_id": ["b7ad6b7169203331", "b7ad6b7169203332"],
        "coherence_score": [1.0, 0.25],
        "coherence_label": ["Completely Yes", "Not Generally"],
        "coherence_explanation": ["clear", "muddled"],
        "coherence_passed": [True, False],
        "coherence_error": [None, None],
    }, schema_overrides={"coherence_error": pl.String}).write_parquet(path)  # fmt: skip
    return path


@pytest.fixture
def scored(tmp_path: Path) -> Path:
    traces = ["0af7651916cd43dd8448eb211c80319c", "0af7651916cd43dd8448eb211c80319d"]
    return _scored_file(tmp_path / "scored.parquet", traces)


def _target(target: str, source: str, port: int, monkeypatch: pytest.MonkeyPatch) -> str:
    """The URL to export to, with the key where ``source`` says (the environment too)."""
    for name in (
        "PHOENIX_API_KEY",
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_EXPORTER_OTLP_LOGS_HEADERS",
    ):
        monkeypatch.delenv(name, raising=False)
    host = f"127.0.0.1:{port}"
    if source == "userinfo":
        return f"http://{USER}:{API_KEY}@{host}"
    if source == "query":
        return f"http://{host}/?{'api_key' if target == 'phoenix' else 'sig'}={API_KEY}"
    if target == "phoenix":  # the header: Phoenix's key, sent as a bearer token
        monkeypatch.setenv("PHOENIX_API_KEY", API_KEY)
    else:  # the SDK's header variable, URL-encoded as the specification has it
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"Authorization=Basic%20{BASIC}")
    return f"http://{host}"


def _sent_credential(target: str, source: str, seen: list[tuple[str, str, dict[str, str]]]) -> bool:
    """Whether the stub received the credential where ``source`` put it."""
    for _method, path, headers in seen:
        auth = headers.get("authorization", "")
        if source == "query" and API_KEY in path:
            return True
        if source == "userinfo" and auth == f"Basic {BASIC}":
            return True
        if source == "header" and auth in (f"Bearer {API_KEY}", f"Basic {BASIC}"):
            return True
    return False


def _scan(texts: list[str], tmp_path: Path) -> None:
    for path in tmp_path.rglob("*"):
        if path.is_file() and path.suffix != ".parquet":
            texts.append(path.read_bytes().decode("latin-1"))
        elif path.suffix == ".parquet":
            texts.append(str(pl.read_parquet(path).to_dicts()))
    for text in texts:
        for form in FORBIDDEN:
            assert form not in text, f"{form!r} leaked in {text[:400]!r}"


@pytest.mark.parametrize("source", ["userinfo", "query", "header"])
@pytest.mark.parametrize("target", ["phoenix", "otlp"])
def test_export_credentials_never_leak_on_success_or_error(
    target, source, stub, scored, tmp_path, caplog, capfd, monkeypatch, closed_port
):
    for name in _LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    url = _target(target, source, _port(stub), monkeypatch)
    flag = "--phoenix" if target == "phoenix" else "--otlp"
    texts: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # Success: the credential reaches the server, the printed destination is masked.
        assert main(["export-annotations", str(scored), flag, url]) == 0
        assert _sent_credential(target, source, stub.seen), stub.seen
        out = capfd.readouterr()
        assert "sent 2 annotations to http://" in out.out
        texts += [out.out, out.err]
        # Error: a server quoting the request (credentials, decoded basic auth) back.
        stub.mode, stub.seen[:] = "echo", []
        assert main(["export-annotations", str(scored), flag, url]) == 1
        out = capfd.readouterr()
        assert out.err.startswith("framekit: error:") and out.err.count("\n") == 1, out.err
        assert "Traceback" not in out.err
        texts += [out.out, out.err]
        # Error: nothing listening (the library call, to keep retries short).
        dead = url.replace(str(_port(stub)), str(closed_port))
        with pytest.raises(fk.FramekitError) as failed:
            if target == "phoenix":
                fk.traces.log_to_phoenix(scored, dead, max_retries=1)
            else:
                fk.traces.to_otel_events(scored, dead, timeout=1.0)
        texts += [str(failed.value), "".join(traceback.format_exception(failed.value))]
    assert "you sent POST" in caplog.text, "the server's echo reached the HTTP clients' logs"
    texts += [caplog.text, *(str(w.message) for w in caught)]
    _scan(texts, tmp_path)


def test_otlp_headers_given_in_python_never_leak(stub, scored, tmp_path, caplog, monkeypatch):
    caplog.set_level(logging.DEBUG)
    url = _target("otlp", "query", _port(stub), monkeypatch).partition("?")[0]
    headers = {"x-api-key": API_KEY, "authorization": f"Basic {BASIC}"}
    assert fk.traces.to_otel_events(scored, url, headers=headers).sent == 2
    assert stub.seen[0][2]["x-api-key"] == API_KEY
    stub.mode = "echo"
    with pytest.raises(fk.traces.OTLPExportError) as failed:
        fk.traces.to_otel_events(scored, url, headers=headers)
    _scan([str(failed.value), caplog.text], tmp_path)


@pytest.mark.parametrize("target", ["phoenix", "otlp"])
def test_user_info_next_to_an_authorization_header_is_refused_before_sending(
    target, stub, scored, capfd, monkeypatch
):
    url = _target(target, "header", _port(stub), monkeypatch)
    with_user = url.replace("http://", f"http://{USER}:{API_KEY}@")
    flag = "--phoenix" if target == "phoenix" else "--otlp"
    assert main(["export-annotations", str(scored), flag, with_user]) == 2
    err = capfd.readouterr().err
    assert "carries credentials (user:password@)" in err and "http://***@127.0.0.1" in err
    assert err.count("\n") == 1 and API_KEY not in err
    assert stub.seen == []


@pytest.mark.parametrize("target", ["phoenix", "otlp"])
def test_login_page_at_200_is_one_line_naming_the_url_masked(
    target, stub, scored, capfd, monkeypatch
):
    url = _target(target, "query", _port(stub), monkeypatch)
    stub.mode = "html"
    flag = "--phoenix" if target == "phoenix" else "--otlp"
    assert main(["export-annotations", str(scored), flag, url]) == 1
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    shown = "/?api_key=***" if target == "phoenix" else "/v1/logs?sig=***"
    assert f"http://127.0.0.1:{_port(stub)}{shown}" in err
    assert "HTTP 200 and text/html" in err and "login page" in err
    assert len(stub.seen) == 1  # the first answer stops the export


@pytest.fixture
def bad_trace_id(tmp_path: Path) -> Path:
    return _scored_file(
        tmp_path / "bad.parquet", ["0af7651916cd43dd8448eb211c80319c", "trace-0002"]
    )


def test_non_hex_trace_id_is_refused_before_sending_or_writing(stub, bad_trace_id, tmp_path, capfd):
    events = tmp_path / "events.jsonl"
    for destination in (f"http://127.0.0.1:{_port(stub)}", str(events)):
        assert main(["export-annotations", str(bad_trace_id), "--otlp", destination]) == 2
        err = capfd.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert "row 1: trace_id 'trace-0002' is not an OpenTelemetry trace id" in err
    assert stub.seen == []
    assert not events.exists() and not list(tmp_path.glob("*.partial"))
