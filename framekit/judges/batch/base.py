"""What every provider batch protocol offers the batch executor.

A batch travels as one local *spool* file that is exactly the body uploaded to the
provider, one request per line, so it is written and re-read streaming and a follow-up
batch can take the original messages of a failed line back out of it.

Every failure of a batch API call is classified here, at the client's boundary: an
error status or an aiohttp error becomes a :class:`~framekit._errors.FaultRaised`
carrying its :class:`~framekit.judges.faults.Fault` (rejected credentials a
:class:`~framekit.JudgeAuthenticationError`), so the engine imports no HTTP library.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from framekit._errors import FaultRaised, JudgeAuthenticationError, JudgeError, one_line
from framekit._secrets import redact
from framekit._urls import join_path
from framekit.judges.faults import TIMEOUT, Fault
from framekit.judges.http import exception_fault

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
    """One line of a batch's results: an answer, or an error for that request."""

    custom_id: str
    text: str | None = None
    refusal: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None
    #: Whether asking again can help (failed, expired, 5xx) or not (400).
    retryable: bool = True
    #: The endpoint rejected the structured-output mode (``response_format``).
    mode_rejected: bool = False
    #: The answer's ``choices[0].logprobs.content`` (``None``: the batch API gave none).
    logprobs: list[Any] | None = None


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
                    raise _http_error(resp.status, body, self.secrets)
                return json.loads(body) if body else {}
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            raise self._fault(exc) from None

    async def lines(self, url: str) -> AsyncIterator[bytes]:
        """The lines of a download, read in 64 kB pieces (never the whole file at once)."""
        try:
            async with self.session().get(url) as resp:
                if resp.status >= 400:
                    raise _http_error(resp.status, await resp.read(), self.secrets)
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
            raise self._fault(exc) from None

    def _fault(self, exc: BaseException) -> FaultRaised:
        """An aiohttp failure as the verdict the batch executor acts on."""
        if isinstance(exc, asyncio.TimeoutError):
            return FaultRaised(Fault("transient", TIMEOUT))
        return FaultRaised(exception_fault(exc, list(self.secrets)))

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


def _http_error(status: int, body: bytes, secrets: tuple[str, ...] = ()) -> JudgeError:
    """An error status as the run sees it: rejected credentials stop the run; 429 and 5xx
    may pass; any other status will not."""
    try:
        data = json.loads(body)
        error = data.get("error") if isinstance(data, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
    except ValueError:
        message = None
    # A provider (or a proxy) may echo the request's credentials back in its message.
    text = redact(
        one_line(message or body.decode("utf-8", "replace") or "no message", 200), secrets
    )
    if status in (401, 403):
        return JudgeAuthenticationError(
            f"the batch API rejected the credentials: HTTP {status}: {text}"
        )
    transient = status == 429 or status >= 500
    return FaultRaised(
        Fault("transient" if transient else "fatal", f"HTTP {status}: {text}", status=status)
    )
