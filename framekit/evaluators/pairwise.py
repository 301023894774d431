"""``Preference``: which of two candidates for the same request is better.

A pairwise evaluator reads one record whose ``output`` (and/or ``context``) holds *two*
values, the candidate shown first (A) and the one shown second (B), and answers ``"A"``,
``"B"`` or ``"tie"``. ``fk.evaluate_pairwise`` builds those records from a frame of
strategies, asks each pair in both orders through the normal engine, and reads the two
verdicts back into a pairs frame; this module only knows one order of one pair.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from framekit._errors import InputError, RecordError
from framekit.evaluators import _prompt
from framekit.evaluators.base import Verdict
from framekit.evaluators.rubric import RubricEvaluator, as_documents, require_nonempty
from framekit.judges.request import ChatRequest

if TYPE_CHECKING:
    import numpy as np
    from typing_extensions import Unpack

    from framekit.evaluators.base import EvaluatorOptions

#: The labels of a pairwise verdict: the candidate shown first, the one shown second,
#: neither.
FIRST, SECOND, TIE = "A", "B", "tie"
#: The placeholders a Preference template may hold; the two candidates are required.
PLACEHOLDERS = ("input", "candidate_a", "candidate_b", "criteria")
#: Offline, two candidates whose cosines with the request differ by less than this are a
#: tie. The offline judge's relevance cut points on WikiQA are about 0.1 apart
#: (calibration.json), so a gap of 0.02 is well inside one level: a gap the proxy cannot
#: stand behind.
OFFLINE_TIE_MARGIN = 0.02


class Preference(RubricEvaluator):
    """Which of two candidates better serves the request: ``"A"``, ``"B"`` or ``"tie"``.

    Used through :func:`framekit.evaluate_pairwise`, which asks every pair twice, once
    with each candidate first, and calls a pair whose two verdicts disagree a tie. The
    judge reasons first (the explanation), then names the better candidate.

    What is compared: with ``output`` mapped, the two responses, each shown with its own
    retrieved documents when ``context`` is mapped too; with only ``context`` mapped, the
    two retrievals for the request. ``input`` (the request) is required.

    Parameters
    ----------
    criteria
        The question the judge is asked, replacing the default ("which candidate answers
        the request better: more relevant, complete, accurate given its documents, and
        clearer?"; for retrievals: "which documents hold more of the information
        needed?"), e.g. ``"Which answer is more concise?"``. Sent as written, outside the
        data blocks: it is your instruction, not data.
    allow_ties
        ``False`` drops ``"tie"`` from the labels the judge may give (a pair is still a
        tie when its two orders disagree).
    prompt_template
        The user message, with ``{candidate_a}`` and ``{candidate_b}`` (each a delimited
        data block) and optionally ``{input}`` (a block) and ``{criteria}`` (the criteria
        text); readable as ``.prompt_template`` like every evaluator's. A replaced
        template's answers are cached apart (its version is ``"custom"``).
    system_prompt
        The instructions sent as the system message; default the template's (without
        the tie rule when ``allow_ties=False``).
    version
        The template version (``"v1"``: ``evaluators/templates/preference.toml``).
    **options
        As for every evaluator: ``name``, ``judge``, ``threshold``, decoding options.

    Notes
    -----
    Scores: ``A`` 1.0, ``B`` 0.0, ``tie`` 0.5 (the first candidate's share of the win), so
    ``<name>_confidence`` from the judge's logprobs is the probability of the label it gave.
    Offline (``judge="local"``): each candidate's relevance to the request is measured as
    the offline relevance evaluators measure it (the cosine of request and response, or of
    the request and its best document), and the closer one wins; cosines within
    0.02 of each other are a tie. Symmetric by construction: the offline judge has no
    position bias.

    Examples
    --------
    >>> ev = Preference()
    >>> ev.name, ev.choices
    ('preference', {'A': 1.0, 'B': 0.0, 'tie': 0.5})
    >>> Preference(allow_ties=False).choices
    {'A': 1.0, 'B': 0.0}
    >>> "{candidate_a}" in ev.prompt_template and "{criteria}" in ev.prompt_template
    True
    >>> verdict = ev.score(input="Capital of France?",
    ...                    output=["Paris is the capital of France.", "Bananas are yellow."],
    ...                    judge="local", cache=False)  # doctest: +SKIP
    >>> verdict.label  # doctest: +SKIP
    'A'
    """

    template_name = "preference"
    required_fields = ("input",)
    optional_fields = ("output", "context")
    needs_input_reason = "the candidates are compared as responses to the request"
    #: What ``fk.evaluate_pairwise`` asks of an evaluator: records of two candidates.
    compares_pairs: ClassVar[bool] = True

    def __init__(
        self,
        *,
        criteria: str | None = None,
        allow_ties: bool = True,
        system_prompt: str | None = None,
        version: str | None = None,
        prompt_template: str | None = None,
        **options: Unpack[EvaluatorOptions],
    ) -> None:
        if criteria is not None and (not isinstance(criteria, str) or not criteria.strip()):
            raise InputError(f"Preference: criteria must be non-empty text, got {criteria!r}")
        self.allow_ties = bool(allow_ties)
        self.criteria = criteria
        super().__init__(
            system_prompt=system_prompt,
            version=version,
            prompt_template=prompt_template,
            **options,
        )
        if not self.allow_ties:
            self.choices.pop(TIE, None)
            if system_prompt is None:
                self.system_prompt = str(self.spec.extra.get("system_no_tie", "")).strip()
        if criteria is not None and self.version != "custom":
            # Another question is another prompt: its answers are cached apart anyway
            # (the key holds the messages); the version says so in the run record too.
            self.version = f"{self.version}+criteria"

    def use_template(self, prompt_template: Any) -> None:
        """Ask with ``prompt_template`` (text) instead of the built-in user message; it
        must show ``{candidate_a}`` and ``{candidate_b}``."""
        if not isinstance(prompt_template, str):
            raise InputError(
                f"{self.name}: prompt_template must be text with {{candidate_a}} and "
                "{candidate_b} placeholders (a message list is not supported here)"
            )
        found = _prompt.placeholders(prompt_template)
        unknown = [p for p in found if p not in PLACEHOLDERS]
        if unknown:
            raise InputError(
                f"{self.name}: template placeholder {{{unknown[0]}}} is not one of "
                + ", ".join("{" + p + "}" for p in PLACEHOLDERS)
            )
        missing = [p for p in ("candidate_a", "candidate_b") if p not in found]
        if missing:
            raise InputError(f"{self.name}: the template must show {{{missing[0]}}}")
        self.prompt_template = prompt_template
        self.version = "custom"

    # -- records ----------------------------------------------------------------------
    def prepare(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        """The request and the two candidates (outputs and/or document lists), checked."""
        record = {f: fields.get(f) for f in self.fields}
        if record["input"] is None:
            raise RecordError("field 'input' is null")
        require_nonempty(record, "input")
        if record["output"] is None and record["context"] is None:
            raise RecordError("nothing to compare: map 'output' (answers) or 'context'")
        if record["output"] is not None:
            outputs = _pair(record["output"], "output")
            for side, text in zip((FIRST, SECOND), outputs):
                if text is None or not _prompt.as_text(text).strip():
                    raise RecordError(f"candidate {side} has no output")
            record["output"] = [_prompt.as_text(t) for t in outputs]
        if record["context"] is not None:
            record["context"] = [as_documents(d) for d in _pair(record["context"], "context")]
        return record

    def candidate_text(self, record: Mapping[str, Any], index: int) -> str:
        """What the judge is shown of one candidate (0: A, 1: B)."""
        output = record.get("output")
        context = record.get("context")
        documents = None if context is None else _documents_or_none(context[index])
        if output is None:
            return documents or "(no documents were retrieved)"
        if context is None:
            return str(output[index])
        return (
            f"Response:\n{output[index]}\n\nRetrieved documents:\n"
            f"{documents or '(no documents were retrieved)'}"
        )

    def criteria_text(self, record: Mapping[str, Any]) -> str:
        if self.criteria is not None:
            return self.criteria
        key = "criteria_output" if record.get("output") is not None else "criteria_context"
        return str(self.spec.extra.get(key, "")).strip()

    def build_request(self, record: Mapping[str, Any]) -> ChatRequest:
        blocks = {
            "input": _prompt.as_text(record["input"]),
            "candidate_a": self.candidate_text(record, 0),
            "candidate_b": self.candidate_text(record, 1),
        }
        # The criteria are the caller's instruction, not data: sent as written, between
        # the parts of the template rendered with data blocks.
        parts = self.prompt_template.split("{criteria}")
        user = self.criteria_text(record).join(_prompt.render(p, blocks) for p in parts)
        messages = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        messages.append({"role": "user", "content": user})
        return self._request(messages)

    def cache_namespace(self) -> str:
        return f"{self.template_name}:{self.version}" + ("" if self.allow_ties else ":no-tie")

    # -- offline judge ------------------------------------------------------------------
    def local_texts(self, record: Mapping[str, Any]) -> list[str]:
        """The request, then both outputs, or else both document lists (A's first)."""
        if record.get("output") is not None:
            return [str(record["input"]), *record["output"]]
        docs_a, docs_b = record["context"]
        return [str(record["input"]), *docs_a, *docs_b]

    def local_verdict(self, record: Mapping[str, Any], vectors: list[np.ndarray]) -> Verdict:
        from framekit.judges.local import methods as lm

        request = vectors[0]
        if record.get("output") is not None:
            sims = [lm.cosine(request, vectors[1]), lm.cosine(request, vectors[2])]
            what = "request vs each response"
        else:
            n_a = len(record["context"][0])
            groups = (vectors[1 : 1 + n_a], vectors[1 + n_a :])
            sims = [_best(lm, request, g) for g in groups]
            what = "request vs each retrieval's best document"
        gap = sims[0] - sims[1]
        if abs(gap) < OFFLINE_TIE_MARGIN and self.allow_ties:
            label = TIE
        else:
            label = FIRST if gap >= 0 else SECOND
        explanation = (
            f"Local similarity proxy ({what}, all-MiniLM-L6-v2): cosine A {sims[0]:.3f}, "
            f"B {sims[1]:.3f}; within {OFFLINE_TIE_MARGIN} is a tie; not an LLM reading."
        )
        return Verdict(self.choices[label], label, explanation)

    def scale_text(self) -> str:
        return ", ".join(self.choices) + " (A: the candidate shown first)"


def _pair(value: Any, field: str) -> list[Any]:
    """A field's two candidates, A's first; anything else fails the record."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        try:
            value = list(value)  # a numpy array or a polars Series of two
        except TypeError:
            value = None
    if value is None or isinstance(value, (str, bytes, Mapping)) or len(value) != 2:
        raise RecordError(
            f"field {field!r} must hold the two candidates (A's, then B's): "
            "Preference compares two; use fk.evaluate_pairwise"
        )
    return list(value)


def _documents_or_none(documents: list[str]) -> str | None:
    return _prompt.documents_text(documents) if documents else None


def _best(lm: Any, request: np.ndarray, documents: Sequence[np.ndarray]) -> float:
    import numpy as np

    if not len(documents):
        return -1.0  # an empty retrieval loses to any document
    return float(lm.relevance_similarity(request, np.vstack(list(documents))))


__all__ = ["FIRST", "OFFLINE_TIE_MARGIN", "PLACEHOLDERS", "SECOND", "TIE", "Preference"]
