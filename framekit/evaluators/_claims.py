"""Claim lists: the answer schema Groundedness and ContextRecall ask for, and its verdict.

The judge lists the factual claims of a text and, for each, the evidence it found, whether
the documents support it, and which document does. The score is the share of supported
claims; the label comes from the template's bands; the explanation lists the claims in
words and ``details`` holds them as data. Pure functions: no judge, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from framekit._errors import RecordError, one_line
from framekit.evaluators.base import Verdict

#: The properties of one claim, in the order the judge writes them: the evidence comes
#: before the verdict, so the judge looks before it decides.
CLAIM_PROPERTIES: dict[str, Any] = {
    "claim": {"type": "string", "description": "One factual claim, written to stand alone."},
    "evidence": {
        "type": "string",
        "description": "A short quotation of the supporting text, or what the documents "
        "say instead, or that they say nothing about it.",
    },
    "supported": {"type": "boolean", "description": "Whether the documents support it."},
    "document": {
        "type": ["integer", "null"],
        "description": "The number of the supporting document; null when unsupported.",
    },
}


def claims_schema(description: str) -> dict[str, Any]:
    """The answer schema: one list of claims (strict-mode ready: every property required,
    no other properties).

    Examples
    --------
    >>> schema = claims_schema("The claims.")
    >>> schema["required"], schema["properties"]["claims"]["items"]["required"]
    (['claims'], ['claim', 'evidence', 'supported', 'document'])
    """
    item = {
        "type": "object",
        "properties": CLAIM_PROPERTIES,
        "required": list(CLAIM_PROPERTIES),
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"claims": {"type": "array", "description": description, "items": item}},
        "required": ["claims"],
        "additionalProperties": False,
    }


def read_claims(
    answer: Mapping[str, Any],
    n_documents: int,
    source: str | None = None,
    subject: str = "text",
) -> list[dict[str, Any]]:
    """The judge's claims as plain dicts (``claim``, ``evidence``, ``supported``,
    ``document``); a document number outside 1..n becomes null.

    A claim marked supported must have text and cite a document the row has (a number in
    1..n): one that does not is counted unsupported, and its ``problem`` says why (the
    explanation shows it), since a verdict it cannot point to is no support. Given the
    ``source`` the claims were drawn from (the ``subject``: the response and the request
    it answers), a supported claim must also come from it: at least :data:`MIN_OVERLAP`
    of its content words (:func:`content_words`) are in the source, else it is a claim the
    judge brought in (from the documents, say) and counts unsupported.

    The parser has checked the list against the schema (a malformed one is re-asked);
    this is the last line for an answer read from an old cache entry.

    Examples
    --------
    >>> read_claims({"claims": [{"claim": "Paris is big.", "supported": True,
    ...                          "document": 7, "evidence": ""}]}, 2)[0]["problem"]
    'marked supported, but cites document 7 of 2'
    """
    raw = answer.get("claims")
    if not isinstance(raw, list) or not all(isinstance(c, Mapping) for c in raw):
        raise RecordError("the judge's answer has no list of claims")
    vocabulary = content_words(source) if source is not None else None
    claims = []
    for item in raw:
        supported = item.get("supported")
        if not isinstance(supported, bool):
            raise RecordError(f"a claim's 'supported' is {supported!r}, not true or false")
        document = _document_number(item.get("document"))
        claim: dict[str, Any] = {
            "claim": str(item.get("claim") or "").strip(),
            "supported": supported,
            "document": document if document is not None and 1 <= document <= n_documents else None,
            "evidence": str(item.get("evidence") or "").strip(),
        }
        problem = _support_problem(claim, item.get("document"), n_documents) if supported else None
        if supported and not problem and vocabulary is not None:
            problem = _foreign(claim["claim"], vocabulary, subject)
        if problem:
            claim.update(supported=False, problem=problem)
        claims.append(claim)
    return claims


#: The least share of a supported claim's content words found in its source. Chosen on
#: WikiQA dev (scripts/calibrate_claim_overlap.py, benchmarks/results/claim_overlap.json):
#: an answer sentence's clauses share all their words with it; when the sentence calls its
#: subject "it" and the claim names it, as a judge writes a claim to stand alone, 1 of 179
#: falls below 0.25 (and below 0.1); the page's other sentences (what the documents say,
#: not the answer) have a median share of 0.13, and 75 % fall below 0.25. 0.3 demotes no
#: more of those examples, but they hold no paraphrase, which lowers an honest share.
MIN_OVERLAP = 0.25


def _foreign(claim: str, vocabulary: set[str], subject: str) -> str | None:
    """Why ``claim`` is not the source's (too few of its words are there), or ``None``."""
    words = content_words(claim)
    found = len(words & vocabulary)
    if not words or found >= MIN_OVERLAP * len(words):
        return None
    return f"marked supported, but not the {subject}'s: {found} of its {len(words)} words are in it"


