"""What every provider batch protocol offers the batch executor.

A batch travels as one local *spool* file that is exactly the body uploaded to the
provider, one request per line, so it is written and re-read streaming and a follow-up
batch can take the original messages of a failed line back out of it.

Every failure of a batch API call is classified at the client's boundary, by the same
mapping as the HTTP transport's (:func:`~framekit.judges.http.status_fault`,
:func:`~framekit.judges.http.exception_fault`): the client raises nothing but a
:class:`~framekit._errors.FaultRaised` carrying its
:class:`~framekit.judges.faults.Fault`, so the engine imports no HTTP library. A result
line is what a chat call returns, a :class:`~framekit.judges.transport.RawReply` or a
``Fault``, and is read by the same reply reader.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from framekit._errors import FaultRaised
from framekit._urls import join_path
from framekit.judges.faults import Fault
from framekit.judges.http import exception_fault, status_fault
from framekit.judges.request import dump_json
from framekit.judges.transport import RawReply, keep_headers

#: ``(custom_id, messages) -> spool line``: see :meth:`BatchClient.line_encoder`.
LineEncoder = Callable[[str, list[dict[str, Any]]], bytes]

# Stand-ins for the two parts of a line that vary, to find where they go in its text:
# private-use characters, which JSON writes as they are (never escaped). Should a judge's
# parameters contain one, the count check below falls back to encoding every line whole.
_ID_MARK = "\ue000framekit-custom-id\ue000"
_MESSAGES_MARK = "\ue000framekit-messages\ue000"


def template_encoder(
    encode: Callable[[str, Any, dict[str, Any]], bytes], call: dict[str, Any]
) -> LineEncoder | None:
    """A fast :data:`LineEncoder` for a line format that puts the id and the messages,
    each serialised as itself, into otherwise fixed text: the line is encoded once with
    stand-ins, cut at them, and every line is ``head + id + middle + messages + tail``.
    ``None`` when the stand-ins do not each appear exactly once, in that order (then
    every line is encoded whole)."""
    text = encode(_ID_MARK, _MESSAGES_MARK, call)
    marks = dump_json(_ID_MARK), dump_json(_MESSAGES_MARK)
    if text.count(marks[0]) != 1 or text.count(marks[1]) != 1:
        return None
    head, _, rest = text.partition(marks[0])
    middle, found, tail = rest.partition(marks[1])
    if not found:
        return None
    dumps, join = dump_json, b"".join

    def encoded(custom_id: str, messages: list[dict[str, Any]]) -> bytes:
        return join((head, dumps(custom_id), middle, dumps(messages), tail))

    return encoded


#: Provider states after which nothing changes any more.
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled", "ended"})


@dataclass
class BatchStatus:
    """One batch as the provider reports it, in the provider's own state words."""

    id: str
    state: str
    completed: int = 0
    failed: int = 0
    total: int = 0
    output_file: str | None = None
    error_file: str | None = None
    #: The provider's reason when the batch failed as a whole (validation).
    reason: str | None = None
    created_at: float | None = None
    #: ``metadata["framekit"]``: the local id framekit gave the batch when creating it.
    tag: str | None = None

    @property
    def done(self) -> bool:
        return self.state in TERMINAL


@dataclass
class LineResult:
    """One line of a batch's results: that request's reply, or its fault (a ``"mode"``
    fault when the endpoint rejected the structured-output mode)."""

    custom_id: str
    result: RawReply | Fault


