"""What the judge simulator answers: markers, schema instances and embeddings.

Pure functions, no I/O: the HTTP layer (``_sim_http``) decides *whether* to answer and
these decide *what*. Everything here is deterministic so a test can compute the expected
answer from the prompt alone.

The answer rule
---------------
* ``@sim(key=value, ...)`` markers anywhere in any message override top-level properties
  (the last occurrence of a key wins). Values ``true``/``false``/``null`` and numbers are
  parsed; anything else is a string (optionally quoted). Marker keys may set properties
  the schema does not have, or values outside an enum: that is how tests provoke invalid
  answers. The keys ``fault``, ``first``, ``retry_after`` and ``latency`` are reserved for
  the HTTP layer and never become properties; ``truth`` and ``confidence`` steer the label
  probabilities and noisy judges (``_sim_logprobs``), and ``quality`` the pairwise judge
  (``_sim_pairwise``: two candidates, an "A" / "B" / "tie" label); none becomes a property.
* The *subject* of a request is the last user message that holds a ``[BEGIN DATA: ...]``
  block, or else the last user message. (So an appended instruction or re-ask turn does
  not change the answer.)
* An ``enum`` property takes ``enum[int(sha256(subject).hexdigest(), 16) % len(enum)]``:
  see :func:`expected_choice`.
* Properties named like explanation / reasoning / rationale / justification get
  ``"Simulated judgement of N characters."`` with N = ``len(subject)``; other strings
  ``"simulated"``.
* Arrays of strings get ``minItems`` (else 3, capped by ``maxItems``) questions: item 0 is
  ``"What is " + <first 12 words of the output block, else of the subject> + "?"`` and
  item k >= 1 is the same text followed by ``" (k+1)"``, so items are distinct.
* Booleans are ``false``, numbers ``0`` (or ``minimum``), ``null`` is ``null``.
* A list of objects (Groundedness's claims) takes its items from a marker of ``y`` and
  ``n`` letters: ``@sim(claims=yyn)`` gives three items whose boolean properties are
  true, true, false and whose integer properties are 1 for ``y`` and null (when the
  schema allows it) for ``n``; string properties say ``"Claim k of the answer."``, followed
  by the first 12 words of the ``output`` block (else the ``reference`` block) when the
  prompt has one (``"Claim 1 of the answer: Paris is the capital."``), so a claim's words
  are the answer's as a judge's are.
  ``@sim(claims="")`` gives an empty list; any other value replaces the list as written
  (``@sim(claims=oops)``: a malformed list).
* ``@sim(omit=explanation)`` leaves that property out of the answer (several:
  ``omit=a|b``), as a judge that skips a field does.
* ``@sim(reply=...)`` makes the reply a text of the test's choosing, base64url-encoded
  (:func:`reply_marker` writes the marker): ``{answer}`` in it is replaced by the answer's
  JSON, as ``SimulatorConfig.reply_template`` does for every reply, but per row. The
  text stands for the message content, or a tool call's arguments in tool mode.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import sys
from array import array
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from framekit.testing import _sim_logprobs, _sim_pairwise

RESERVED_KEYS = frozenset(
    {"fault", "first", "retry_after", "latency", "truth", "confidence", "reply", "quality"}
)
FAULTS = frozenset(
    {"500", "503", "429", "400", "401", "hang", "drop", "malformed", "null", "refusal"}
    | {"badutf8", "error200", "echo500"}  # unreadable answers: see _sim_http.unreadable
)
REFUSAL_TEXT = "I can't help with that."

_MARKER = re.compile(r"@sim\(([^)]*)\)")
_OUTPUT_BLOCK = re.compile(r"\[BEGIN DATA: output\]\n?(.*?)\n?\[END DATA: output\]", re.DOTALL)
_REFERENCE_BLOCK = re.compile(
    r"\[BEGIN DATA: reference\]\n?(.*?)\n?\[END DATA: reference\]", re.DOTALL
)
_EXPLAIN_NAME = re.compile(r"explanation|reason|rationale|justification|thought", re.IGNORECASE)
_WORD = re.compile(r"\w+")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


# -- messages -------------------------------------------------------------------------


def message_text(message: Mapping[str, Any]) -> str:
    """The text of one chat message: a string content, or its text parts joined."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return ""


