"""Conversation evaluators: the five-level rubrics that judge the most recent turn.

:class:`ResponseRelevance` and :class:`Coherence` read a response, the request it answers
and the earlier turns of the conversation (messages with tool calls and tool results, or
plain text). Mapping only ``history`` is enough: the last user message is the request and
the last assistant message with text is the response judged.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from framekit._errors import InputError, RecordError
from framekit.evaluators import _message_template, _messages, _prompt
from framekit.evaluators.base import Verdict
from framekit.evaluators.rubric import RubricEvaluator
from framekit.judges.request import ChatRequest

if TYPE_CHECKING:
    import numpy as np
    from typing_extensions import Unpack

    from framekit.evaluators.base import EvaluatorOptions
    from framekit.judges.local.likelihood import Likelihood, LikelihoodInput


class ConversationEvaluator(RubricEvaluator):
    """A rubric over the last turn of a conversation (shared by the two built-ins below).

    ``prompt_template`` is the user part of the prompt (the variant without the request
    when ``include_inputs=False``); ``prompt_template_without_input`` serves records that
    have no request (Coherence's input is optional); ``history_template`` is the section
    put in front when the record has earlier turns. All are plain attributes: read them,
    or assign your own text with the same ``{field}`` placeholders.
    """

    optional_fields: ClassVar[tuple[str, ...]] = ("history",)

    def __init__(
        self,
        *,
        system_prompt: str | None = None,
        include_inputs: bool = True,
        version: str | None = None,
        prompt_template: str | Sequence[Mapping[str, str]] | None = None,
        **options: Unpack[EvaluatorOptions],
    ) -> None:
        super().__init__(
            system_prompt=system_prompt, include_inputs=include_inputs, version=version, **options
        )
        extra = self.spec.extra
        self.prompt_template_without_input: str = str(extra["user_without_input"]).strip()
        if not include_inputs:
            self.prompt_template = self.prompt_template_without_input
            # The request is not shown, so it is not required; when mapped it still
            # locates the judged turn inside the history.
            self.required_fields = tuple(f for f in self.required_fields if f != "input")  # type: ignore[misc]
            self.optional_fields = ("input", *(f for f in self.optional_fields if f != "input"))  # type: ignore[misc]
        self.history_template: str = str(extra.get("history", "{history}")).strip()
        if prompt_template is not None:
            self.use_template(prompt_template)
            if not include_inputs and "input" in (self.placeholder_fields or {}).values():
                raise InputError(
                    f"{self.name}: include_inputs=False leaves the request out, but the "
                    "template shows {input}: drop one of the two"
                )
            # The template given serves every record, with or without a request.
            self.prompt_template_without_input = self.prompt_template

    def check_fields(self, available: Collection[str], columns: Collection[str]) -> None:
        # A messages column alone is enough: input and output are read from it per row.
        if "history" in available:
            return
        super().check_fields(available, columns)

    def prepare(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        history = fields.get("history")
        record = {"input": fields.get("input"), "output": fields.get("output"), "history": None}
        if history is not None:  # the judged turn is looked for only in a conversation
            history = _messages.normalise_history(history)
            turn = _messages.judged_turn(history, record["input"], record["output"])
            record = {"input": turn.input, "output": turn.output, "history": turn.history}
        for field in self.required_fields:
            if record[field] is None:
                hint = (
                    "; a plain-text history cannot supply it, give messages instead"
                    if isinstance(history, str)
                    else ""
                )
                raise RecordError(f"field {field!r} is null{hint}")
            value = record[field]
            if isinstance(value, str) and not value.strip():
                raise RecordError(f"field {field!r} is empty")
        return record

    def build_request(self, record: Mapping[str, Any]) -> ChatRequest:
        # Every text and block of the record in one call (a rubric's field_texts).
        leave_out = () if self.include_inputs else ("input",)
        texts, blocks = _prompt.record_blocks(record, self.placeholder_fields, leave_out)
        # Earlier turns go in front of the judged turn unless the template places them.
        history = None
        if "history" in texts and "history" not in (self.placeholder_fields or {}).values():
            history = _prompt.render(self.history_template, texts)
        if self.prompt_messages is not None:
            rendered = _message_template.render_messages(
                self.prompt_messages, blocks, escaped_braces=self.escaped_braces
            )
            if history is not None:
                last = max(i for i, m in enumerate(rendered) if m["role"] == "user")
                rendered[last] = {
                    "role": "user",
                    "content": history + "\n\n" + rendered[last]["content"],
                }
            return self._request(_message_template.with_data_rule(rendered, self.system_prompt))
        template = self.prompt_template
        if "input" not in texts and "{input}" in template:
            template = self.prompt_template_without_input
        user = _prompt.render(template, blocks, escaped_braces=self.escaped_braces)
        if history is not None and "{history}" not in template:
            user = history + "\n\n" + user
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        return self._request([*system, {"role": "user", "content": user}])


class ResponseRelevance(ConversationEvaluator):
    """Whether the response directly and fully addresses the question: a five-level rubric.

    Labels and scores: Not At All 0.0, Not Generally 0.25, Neutral/Mixed 0.5,
    Generally Yes 0.75, Completely Yes 1.0; passes at >= 0.5. The default template
    (``version="v1"``) follows Strands Agents' ResponseRelevanceEvaluator: the judge
    reasons step by step, and the top label means the response directly and fully
    addresses the question; missing key parts or unrelated content lower it; relevance is
    not correctness. ``version="v0"`` is framekit's first rubric ("how much of the
    response bears on the request"), kept to reproduce earlier runs.

    Fields: ``input`` (the request) and ``output`` (the response), optional ``history``
    (earlier turns as ``{"role", "content"}`` messages, tool calls and tool results
    included, or a string). Only the most recent turn is judged. With only ``history``
    mapped, the last user message is the input and the last assistant message the output.

    Parameters
    ----------
    **options
        The options every evaluator takes
        (:class:`~framekit.evaluators.base.EvaluatorOptions`): ``name=`` (the column prefix,
        default ``response_relevance``), ``threshold=`` (the pass mark, default 0.5),
        ``judge=`` (a judge for this evaluator alone; ``llm=`` and ``model=`` still work,
        deprecated), ``direction=``, ``scoring=`` and the decoding options
        (``temperature=``, ``max_tokens=``...: a per-evaluator override of the judge).
    system_prompt
        Replaces the built-in instructions (the rubric); the label set is unchanged.
    include_inputs
        ``False`` leaves the request out of the prompt, and ``input`` is then not
        required: the response is judged against the earlier turns (the offline judge
        compares it with the last earlier turn).
    version
        Prompt template version (``"v1"``, or ``"v0"``); an unknown version lists the
        known ones.

    Notes
    -----
    Offline judge (``judge="local"``): a similarity proxy, not a reading. The request and
    the response are embedded (all-MiniLM-L6-v2) and their cosine similarity is mapped onto
    the five labels by cut points calibrated on WikiQA question/answer pairs
    (``framekit.judges.local.methods.CALIBRATION.relevance_five``); the explanation quotes
    the cosine and the cut points. Earlier turns are not used.

    Examples
    --------
    >>> ev = ResponseRelevance()
    >>> ev.name, ev.threshold, ev.choices["Generally Yes"]
    ('response_relevance', 0.5, 0.75)
    """

    template_name = "response_relevance"
    required_fields = ("input", "output")

    def local_texts(self, record: Mapping[str, Any]) -> list[str]:
        if self.include_inputs:
            request = _prompt.as_text(record["input"])
        else:
            from framekit.evaluators import _local

            # Like the prompt without the request: compare with the earlier turns.
            found = _local.previous_turn({**record, "input": None})
            if found is None:
                raise RecordError(
                    "include_inputs=False: the offline judge compares the response with "
                    "the earlier turns, and this record has none"
                )
            request = found
        return [request, _prompt.as_text(record["output"])]

    def local_verdict(self, record: Mapping[str, Any], vectors: list[np.ndarray]) -> Verdict:
        from framekit.evaluators import _local

        return _local.five_level_relevance(self, vectors[0], vectors[1])


class Coherence(ConversationEvaluator):
    """Whether the response reasons soundly and holds together: a five-level rubric.

    Labels and scores: Not At All 0.0, Not Generally 0.25, Neutral/Mixed 0.5,
    Generally Yes 0.75, Completely Yes 1.0; passes at >= 0.5. The default template
    (``version="v2"``) asks what Strands Agents' CoherenceEvaluator and its source
    document ask: self-contradictions (within the response or with earlier turns), logic
    gaps and errors, the soundness of the reasoning on its own premises as distinct from
    its correctness (flawed reasoning loses even with a right answer), tool output
    outranking the model's own claims, then flow and organisation; Neutral/Mixed means
    both coherent and incoherent elements. ``version="v1"`` (consistency, flow and
    organisation only, the default until framekit issue 27) and ``version="v0"``
    (framekit's first rubric) are kept, so their cached scores reproduce.

    Fields: ``output`` (the response), optional ``input`` (the request) and ``history``
    (earlier turns as messages, tool calls included, or a string). Only the most recent
    turn is judged; with only ``history`` mapped, the last assistant message is judged and
    the last user message before it is the request.

    Parameters
    ----------
    **options
        The options every evaluator takes
        (:class:`~framekit.evaluators.base.EvaluatorOptions`): ``name=`` (the column prefix,
        default ``coherence``), ``threshold=`` (the pass mark, default 0.5), ``judge=`` (a
        judge for this evaluator alone; ``llm=`` and ``model=`` still work, deprecated),
        ``direction=``, ``scoring=`` and the decoding options (``temperature=``,
        ``max_tokens=``...: a per-evaluator override of the judge).
    system_prompt
        Replaces the built-in instructions (the rubric); the label set is unchanged.
    include_inputs
        ``False`` leaves the request out of the prompt (and out of the offline measure).
    version
        Prompt template version (``"v2"``, ``"v1"`` or ``"v0"``).

    Notes
    -----
    Offline judge (``judge="local"``): a similarity proxy, not a reading of logic. The
    response is split into sentences
    (:func:`framekit.judges.local.methods.split_sentences`), each embedded
    (all-MiniLM-L6-v2); two features, focus (mean cosine of the sentences to their
    centroid) and repetition (share of repeated word trigrams), are combined by a linear
    fit to SummEval's expert coherence ratings and mapped onto the five labels
    (:mod:`framekit.judges.local.coherence`, ``CALIBRATION.coherence_five``). On the
    SummEval dev half it agrees with experts at a summary-level Spearman of about 0.30
    (an LLM judge such as G-Eval with GPT-4: 0.58; the classic mean similarity of
    consecutive sentences: 0.04). The request and earlier turns are not used by this
    proxy; a contradiction on the same topic goes unnoticed. Should a recalibration
    measure the method under 0.2, its rows fail with that figure instead of carrying a
    label.

    With the ``lm`` extra installed, a response with a request is read instead by the
    likelihood of the response given the request under SmolLM2-135M-Instruct, with cut
    points fitted on SummEval (Spearman 0.34 with the article as the request). A response
    without one stays on the proxy: read alone, its likelihood agrees with the experts
    at 0.12, and the cut points fitted with the request would label nearly every such
    response "Not At All".

    Examples
    --------
    >>> Coherence().required_fields, Coherence().optional_fields
    (('output',), ('input', 'history'))
    """

    template_name = "coherence"
    default_version = "v2"
    required_fields = ("output",)
    optional_fields = ("input", "history")
    #: The records the offline likelihood scorer reads (the others: the embedding proxy).
    local_likelihood_scope: ClassVar[str] = "responses with a request"

    def local_texts(self, record: Mapping[str, Any]) -> list[str]:
        from framekit.evaluators import _local

        return _local.coherence_texts(record if self.include_inputs else {**record, "input": None})

    def local_verdict(self, record: Mapping[str, Any], vectors: list[np.ndarray]) -> Verdict:
        from framekit.evaluators import _local

        shown = record if self.include_inputs else {**record, "input": None}
        return _local.coherence_verdict(self, shown, vectors)

    def local_likelihood_inputs(self, record: Mapping[str, Any]) -> LikelihoodInput | None:
        """What the offline likelihood scorer reads (``framekit[lm]``): the request as the
        user's turn and the response; the engine's offline path calls this, then
        :meth:`likelihood_verdict`, when the extra is installed. ``None`` for a response
        without a request (or with ``include_inputs=False``): the embedding proxy
        (:meth:`local_texts`, :meth:`local_verdict`) reads it, being measured closer to
        expert ratings there than the likelihood of a response read alone."""
        from framekit.evaluators import _offline_support

        shown = record if self.include_inputs else {**record, "input": None}
        return _offline_support.coherence_likelihood_input(shown)

    def likelihood_verdict(self, record: Mapping[str, Any], result: Likelihood) -> Verdict:
        """The five labels from the response's mean token log-probability, by cut points
        fitted on SummEval's expert coherence ratings."""
        from framekit.evaluators import _offline_support

        return _offline_support.coherence_likelihood_verdict(self, result)
