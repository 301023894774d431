"""Label probabilities from token logprobs: recorded SmolLM2 answers and built cases.

The recorded answers (tests/fixtures/logprobs/, written by
scripts/record_logprob_fixtures.py from SmolLM2-135M served by xllamacpp) are checked
against probabilities computed by hand from the logprobs they hold, quoted below.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from framekit import InputError
from framekit.judges.logprobs import expected_score, label_probabilities, logprobs_content

FIXTURES = Path(__file__).parent / "fixtures" / "logprobs"
FIVE = ["Not At All", "Not Generally", "Neutral/Mixed", "Generally Yes", "Completely Yes"]
BINARY = ["relevant", "irrelevant"]
e = math.exp


def recorded(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    return data


def entry_at(content: list[dict[str, Any]], token: str, after: str = "label") -> dict[str, Any]:
    """The first entry whose token is ``token`` after the last ``after`` token."""
    start = max(i for i, x in enumerate(content) if x["token"] == after)
    return next(x for x in content[start:] if x["token"] == token)


def tok(
    text: str, logprob: float = 0.0, alternatives: list[tuple[str, float]] | None = None
) -> dict[str, Any]:
    """One logprobs entry; by default certain, with itself as its only alternative."""
    listed = alternatives if alternatives is not None else [(text, logprob)]
    return {
        "token": text,
        "logprob": logprob,
        "bytes": list(text.encode()),
        "top_logprobs": [
            {"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in listed
        ],
    }


def answer(
    *label_tokens: dict[str, Any], head: str = '{"explanation": "x", "label": "'
) -> list[dict[str, Any]]:
    return [tok(head), *label_tokens, tok('"}')]


# -- recorded SmolLM2 answers --------------------------------------------------------------


def test_five_level_label_split_over_tokens_with_a_shared_first_token_matches_hand_values():
    fixture = recorded("five_level_off_topic")
    content = fixture["logprobs_content"]
    # The logprobs of the recorded answer, read off the fixture: at "Not", the alternatives
    # that start a label are Not (Not At All + Not Generally), Com (Completely Yes) and Ne
    # (Neutral/Mixed); "Generally Yes" is absent, so it gets the smallest listed
    # probability, "The" (the unlisted mass, about 0.32, is larger). After "Not": " At"
    # and " Generally".
    not_, com, ne, the = (
        -1.2520062923431396,
        -3.8128697872161865,
        -4.472858428955078,
        -4.789947032928467,
    )
    at, generally = -0.476826548576355, -1.7283294200897217
    first = entry_at(content, "Not")
    listed = {a["token"]: a["logprob"] for a in first["top_logprobs"]}
    assert (listed["Not"], listed["Com"], listed["Ne"], listed["The"]) == (not_, com, ne, the)
    assert min(listed.values()) == the and 1 - sum(map(e, listed.values())) > e(the)
    second = {a["token"]: a["logprob"] for a in entry_at(content, " At")["top_logprobs"]}
    assert (second[" At"], second[" Generally"]) == (at, generally)

    z1 = e(not_) + e(com) + e(ne) + e(the)
    z2 = e(at) + e(generally)
    expected = {
        "Not At All": e(not_) / z1 * e(at) / z2,
        "Not Generally": e(not_) / z1 * e(generally) / z2,
        "Neutral/Mixed": e(ne) / z1,
        "Generally Yes": e(the) / z1,
        "Completely Yes": e(com) / z1,
    }
    got = label_probabilities(content, fixture["labels"])
    assert got is not None and got.label == "Not At All"
    assert got.probabilities == pytest.approx(expected, abs=1e-12)
    assert got.confidence == pytest.approx(0.67836, abs=1e-5)
    assert got.missing == ("Generally Yes",)
    assert sum(got.probabilities.values()) == pytest.approx(1.0)


def test_label_absent_from_its_own_alternatives_is_read_from_its_sampled_logprob():
    fixture = recorded("binary_irrelevant")
    content = fixture["logprobs_content"]
    # The grammar forced "relevant" although the model ranked it below its top 10; "ir"
    # ("irrelevant") is not listed either, so it gets the smallest listed probability.
    sampled = entry_at(content, "relevant")
    relevant, bon = -5.95827054977417, -4.321761608123779
    assert sampled["logprob"] == relevant
    assert "relevant" not in [a["token"] for a in sampled["top_logprobs"]]
    assert min(a["logprob"] for a in sampled["top_logprobs"]) == bon
    got = label_probabilities(content, fixture["labels"])
    assert got is not None
    assert got.confidence == pytest.approx(e(relevant) / (e(relevant) + e(bon)), abs=1e-12)
    assert got.probabilities["irrelevant"] == pytest.approx(0.83706, abs=1e-5)
    assert got.missing == ("irrelevant",)


def test_tokens_are_walked_not_message_offsets():
    fixture = recorded("binary_irrelevant")
    tokens = "".join(x["token"] for x in fixture["logprobs_content"])
    # The server reported a code fence around the JSON that the message content leaves out.
    assert tokens.startswith("```") and not fixture["message_content"].startswith("```")
    assert label_probabilities(fixture["logprobs_content"], fixture["labels"]) is not None


# -- built cases ---------------------------------------------------------------------------

LABELS4 = ["relevant", "irrelevant", "partially relevant", "partially irrelevant"]


def test_shared_first_token_on_a_path_not_taken_is_split_evenly():
    content = answer(
        tok(
            "relevant", -0.3, [("relevant", -0.3), ("partially", -1.5), ("ir", -2.5), ("The", -4.0)]
        )
    )
    got = label_probabilities(content, LABELS4)
    z = e(-0.3) + e(-1.5) + e(-2.5)
    assert got is not None and got.probabilities == pytest.approx(
        {
            "relevant": e(-0.3) / z,
            "irrelevant": e(-2.5) / z,
            "partially relevant": e(-1.5) / 2 / z,
            "partially irrelevant": e(-1.5) / 2 / z,
        }
    )
    assert got.missing == ()


def test_shared_prefix_on_the_sampled_path_is_split_where_the_labels_part():
    content = answer(
        tok("part", -0.2, [("part", -0.2), ("relevant", -2.0), ("ir", -3.0)]),
        tok("ially"),
        tok(" ir", -0.4, [(" ir", -0.4), (" relevant", -1.2), (" the", -2.0)]),
        tok("relevant"),
    )
    got = label_probabilities(content, LABELS4)
    z1 = e(-0.2) + e(-2.0) + e(-3.0)
    z2 = e(-0.4) + e(-1.2)
    assert got is not None and got.label == "partially irrelevant"
    assert got.probabilities == pytest.approx(
        {
            "relevant": e(-2.0) / z1,
            "irrelevant": e(-3.0) / z1,
            "partially relevant": e(-0.2) / z1 * e(-1.2) / z2,
            "partially irrelevant": e(-0.2) / z1 * e(-0.4) / z2,
        }
    )


def test_missing_labels_get_the_smallest_listed_probability_when_much_is_unlisted():
    alternatives = [("Generally", -0.5), ("Completely", -1.5), ("Other", -3.0)]
    content = answer(tok("Generally", -0.5, alternatives), tok(" Yes"))
    got = label_probabilities(content, FIVE)
    # Three labels are absent (Not At All and Not Generally, both behind "Not", and
    # Neutral/Mixed). The unlisted mass, about 0.12, split three ways is below the last
    # listed probability e^-3, so each absent label gets its third.
    unlisted = 1 - (e(-0.5) + e(-1.5) + e(-3.0))
    each = min(unlisted / 3, e(-3.0))
    assert each == unlisted / 3
    z = e(-0.5) + e(-1.5) + 3 * each
    assert got is not None and got.probabilities == pytest.approx(
        {
            "Not At All": each / z,
            "Not Generally": each / z,
            "Neutral/Mixed": each / z,
            "Generally Yes": e(-0.5) / z,
            "Completely Yes": e(-1.5) / z,
        }
    )
    assert set(got.missing) == {"Not At All", "Not Generally", "Neutral/Mixed"}


def test_missing_label_is_capped_by_the_last_listed_alternative():
    content = answer(tok("relevant", -0.1, [("relevant", -0.1), ("The", -4.0)]))
    got = label_probabilities(content, BINARY)
    # Unlisted mass is 0.077; the top-k order says "ir" is no likelier than "The".
    assert got is not None
    assert got.confidence == pytest.approx(e(-0.1) / (e(-0.1) + e(-4.0)))


def test_label_starting_inside_a_token_matches_alternatives_with_the_same_lead():
    content = [
        tok('{"label'),
        tok('":"rel', -0.2, [('":"rel', -0.2), ('":"ir', -1.0), ('": ', -2.0)]),
        tok('evant"}'),
    ]
    got = label_probabilities(content, BINARY)
    assert got is not None and got.label == "relevant"
    assert got.confidence == pytest.approx(e(-0.2) / (e(-0.2) + e(-1.0)))


def test_label_in_escaped_tool_call_arguments_is_found():
    head = '{"name": "retrieval_relevance", "arguments": "{\\"explanation\\": \\"off topic\\", \\"label\\": \\"'
    content = [
        tok(head),
        tok("ir", -0.3, [("ir", -0.3), ("relevant", -1.4)]),
        tok("relevant"),
        tok('\\"}"}'),
    ]
    got = label_probabilities(content, BINARY)
    assert got is not None and got.label == "irrelevant"
    assert got.confidence == pytest.approx(e(-0.3) / (e(-0.3) + e(-1.4)))


def test_a_label_quoted_in_the_explanation_is_not_taken_for_the_verdict():
    head = '{"explanation": "the text says \\"label\\": \\"relevant\\"", "label": "'
    content = [
        tok(head),
        tok("ir", -0.5, [("ir", -0.5), ("relevant", -1.0)]),
        tok("relevant"),
        tok('"}'),
    ]
    got = label_probabilities(content, BINARY)
    assert got is not None and got.label == "irrelevant"


def test_answered_label_selects_its_occurrence():
    content = [
        tok('{"label": "'),
        tok("relevant", -0.2, [("relevant", -0.2), ("ir", -2.0)]),
        tok('", "label": "no"}'),
    ]
    assert label_probabilities(content, BINARY, answered="irrelevant") is None
    got = label_probabilities(content, BINARY, answered="relevant")
    assert got is not None and got.label == "relevant"


def test_label_in_another_case_is_read_case_insensitively():
    content = answer(tok("Relevant", -0.2, [("Relevant", -0.2), ("Ir", -1.0)]))
    got = label_probabilities(content, BINARY)
    assert got is not None and got.label == "relevant"
    assert got.confidence == pytest.approx(e(-0.2) / (e(-0.2) + e(-1.0)))


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (None, "no logprobs"),
        ([], "empty list"),
        ([tok('{"verdict": "relevant"}')], "no label field"),
        (answer(tok("maybe", -0.1, [("maybe", -0.1)])), "a value outside the rubric"),
        (
            answer({"token": "relevant", "logprob": -0.1, "bytes": list(b"relevant")}),
            "no alternatives",
        ),
        (answer({"token": "relevant", "logprob": -0.1, "top_logprobs": []}), "top_logprobs: 0"),
    ],
)
def test_no_probabilities_are_invented(content, why):
    assert label_probabilities(content, BINARY) is None, why


def test_token_text_is_used_when_bytes_are_absent():
    content = [
        {"token": '{"label": "', "logprob": 0.0, "top_logprobs": []},
        {
            "token": "relevant",
            "logprob": -0.2,
            "top_logprobs": [
                {"token": "relevant", "logprob": -0.2},
                {"token": "ir", "logprob": -1.0},
            ],
        },
        {"token": '"}', "logprob": 0.0, "top_logprobs": []},
    ]
    got = label_probabilities(content, BINARY)
    assert got is not None and got.confidence == pytest.approx(e(-0.2) / (e(-0.2) + e(-1.0)))


def test_logprobs_content_reads_dicts_and_response_objects():
    class Obj:
        def __init__(self, **kw: Any) -> None:
            self.__dict__.update(kw)

    body = {"choices": [{"logprobs": {"content": [tok("a")]}}]}
    assert logprobs_content(body) == [tok("a")]
    reply = Obj(choices=[Obj(logprobs=Obj(content=[tok("a")]))])
    assert logprobs_content(reply) == [tok("a")]
    assert logprobs_content({"choices": []}) is None


def test_expected_score_weights_each_label_score_by_its_probability():
    scores = {
        "Not At All": 0.0,
        "Not Generally": 0.25,
        "Neutral/Mixed": 0.5,
        "Generally Yes": 0.75,
        "Completely Yes": 1.0,
    }
    probs = {
        "Not At All": 0.1,
        "Not Generally": 0.2,
        "Neutral/Mixed": 0.3,
        "Generally Yes": 0.3,
        "Completely Yes": 0.1,
    }
    assert expected_score(probs, scores) == pytest.approx(0.025 * 2 + 0.15 + 0.225 + 0.1)
    fixture = recorded("five_level_off_topic")
    got = label_probabilities(fixture["logprobs_content"], fixture["labels"])
    assert got is not None
    assert 0.0 < expected_score(got.probabilities, scores) < 0.25


def test_expected_score_refuses_unscored_labels_and_bad_sums():
    with pytest.raises(InputError, match="no score"):
        expected_score({"maybe": 1.0}, {"yes": 1.0})
    with pytest.raises(InputError, match="sum to"):
        expected_score({"yes": 0.5}, {"yes": 1.0})


def as_object(entry: dict[str, Any]) -> SimpleNamespace:
    """A logprobs entry as a client library's response object (attributes, not keys)."""
    listed = [SimpleNamespace(**alt) for alt in entry["top_logprobs"]]
    return SimpleNamespace(**{**entry, "top_logprobs": listed})


