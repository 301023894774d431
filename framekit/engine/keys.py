"""How a chat request is keyed in the cache: one sha256 over who is asked and what.

The key of a request hashes the judge's identity and the evaluator's template version
(:func:`chat_prefix`), then its rendered messages and its answer schema (:func:`chat_key`).
This module sees only what the plan (:mod:`framekit.engine.plan`, its one caller) has
already rendered: messages, or the text of a user message (:class:`RenderedKeys`: the
same key, for evaluators whose other messages are the same for every record).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from framekit.evaluators.base import Evaluator
from framekit.judges.judge import Judge
from framekit.judges.request import ChatRequest


def chat_prefix(evaluator: Evaluator, judge: Judge) -> bytes:
    """What every key of ``evaluator``'s requests to ``judge`` starts from."""
    ident = {"judge": judge.cache_identity(), "template": evaluator.cache_namespace()}
    return json.dumps(ident, sort_keys=True).encode()


# One encoder for every key: json.dumps(..., default=...) builds a new encoder per call.
_KEY_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str, separators=(",", ":"))


def chat_key(prefix: bytes, request: ChatRequest) -> str:
    """sha256 over judge identity, template version, messages and answer schema.

    Plain ``{"role", "content"}`` messages are fed to the hash as separated raw text rather
    than JSON: escaping every prompt as JSON was the largest cost of a fully cached re-run.
    The separators are control bytes that the prompt layer strips from data, so two
    different message lists cannot hash the same way. This and :class:`RenderedKeys` are
    two doors to one hash: both feed :func:`_hash_messages`'s bytes and end in
    :func:`_digest`.
    """
    messages = request.messages
    first = messages[0] if messages else None
    if first is not None and _plain(first) and isinstance(first["role"], str):
        # The first message is the evaluator's system prompt, the same for every request:
        # the hash of the prefix and of it is taken once and copied.
        memo = (prefix, first["role"], first["content"])
        start = _STARTS.get(memo)
        if start is None:
            if len(_STARTS) > 256:
                _STARTS.clear()
            start = _STARTS[memo] = _hash_messages(hashlib.sha256(prefix), messages[:1])
        h = _hash_messages(start.copy(), messages[1:])
    else:
        h = _hash_messages(hashlib.sha256(prefix), messages)
    return _digest(h, _tail(request.schema))


class RenderedKeys:
    """:func:`chat_key` of requests that are ``template``'s messages but the last, then a
    user message: keyed from that message's text alone (the rest is hashed once).

    Examples
    --------
    >>> request = ChatRequest([{"role": "system", "content": "Judge."},
    ...                        {"role": "user", "content": "Is it?"}], "v", {"type": "object"})
    >>> keys = RenderedKeys(b"judge", request)
    >>> keys("Is it?") == chat_key(b"judge", request)
    True
    """

    def __init__(self, prefix: bytes, template: ChatRequest) -> None:
        #: The hash state after the prefix and every message but the user's.
        self.start = _hash_messages(hashlib.sha256(prefix), template.messages[:-1])
        #: What follows the user message's text: the schema.
        self.tail = _tail(template.schema)

    def __call__(self, user: str) -> str:
        # _plain_bytes("user", user), then _digest, written out: this runs once per row
        # of a cached re-run, where two calls more cost a fifth of the key's time.
        h = self.start.copy()
        h.update(_USER + user.encode("utf-8", "surrogatepass") + self.tail)
        return "chat:" + h.hexdigest()


#: (prefix, role, content) of a first message -> the hash state after it.
_STARTS: dict[tuple[bytes, Any, str], Any] = {}


def _plain(message: Mapping[str, Any]) -> bool:
    return len(message) == 2 and isinstance(message.get("content"), str) and "role" in message


def _plain_bytes(role: str, content: str) -> bytes:
    """A plain message as the key hashes it: record separator, role, unit separator, text."""
    return b"\x1e" + role.encode() + b"\x1f" + content.encode("utf-8", "surrogatepass")


#: A user message's bytes before its text (see _plain_bytes).
_USER = b"\x1euser\x1f"


def _digest(h: Any, tail: bytes) -> str:
    """The key: the hash of the messages fed so far, then the schema's ``tail``."""
    h.update(tail)
    return "chat:" + h.hexdigest()


def _tail(schema: dict[str, Any]) -> bytes:
    """What follows the messages in the hashed stream: a group separator, the schema."""
    return b"\x1c" + _schema_bytes(schema)


def _hash_messages(h: Any, messages: Sequence[Mapping[str, Any]]) -> Any:
    for message in messages:
        if _plain(message):
            h.update(_plain_bytes(str(message["role"]), message["content"]))
        else:
            h.update(b"\x1d" + _KEY_ENCODER.encode(message).encode("utf-8", "surrogatepass"))
    return h


# id(schema) -> (schema, its encoding). Holding the schema keeps its id from being
# reused by another object, so a hit is always the same object.
_SCHEMA_MEMO: dict[int, tuple[dict[str, Any], bytes]] = {}


def _schema_bytes(schema: dict[str, Any]) -> bytes:
    """The encoded answer schema; evaluators share one schema object per run."""
    hit = _SCHEMA_MEMO.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    if len(_SCHEMA_MEMO) > 256:
        _SCHEMA_MEMO.clear()
    encoded = _KEY_ENCODER.encode(schema).encode()
    _SCHEMA_MEMO[id(schema)] = (schema, encoded)
    return encoded