@dataclass
class BatchClient:
    """A provider batch API reached over HTTP (aiohttp), one session per run.

    Subclasses say how a request becomes a spool line and how results are read back.
    """

    api_base: str
    api_key: str | None
    model: str
    params: dict[str, Any] = field(default_factory=dict)
    timeout: float = 600.0
    #: Strings redacted from every error this client raises (the key, the judge's secrets).
    secrets: tuple[str, ...] = ()

    provider = "base"
    #: Provider limits on one batch (requests, bytes of the uploaded body).
    max_requests = 50_000
    max_bytes = 200 * 1024 * 1024
    header = b""
    footer = b""

    def __post_init__(self) -> None:
        self.api_base = self.api_base.rstrip("/")
        self._session: aiohttp.ClientSession | None = None

    # -- spool lines --------------------------------------------------------------------
    def logprobs_request(self) -> dict[str, Any]:
        """What a line asks for to get token logprobs back (empty: this batch API has
        none, as Anthropic's; or the judge's own ``logprobs=`` decides)."""
        return {}

    def encode(self, custom_id: str, messages: list[dict[str, Any]], call: dict[str, Any]) -> bytes:
        """One request as a spool line (ending in a newline)."""
        raise NotImplementedError

    def line_encoder(self, call: dict[str, Any]) -> LineEncoder:
        """``encode`` with ``call`` fixed: ``(custom_id, messages) -> spool line``.

        A batch's lines differ only in their id and messages, so a client whose line is
        a fixed JSON text around those two (OpenAI's) cuts that text once and fills it in,
        instead of building and serialising a dict of the whole request per line. Either
        way the bytes are ``encode``'s."""
        encode = self.encode
        return lambda custom_id, messages: encode(custom_id, messages, call)

    def decode(self, line: bytes) -> tuple[str, list[dict[str, Any]]] | None:
        """(custom_id, messages) of a spool line; ``None`` for the header or footer."""
        raise NotImplementedError

    def finish_spool(self, path: Path, size: int) -> None:
        """Make a written spool a valid upload body (Anthropic: drop the last comma)."""

    # -- HTTP ---------------------------------------------------------------------------
    def _headers(self) -> dict[str, str]:
        raise NotImplementedError

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                headers=self._headers(),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=self.timeout),
                # The API host is named by api_base: no proxy variables, no surprises.
                trust_env=False,
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def url(self, path: str) -> str:
        """The URL of an API path: after ``api_base``'s path, before its query."""
        return join_path(self.api_base, path)

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """One JSON API call; a failure raises :class:`~framekit._errors.FaultRaised`."""
        try:
            async with self.session().request(method, self.url(path), **kwargs) as resp:
                body = await resp.read()
                if resp.status >= 400:
                    raise self._status(resp, body)
                return json.loads(body) if body else {}
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            raise FaultRaised(exception_fault(exc, self.secrets)) from None

    async def lines(self, url: str) -> AsyncIterator[bytes]:
        """The lines of a download, read in 64 kB pieces (never the whole file at once)."""
        try:
            async with self.session().get(url) as resp:
                if resp.status >= 400:
                    raise self._status(resp, await resp.read())
                rest = b""
                async for chunk in resp.content.iter_chunked(1 << 16):
                    rest += chunk
                    *whole, rest = rest.split(b"\n")
                    for line in whole:
                        if line.strip():
                            yield line
                if rest.strip():
                    yield rest
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            raise FaultRaised(exception_fault(exc, self.secrets)) from None

    def _status(self, resp: aiohttp.ClientResponse, body: bytes) -> FaultRaised:
        return FaultRaised(
            status_fault(resp.status, keep_headers(resp.headers), body, self.secrets)
        )

    # -- batches --------------------------------------------------------------------------
    async def submit(self, spool: Path, count: int, metadata: dict[str, str]) -> tuple[str, str]:
        """Upload a spool and create its batch: (batch id, input file id or "")."""
        raise NotImplementedError

    async def retrieve(self, batch_id: str) -> BatchStatus:
        raise NotImplementedError

    async def cancel(self, batch_id: str) -> BatchStatus:
        raise NotImplementedError

    def batches(self) -> AsyncGenerator[BatchStatus, None]:
        """Every batch at this endpoint, newest first, read page by page."""
        raise NotImplementedError

    async def pages(self, path: str, cursor: str) -> AsyncIterator[dict[str, Any]]:
        """The items of a paged list at ``path``, 100 a page while the server says
        ``has_more``; the next page is asked for with the ``cursor`` parameter set to the
        id of the last item (OpenAI's ``after``, Anthropic's ``after_id``)."""
        params = {"limit": "100"}
        while True:
            page = await self.request("GET", path, params=params)
            items = page.get("data") or []
            for item in items:
                yield item
            after = str(page.get("last_id") or items[-1].get("id") or "") if items else None
            if not page.get("has_more") or not after or after == params.get(cursor):
                return  # the end, or a server repeating a page: never loop forever
            params[cursor] = after

    def results(self, status: BatchStatus) -> AsyncIterator[LineResult]:
        """Every result line of a finished batch, answers and errors, streaming."""
        raise NotImplementedError
