"""Secrets echoed back where issue 39 found them: a key pasted into a header of any name
(User-Agent), a key cut in two by the one-line limit of an error, and an API key given
as the model string (repr, the ``_judge`` column, the run record)."""

from __future__ import annotations

import json

import polars as pl
import pytest

import framekit as fk
from framekit.evaluators import RetrievalRelevance
from framekit.judges.http import status_fault
from tests.helpers import API_KEY, MAPPING, retrieval_frame

#: A second credential, only ever sent inside a header whose name says nothing of it.
PASTED = "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2"


def _everything(out: object) -> str:
    if isinstance(out, pl.DataFrame):
        return json.dumps(out.to_dicts(), default=str)
    return f"{out!r} {out}"


@pytest.mark.usefixtures("transport")
@pytest.mark.parametrize("echo", ["error", "error_500", "answer"])
@pytest.mark.parametrize("header", ["User-Agent", "X-Client", "X-Custom-Auth"])
def test_a_key_in_a_header_of_any_name_is_masked_wherever_it_comes_back(
    simulator_factory, echo, header, capsys
):
    from tests import helpers

    sim = simulator_factory(echo_headers=echo)
    judge = fk.Judge(
        "openai/sim-judge", api_base=sim.api_base, api_key=API_KEY, max_retries=1,
        transport=helpers.TRANSPORT, extra_headers={header: f"my-app/1.0 ({PASTED})"},
    )  # fmt: skip
    try:
        out: object = fk.evaluate_dataframe(
            retrieval_frame(3), [RetrievalRelevance()], MAPPING, judge=judge, cache=False,
            progress=False,
        )  # fmt: skip
    except fk.FramekitError as exc:
        out = exc
    seen = _everything(out) + "".join(capsys.readouterr())
    assert sim.stats()["total"] > 0
    assert "you sent" in seen or echo != "answer"  # the echo did come back
    for secret in (PASTED, PASTED[-8:], API_KEY, API_KEY[-8:]):
        assert secret not in seen, (secret, seen[:500])


def test_an_error_message_cut_to_one_line_never_keeps_half_a_key():
    # The key straddles the 160-character cut: redacting after cutting missed it.
    message = "x" * 130 + f" {API_KEY} was rejected"
    payload = json.dumps({"error": {"message": message}}).encode()
    fault = status_fault(400, {}, payload, [API_KEY])
    assert fault.reason is not None and "xxx" in fault.reason
    assert API_KEY[:20] not in fault.reason and API_KEY[-8:] not in fault.reason


MODEL_KEY = "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34"


def test_an_api_key_given_as_the_model_string_is_masked_in_repr_columns_and_record(
    judge_simulator,
):
    judge = fk.Judge(f"openai/{MODEL_KEY}", api_base=judge_simulator.api_base, api_key=API_KEY)
    assert MODEL_KEY not in repr(judge) and "openai/***" in repr(judge)
    cascade = fk.Cascade([judge, judge], [0.5])
    assert MODEL_KEY not in repr(cascade)
    for j in (judge, cascade):
        out = fk.evaluate_dataframe(
            retrieval_frame(3), [RetrievalRelevance()], MAPPING, judge=j, cache=False,
            progress=False, details=True,
        )  # fmt: skip
        assert out["retrieval_relevance_judge"].str.starts_with("openai/***").all()
        assert MODEL_KEY[-8:] not in _everything(out)
        record = json.dumps(fk.last_run().provenance)
        assert MODEL_KEY[-8:] not in record and "openai/***" in record
    # An ordinary model name is shown as it is.
    plain = fk.Judge("openai/gpt-4o-mini-2024-07-18", api_key=API_KEY)
    assert "gpt-4o-mini-2024-07-18" in repr(plain)