#: How a request laid out for the prompt cache shows its answer schema, at the end of its
#: user message (``framekit.judges.shared_prefix``): not part of what the answer is about,
#: so that a question is answered alike whichever way its schema is asked.
SCHEMA_SHOWN = "\n\nReply with only a JSON object, no prose around it, matching this JSON schema:"


def subject_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The text the answer is about: the last user message holding a data block, else the
    last user message, else ``""``; an answer schema shown at its end is left out.

    Examples
    --------
    >>> msgs = [{"role": "user", "content": "[BEGIN DATA: input]\\nhi\\n[END DATA: input]"},
    ...         {"role": "user", "content": "Reply in JSON."}]
    >>> subject_text(msgs)
    '[BEGIN DATA: input]\\nhi\\n[END DATA: input]'
    """
    last_user: str | None = None
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        text = message_text(message)
        if "[BEGIN DATA:" in text:
            return text.split(SCHEMA_SHOWN, 1)[0]
        if last_user is None:
            last_user = text
    return last_user or ""


def parse_markers(messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Collect ``@sim(key=value)`` markers from all messages; the last occurrence wins.

    Examples
    --------
    >>> parse_markers([{"role": "user", "content": "@sim(label=relevant, first=2) @sim(x=no)"}])
    {'label': 'relevant', 'first': 2, 'x': 'no'}
    """
    found: dict[str, Any] = {}
    for message in messages:
        text = message_text(message)
        if "@sim(" not in text:
            continue
        for match in _MARKER.finditer(text):
            for pair in match.group(1).split(","):
                key, sep, raw = pair.partition("=")
                key = key.strip()
                if sep and key:
                    # fault=null names a fault and a reply's base64 may read as a number:
                    # both are kept as written.
                    found[key] = raw.strip() if key in _VERBATIM else parse_value(raw)
    return found


_VERBATIM = frozenset({"fault", "reply"})


def reply_marker(text: str) -> str:
    """The marker making the simulator reply ``text`` (``{answer}``: the answer's JSON).

    Examples
    --------
    >>> marker = reply_marker("Verdict: {answer}, not (this)")
    >>> marker.startswith("@sim(reply=") and ")" not in marker[:-1]
    True
    >>> reply_text(parse_markers([{"role": "user", "content": marker}]))
    'Verdict: {answer}, not (this)'
    """
    return "@sim(reply=" + base64.urlsafe_b64encode(text.encode()).decode() + ")"


def reply_text(markers: Mapping[str, Any]) -> str | None:
    """The reply text a ``reply`` marker asks for, or ``None``."""
    raw = markers.get("reply")
    return None if raw is None else base64.urlsafe_b64decode(str(raw)).decode()


def parse_value(raw: str) -> Any:
    """Marker value: booleans, ``null``, numbers, else the (unquoted) string.

    Examples
    --------
    >>> [parse_value(v) for v in ["true", "3", "0.5", " 'Generally Yes' ", "high"]]
    [True, 3, 0.5, 'Generally Yes', 'high']
    """
    text = raw.strip()
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("null", "none"):
        return None
    if _NUMBER.fullmatch(text):
        number = float(text)
        return (
            int(number)
            if number.is_integer() and "." not in text and "e" not in lowered
            else number
        )
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def expected_choice(subject: str, choices: Sequence[Any]) -> Any:
    """The enum value the simulator picks for ``subject`` when no marker overrides it.

    Examples
    --------
    >>> expected_choice("Is the sky blue?", ["relevant", "irrelevant"])
    'relevant'
    """
    digest = hashlib.sha256(subject.encode("utf-8")).digest()
    # == int(hexdigest, 16): the big-endian integer of the digest.
    return choices[int.from_bytes(digest, "big") % len(choices)]


def question_text(subject: str) -> str:
    """The question an array-of-strings item holds (see the module docstring).

    Examples
    --------
    >>> question_text("[BEGIN DATA: output]\\nParis is the capital of France.\\n[END DATA: output]")
    'What is Paris is the capital of France.?'
    """
    block = _OUTPUT_BLOCK.search(subject)
    source = block.group(1) if block else subject
    return "What is " + " ".join(source.split()[:12]) + "?"


# -- schema instances -------------------------------------------------------------------


class _Context:
    """What an instance is built from: the root schema (for ``$ref``) and the subject."""

    __slots__ = ("root", "subject", "_question")

    def __init__(self, root: Mapping[str, Any], subject: str) -> None:
        self.root = root
        self.subject = subject
        self._question: str | None = None

    @property
    def question(self) -> str:
        if self._question is None:
            self._question = question_text(self.subject)
        return self._question


