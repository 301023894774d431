"""Choose the overlap a supported claim needs with its source (``_claims.MIN_OVERLAP``).

Groundedness counts a claim marked supported only when enough of its content words are
in the response (or the request it answers): a claim the judge brought in from elsewhere
(the documents, say) is not the response's. The examples, from WikiQA dev (questions
with an answer sentence; ``../shared/data/wikiqa-dev.tsv``):

- ``genuine``: clauses of the answer sentence (split at commas, semicolons, "and",
  "which"; four words or more), checked against the question and the answer;
- ``genuine_standalone``: the same clauses when the answer calls its subject "it" and the
  claim names it (the page's title), as a judge writes a claim to stand alone, checked
  against the answer alone: the hardest honest case;
- ``invented``: the other sentences of the same page (what the documents say, not the
  answer), checked against the question and the answer.

For each threshold: the share of genuine claims it would demote and of invented ones it
would let through. Prints the figures and writes ``benchmarks/results/claim_overlap.json``.

    PYTHONPATH=. python scripts/calibrate_claim_overlap.py [--data PATH]
"""

from __future__ import annotations

import argparse
import collections
import csv
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import write_results  # noqa: E402
from framekit.evaluators._claims import MIN_OVERLAP, content_words  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "wikiqa-dev.tsv"
THRESHOLDS = (0.1, 0.2, 0.25, 0.3, 0.34, 0.4, 0.5)


def share(claim: str, source: str) -> float:
    words = content_words(claim)
    return len(words & content_words(source)) / len(words) if words else 1.0


def examples(path: Path) -> dict[str, list[float]]:
    pages: dict[tuple[str, str], list[dict[str, str]]] = collections.defaultdict(list)
    with path.open(encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            pages[(row["QuestionID"], row["DocumentID"])].append(row)
    found: dict[str, list[float]] = {"genuine": [], "genuine_standalone": [], "invented": []}
    for rows in pages.values():
        answers = [r["Sentence"] for r in rows if r["Label"] == "1"]
        if not answers:
            continue
        answer, question = answers[0], rows[0]["Question"]
        clauses = [c for c in re.split(r",|;| and | which ", answer) if len(c.split()) >= 4]
        found["genuine"] += [share(c, f"{question} {answer}") for c in clauses]
        title = rows[0]["DocumentTitle"].split(" (")[0]
        if title.lower() in answer.lower():
            pronoun = re.sub(re.escape(title), "it", answer, flags=re.IGNORECASE)
            found["genuine_standalone"] += [share(c, pronoun) for c in clauses]
        found["invented"] += [
            share(r["Sentence"], f"{question} {answer}")
            for r in rows
            if r["Label"] == "0" and r["Sentence"] != answer and len(r["Sentence"].split()) >= 4
        ]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    data = parser.parse_args().data
    if not data.is_file():
        sys.exit(f"{data} is absent: nothing to calibrate on")
    found = examples(data)
    figures: dict[str, object] = {"data": "wikiqa-dev", "chosen": MIN_OVERLAP}
    for name, values in found.items():
        values.sort()
        figures[name] = {
            "claims": len(values),
            "median": round(values[len(values) // 2], 3),
            "p05": round(values[int(0.05 * (len(values) - 1))], 3),
        }
    figures["thresholds"] = {
        str(t): {
            "genuine_demoted": round(
                sum(v < t for v in found["genuine"]) / len(found["genuine"]), 4
            ),
            "standalone_demoted": round(
                sum(v < t for v in found["genuine_standalone"]) / len(found["genuine_standalone"]),
                4,
            ),
            "invented_passing": round(
                sum(v >= t for v in found["invented"]) / len(found["invented"]), 4
            ),
        }
        for t in THRESHOLDS
    }
    write_results("claim_overlap", figures)


if __name__ == "__main__":
    main()