def test_every_spelling_of_the_same_tokens_gives_exactly_the_same_probabilities():
    # A parsed JSON reply takes a quicker road (its byte lists joined at once, its floats
    # read as they are); response objects, byte tuples, logprobs as text and tokens with
    # no bytes take the token-by-token one. Both must come to the same floats.
    content = recorded("five_level_off_topic")["logprobs_content"]
    labels = recorded("five_level_off_topic")["labels"]
    expected = label_probabilities(content, labels)
    assert expected is not None
    spellings = [
        [as_object(x) for x in content],
        [{**x, "bytes": tuple(x["bytes"])} for x in content],
        [{**x, "logprob": str(x["logprob"])} for x in content],
        [{k: v for k, v in x.items() if k != "bytes"} for x in content],
        [*[as_object(x) for x in content[:3]], *content[3:]],
    ]
    for spelled in spellings:
        assert label_probabilities(spelled, labels) == expected
        assert label_probabilities(spelled, tuple(labels), answered=expected.label) == expected


def test_the_least_escaped_verdict_wins_over_a_later_escaped_quote_of_one():
    quoted = tok('{"explanation": "it said \\"label\\": \\"irrelevant\\" once", "label": "')
    later = tok('", "note": "\\"label\\": \\"irrelevant\\""}')
    content = [quoted, tok("relevant", -0.2, [("relevant", -0.2), ("ir", -1.8)]), later]
    got = label_probabilities(content, BINARY)
    assert got is not None and got.label == "relevant"
    assert got.confidence == pytest.approx(e(-0.2) / (e(-0.2) + e(-1.8)))
    assert label_probabilities(content, BINARY, answered="maybe") is None