def build_instance(schema: Mapping[str, Any], subject: str) -> Any:
    """A JSON value conforming to ``schema`` (see the answer rule in the module docstring).

    Examples
    --------
    >>> schema = {"type": "object", "properties": {
    ...     "explanation": {"type": "string"}, "label": {"enum": ["yes", "no"]}}}
    >>> build_instance(schema, "abc")
    {'explanation': 'Simulated judgement of 3 characters.', 'label': 'no'}
    """
    return _instance(schema, _Context(schema, subject), None, 0)


def _resolve(schema: Mapping[str, Any], ctx: _Context) -> Mapping[str, Any]:
    if "$ref" not in schema:
        return schema
    for _ in range(32):  # bounded: a $ref cycle must not hang the server
        ref = schema.get("$ref")
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return schema
        node: Any = ctx.root
        for part in ref[2:].split("/"):
            node = (
                node.get(part.replace("~1", "/").replace("~0", "~"), {})
                if isinstance(node, Mapping)
                else {}
            )
        schema = node if isinstance(node, Mapping) else {}
    return schema


def _instance(schema: Mapping[str, Any], ctx: _Context, name: str | None, depth: int) -> Any:
    schema = _resolve(schema, ctx)
    if depth > 16:
        return None
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return expected_choice(ctx.subject, enum)
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            real = [b for b in branches if _resolve(b, ctx).get("type") != "null"]
            return _instance((real or branches)[0], ctx, name, depth + 1)
    if isinstance(schema.get("allOf"), list):
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            merged.update(_resolve(part, ctx))
        return _instance(merged, ctx, name, depth + 1)

    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "array" if "items" in schema else "string"

    if kind == "object":
        props = schema.get("properties") or {}
        return {key: _instance(sub, ctx, key, depth + 1) for key, sub in props.items()}
    if kind == "array":
        return _array(schema, ctx, depth)
    if kind == "string":
        return _string(schema, ctx, name)
    if kind in ("integer", "number"):
        return _number(schema, integer=kind == "integer")
    if kind == "boolean":
        return False
    return None


def _array(schema: Mapping[str, Any], ctx: _Context, depth: int) -> list[Any]:
    count = int(schema.get("minItems") or 3)
    if schema.get("maxItems") is not None:
        count = min(count, int(schema["maxItems"]))
    items = _resolve(schema.get("items") or {"type": "string"}, ctx)
    if items.get("type", "string") == "string" and "enum" not in items and "const" not in items:
        base = ctx.question
        return [base if k == 0 else f"{base} ({k + 1})" for k in range(count)]
    return [_instance(items, ctx, None, depth + 1) for _ in range(count)]


def _string(schema: Mapping[str, Any], ctx: _Context, name: str | None) -> str:
    if name is not None and _EXPLAIN_NAME.search(name):
        text = f"Simulated judgement of {len(ctx.subject)} characters."
    else:
        text = "simulated"
    min_len = int(schema.get("minLength") or 0)
    if len(text) < min_len:
        text = text + "." * (min_len - len(text))
    if schema.get("maxLength") is not None:
        text = text[: int(schema["maxLength"])]
    return text


def _number(schema: Mapping[str, Any], *, integer: bool) -> int | float:
    value: float = 0
    if isinstance(schema.get("minimum"), (int, float)):
        value = max(value, schema["minimum"])
    if (
        isinstance(schema.get("exclusiveMinimum"), (int, float))
        and value <= schema["exclusiveMinimum"]
    ):
        value = schema["exclusiveMinimum"] + (1 if integer else 1e-6)
    if isinstance(schema.get("maximum"), (int, float)):
        value = min(value, schema["maximum"])
    return int(math.ceil(value)) if integer else float(value)


_LETTERS = re.compile(r"[yn]*")


def claimed_text(subject: str) -> str:
    """The first 12 words of the text whose claims are listed (the output, else the
    reference), or ``""``.

    Examples
    --------
    >>> claimed_text("[BEGIN DATA: reference]\\nParis is the capital.\\n[END DATA: reference]")
    'Paris is the capital.'
    """
    found = _OUTPUT_BLOCK.search(subject) or _REFERENCE_BLOCK.search(subject)
    return " ".join(found.group(1).split()[:12]) if found else ""