def _document_number(value: Any) -> int | None:
    """A cited document number as an integer (``2`` or ``2.0``), else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _support_problem(claim: Mapping[str, Any], cited: Any, n_documents: int) -> str | None:
    """Why a claim marked supported is not, or ``None``: no text, no document, or a
    document the row does not have."""
    if not claim["claim"]:
        return "marked supported, but the claim has no text"
    if cited is None:
        return "marked supported, but cites no document"
    if claim["document"] is None:
        return f"marked supported, but cites document {one_line(str(cited), 20)} of {n_documents}"
    return None


#: Words that carry no content of a claim, left out of the overlap.
_FUNCTION_TEXT = (
    "a an the of in on at to for from by with about into over under after before between "
    "during and or but nor so than then as if that this these those there here which who "
    "whom whose what when where why how is are was were be been being am do does did has "
    "have had will would can could shall should may might must not no also it its they "
    "them their he him his she her i you we me us my our your one"
)
_FUNCTION_WORDS = frozenset(_FUNCTION_TEXT.split())
_WORD = re.compile(r"\w+")
#: Letters of a word compared (a crude stem: "opened", "opens" and "opening" read alike).
STEM = 5


def content_words(text: str) -> set[str]:
    """The content words of ``text``, case-folded and cut to :data:`STEM` letters.

    Examples
    --------
    >>> sorted(content_words("The tower opened in 1889; it is 330 metres tall."))
    ['1889', '330', 'metre', 'opene', 'tall', 'tower']
    """
    words = (w.casefold() for w in _WORD.findall(text))
    return {w[:STEM] for w in words if w not in _FUNCTION_WORDS}


def band_label(value: float, bands: Mapping[str, float]) -> str:
    """The first label (best first) whose lowest score ``value`` reaches.

    Examples
    --------
    >>> bands = {"grounded": 1.0, "partially grounded": 0.5, "ungrounded": 0.0}
    >>> [band_label(v, bands) for v in (1.0, 0.75, 0.5, 0.2)]
    ['grounded', 'partially grounded', 'partially grounded', 'ungrounded']
    """
    for label, lowest in bands.items():
        if value >= lowest:
            return label
    return list(bands)[-1]


def claims_verdict(
    claims: Sequence[Mapping[str, Any]],
    bands: Mapping[str, float],
    no_claims_label: str,
    subject: str,
) -> Verdict:
    """Score = supported / claims; 1.0 with ``no_claims_label`` when there are none.

    ``subject`` names the text the claims come from ("response", "reference answer").

    Examples
    --------
    >>> bands = {"grounded": 1.0, "partially grounded": 0.5, "ungrounded": 0.0}
    >>> claims = [{"claim": "Paris is in France.", "supported": True, "document": 1,
    ...            "evidence": "Paris, France"},
    ...           {"claim": "Paris has 9 million people.", "supported": False,
    ...            "document": None, "evidence": "no figure given"}]
    >>> v = claims_verdict(claims, bands, "no claims", "response")
    >>> v.value, v.label
    (0.5, 'partially grounded')
    >>> print(v.explanation)
    1 of 2 claims of the response is supported by the documents.
    - supported (document 1): Paris is in France.
    - unsupported: Paris has 9 million people. (no figure given)
    """
    supported = sum(1 for c in claims if c["supported"])
    details: dict[str, Any] = {
        "method": "llm",
        "claims": [dict(c) for c in claims],
        "supported": supported,
        "total": len(claims),
    }
    if not claims:
        return Verdict(
            1.0,
            no_claims_label,
            f"The {subject} makes no factual claim: nothing in it can be unsupported.",
            details=details,
        )
    value = supported / len(claims)
    lines = [
        f"{supported} of {len(claims)} claim{'s' if len(claims) != 1 else ''} of the {subject} "
        f"{'are' if supported != 1 else 'is'} supported by the documents."
    ]
    for c in claims:
        if c["supported"]:
            where = f" (document {c['document']})" if c["document"] is not None else ""
            lines.append(f"- supported{where}: {c['claim']}")
        else:
            why = f" ({one_line(c['evidence'], 160)})" if c["evidence"] else ""
            said = f" ({c['problem']})" if c.get("problem") else ""
            lines.append(f"- unsupported{said}: {c['claim'] or '(no text)'}{why}")
    return Verdict(value, band_label(value, bands), "\n".join(lines), details=details)