def marked_values(
    schema: Mapping[str, Any], props: Mapping[str, Any], claimed: str = ""
) -> dict[str, Any]:
    """Marker values as answer properties: a ``y``/``n`` string given for a list of
    objects becomes its items (see the module docstring); everything else is as given.

    Examples
    --------
    >>> item = {"type": "object", "properties": {"claim": {"type": "string"},
    ...         "supported": {"type": "boolean"}, "document": {"type": ["integer", "null"]}}}
    >>> schema = {"properties": {"claims": {"type": "array", "items": item}}}
    >>> marked_values(schema, {"claims": "yn"})["claims"]  # doctest: +NORMALIZE_WHITESPACE
    [{'claim': 'Claim 1 of the answer.', 'supported': True, 'document': 1},
     {'claim': 'Claim 2 of the answer.', 'supported': False, 'document': None}]
    """
    out = dict(props)
    for key, value in props.items():
        prop = (schema.get("properties") or {}).get(key)
        items = prop.get("items") if isinstance(prop, Mapping) else None
        if not (isinstance(items, Mapping) and isinstance(value, str)):
            continue
        if not _LETTERS.fullmatch(value):
            continue
        out[key] = [
            _marked_item(items, k, letter == "y", claimed) for k, letter in enumerate(value)
        ]
    return out


def _marked_item(items: Mapping[str, Any], k: int, yes: bool, claimed: str) -> dict[str, Any]:
    item: dict[str, Any] = {}
    for name, sub in (items.get("properties") or {}).items():
        kind = sub.get("type") if isinstance(sub, Mapping) else None
        kinds = kind if isinstance(kind, list) else [kind]
        if "boolean" in kinds:
            item[name] = yes
        elif "integer" in kinds or "number" in kinds:
            item[name] = 1 if yes or "null" not in kinds else None
        elif "null" in kinds and not yes and "string" not in kinds:
            item[name] = None
        else:
            item[name] = f"Claim {k + 1} of the answer" + (f": {claimed}" if claimed else ".")
    return item


def find_schema_in_text(messages: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """A JSON schema written into the prompt (an object with ``properties``), if any.

    Plain-mode clients paste the schema into an instruction; the last one wins.
    """
    decoder = json.JSONDecoder()
    for message in reversed(messages):
        text = message_text(message)
        if '"properties"' not in text:
            continue
        start = text.find("{")
        tries = 0
        while start != -1 and tries < 64:  # bounded: prompts may be full of braces
            tries += 1
            try:
                value, _ = decoder.raw_decode(text, start)
            except ValueError:
                value = None
            if isinstance(value, dict) and isinstance(value.get("properties"), dict):
                return value
            start = text.find("{", start + 1)
    return None


# -- response bodies ----------------------------------------------------------------------


def chat_completion(
    body: Mapping[str, Any],
    markers: Mapping[str, Any],
    fault: str | None,
    response_id: str,
    created: int,
    template: str | None = None,
    noisy: _sim_logprobs.NoisyJudge | None = None,
    draw: float | None = None,
    pairwise: _sim_pairwise.PairwiseJudge | None = None,
) -> dict[str, Any]:
    """The OpenAI ``chat.completion`` object answering ``body``.

    ``fault`` may be ``"malformed"`` (truncated JSON), ``"null"`` (``content: null``) or
    ``"refusal"``; any other value is ignored here (the HTTP layer handles it).
    ``template`` (``SimulatorConfig.reply_template``) wraps a text answer: its
    ``{answer}`` is replaced by the answer's JSON. ``noisy`` (the request model's
    ``SimulatorConfig.noisy_judges`` entry) picks the label; with ``logprobs: true`` the
    answer carries ``logprobs.content`` (see ``_sim_logprobs``). ``draw`` (a uniform number,
    ``SimulatorConfig.sample_at_temperature``) samples the label from its distribution, as
    a model decoding at temperature > 0 would, instead of answering the likeliest.
    ``pairwise`` (``SimulatorConfig.pairwise_judge``) answers a pairwise request (two
    ``quality=`` markers and an "A" / "B" label; see ``_sim_pairwise``), default one
    without position bias.
    Raises ``ValueError`` for a request without a ``messages`` list, or asking for
    ``top_logprobs`` outside 0..20 or without ``logprobs``.
    """
    messages = body.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, Mapping) for m in messages):
        raise ValueError("'messages' must be a list of message objects")
    subject = subject_text(messages)
    props = {k: v for k, v in markers.items() if k not in RESERVED_KEYS}

    omitted = str(props.pop("omit", "") or "").split("|")
    top = _top_logprobs(body)
    tool_name, schema, json_mode = _requested_shape(body, messages)
    verdict = None
    if schema is not None:
        value = build_instance(schema, subject)
        if isinstance(value, dict):
            model = str(body.get("model") or "")
            verdict = _sim_pairwise.pairwise_verdict(
                pairwise or _sim_pairwise.PairwiseJudge(), schema, subject, markers, model
            )
            if verdict is not None:
                value[verdict.field] = verdict.label
            else:
                verdict = _sim_logprobs.judge(value, schema, subject, markers, model, noisy)
            value.update(marked_values(schema, props, claimed_text(subject)))
            for key in omitted:
                value.pop(key, None)
            if draw is not None and verdict is not None and verdict.probabilities:
                verdict = _sim_logprobs.sampled(verdict, draw)
                value[verdict.field] = verdict.label
        text = json.dumps(value)
    elif props or json_mode or tool_name is not None:
        text = json.dumps(props)
    else:
        text = f"Simulated answer to {len(subject)} characters."

    marked = reply_text(markers)
    template = marked or template
    if fault == "malformed":
        # Half of a JSON object never parses: the closing brace is gone.
        text = text[: len(text) // 2] if text.startswith("{") else "{" + text
    message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
    finish = "stop"
    if fault == "refusal":
        message["refusal"] = REFUSAL_TEXT
    elif fault == "null":
        pass
    elif tool_name is not None:
        message["tool_calls"] = [
            {
                "id": f"call_{response_id[-12:]}",
                "type": "function",
                "function": {
                    "name": tool_name,
                    "arguments": marked.replace("{answer}", text) if marked else text,
                },
            }
        ]
        finish = "tool_calls"
    else:
        message["content"] = template.replace("{answer}", text) if template else text

    answered = message["content"] or message["refusal"] or ""
    if "tool_calls" in message:
        answered = text
    logprobs = None
    if top is not None and (message["content"] or "tool_calls" in message):
        tokens = _sim_logprobs.logprobs_content(answered, verdict, top)
        logprobs = {"content": tokens, "refusal": None}
    prompt_tokens = estimate_tokens(sum(len(message_text(m)) for m in messages))
    completion_tokens = estimate_tokens(len(answered))
    return {
        "id": response_id,
        "object": "chat.completion",
        "created": created,
        "model": str(body.get("model") or "sim"),
        "system_fingerprint": "framekit-sim",
        "choices": [
            {"index": 0, "message": message, "finish_reason": finish, "logprobs": logprobs}
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _top_logprobs(body: Mapping[str, Any]) -> int | None:
    """How many alternatives per token the request asks for; ``None``: no logprobs."""
    top = body.get("top_logprobs")
    if top is not None and (
        not isinstance(top, int) or isinstance(top, bool) or not 0 <= top <= 20
    ):
        raise ValueError("'top_logprobs' must be an integer between 0 and 20")
    if not body.get("logprobs"):
        if top:
            raise ValueError("'top_logprobs' needs 'logprobs': true")
        return None
    return top or 0


def _requested_shape(
    body: Mapping[str, Any], messages: Sequence[Mapping[str, Any]]
) -> tuple[str | None, dict[str, Any] | None, bool]:
    """(tool name or None, answer schema or None, JSON requested) for a chat request.

    Any ``tools`` list means tool-call mode: the forced function if ``tool_choice`` names
    one, else the first (the simulator is a cooperative judge).
    """
    tools = body.get("tools")
    if isinstance(tools, list) and tools:
        functions = [t.get("function") or {} for t in tools if isinstance(t, Mapping)]
        chosen = functions[0] if functions else {}
        choice = body.get("tool_choice")
        if isinstance(choice, Mapping):
            wanted = (choice.get("function") or {}).get("name")
            chosen = next((f for f in functions if f.get("name") == wanted), chosen)
        params = chosen.get("parameters")
        return str(chosen.get("name") or "answer"), _object_schema(params), True
    response_format = body.get("response_format")
    if isinstance(response_format, Mapping):
        if response_format.get("type") == "json_schema":
            spec = response_format.get("json_schema") or {}
            schema = spec.get("schema") if isinstance(spec, Mapping) else None
            return None, _object_schema(schema), True
        if response_format.get("type") == "json_object":
            return None, find_schema_in_text(messages), True
    return None, find_schema_in_text(messages), False


def _object_schema(schema: Any) -> dict[str, Any]:
    # A missing or empty schema still asks for an object, never a bare string.
    return schema if isinstance(schema, dict) and schema else {"type": "object"}


def embeddings_body(body: Mapping[str, Any], default_dimensions: int) -> tuple[bytes, int]:
    """The OpenAI embeddings ``list`` object for ``body`` as JSON bytes, and its tokens.

    ``input`` may be a string or a list of strings; ``encoding_format="base64"`` gives
    little-endian float32 bytes as the OpenAI SDK expects. Raises ``ValueError`` for a
    missing or mistyped ``input`` or a bad ``dimensions``.
    """
    raw = body.get("input")
    if raw is None:
        raise ValueError("'input' is required")
    texts = [raw] if isinstance(raw, str) else list(raw) if isinstance(raw, list) else None
    if texts is None:
        raise ValueError("'input' must be a string or a list of strings")
    dims = body.get("dimensions") or default_dimensions
    if not isinstance(dims, int) or not 1 <= dims <= 65536:
        raise ValueError("'dimensions' must be an integer in [1, 65536]")
    as_base64 = body.get("encoding_format") == "base64"
    items = []
    chars = 0
    for index, item in enumerate(texts):
        text = item if isinstance(item, str) else json.dumps(item)
        chars += len(text)
        sparse = _sparse_embedding(text, dims)
        if as_base64:
            vector = json.dumps(encode_base64(embed(text, dims)))
        else:
            vector = _vector_json(sparse, dims)
        items.append(f'{{"object":"embedding","index":{index},"embedding":{vector}}}')
    tokens = estimate_tokens(chars)
    model = json.dumps(str(body.get("model") or "sim-embedding"))
    usage = f'{{"prompt_tokens":{tokens},"total_tokens":{tokens}}}'
    text = f'{{"object":"list","data":[{",".join(items)}],"model":{model},"usage":{usage}}}'
    return text.encode(), tokens


# -- embedding vectors ---------------------------------------------------------------------------


@lru_cache(maxsize=65536)
def _feature(token: str, dimensions: int) -> tuple[int, float]:
    digest = int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(), "big")
    return digest % dimensions, 1.0 if (digest >> 63) & 1 else -1.0


def _sparse_embedding(text: str, dimensions: int) -> dict[int, float]:
    # Sparse until the end: a text touches a few dozen of the 256 slots.
    counts: dict[int, float] = {}
    for token in _WORD.findall(text.lower()):
        index, sign = _feature(token, dimensions)
        counts[index] = counts.get(index, 0.0) + sign
    norm = math.sqrt(sum(v * v for v in counts.values()))
    return {i: v / norm for i, v in counts.items() if v} if norm else {}


def embed(text: str, dimensions: int = 256) -> list[float]:
    """A deterministic hashed bag-of-words vector, L2-normalised (zeros for no words).

    Lowercased ``\\w+`` tokens are hashed (blake2b) into ``dimensions`` slots with a
    hashed sign, so texts that share words have a high cosine similarity and unrelated
    texts are near 0.

    Examples
    --------
    >>> a, b = embed("the cat sat"), embed("the cat sat down")
    >>> round(sum(x * y for x, y in zip(a, b)), 2)
    0.87
    """
    vector = [0.0] * dimensions
    for index, value in _sparse_embedding(text, dimensions).items():
        vector[index] = value
    return vector


def _vector_json(sparse: dict[int, float], dimensions: int) -> str:
    # Hand-built: json.dumps spends most of its time on the 0.0 entries.
    pieces = ["0.0"] * dimensions
    for index, value in sparse.items():
        pieces[index] = repr(value)
    return "[" + ",".join(pieces) + "]"


def encode_base64(vector: list[float]) -> str:
    """The OpenAI ``encoding_format="base64"`` form: little-endian float32 bytes."""
    packed = array("f", vector)
    if packed.itemsize != 4:  # pragma: no cover - every CPython platform has 4-byte floats
        raise RuntimeError("float32 array unavailable")
    if sys.byteorder != "little":  # pragma: no cover
        packed.byteswap()
    return base64.b64encode(packed.tobytes()).decode("ascii")


def estimate_tokens(chars: int) -> int:
    """``ceil(chars / 4)``, the simulator's token estimate."""
    return -(-chars // 4)
