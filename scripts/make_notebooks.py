"""Write the example notebooks in notebooks/ from the cells below, run, outputs stored.

The notebooks are the artefact users open (in Jupyter or on GitHub, where a notebook
without outputs shows nothing); this script keeps their source reviewable as plain Python
and regenerates them: ``python scripts/make_notebooks.py`` runs each on the offline judge
in a scratch directory and stores its outputs; ``--no-execute`` writes the cells only.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import nbclient
import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parents[1] / "notebooks"

SETUP = """\
%matplotlib inline
import os

import polars as pl

import framekit as fk

# "local" is the offline judge (no API key needed). Set FRAMEKIT_JUDGE to a litellm model
# string, e.g. "openai/gpt-4o-mini", to use an LLM judge instead.
JUDGE = os.environ.get("FRAMEKIT_JUDGE", "local")
CACHE = os.environ.get("FRAMEKIT_CACHE_DIR", ".framekit-cache")
pl.Config.set_fmt_str_lengths(60);  # wider text cells (the ; keeps the cell quiet)"""

SCORE_TRACES = [
    new_markdown_cell(
        "# Score logged traces\n\n"
        "Load an OpenInference span export (as Phoenix or an OpenTelemetry exporter writes "
        "it; OpenTelemetry GenAI `gen_ai.*` spans load the same way), score each "
        "conversation's last turn, inspect the failures with polars, query the results "
        "with DuckDB, and write the scores back as span annotations."
    ),
    new_code_cell(SETUP),
    new_markdown_cell(
        '## Load the export\n\n`level="trace"` gives one row per trace: the last user '
        "turn as `input`, the answer as `output`, earlier turns as `history`, and the "
        "retrieved documents as `context`."
    ),
    new_code_cell(
        "from framekit.data import SAMPLE_TRACES_PATH\n\n"
        'traces = fk.traces.load(SAMPLE_TRACES_PATH, level="trace")\n'
        'traces.select("trace_id", "input", "output", pl.col("history").list.len().alias("turns_before"))'
    ),
    new_markdown_cell("## Score every trace"),
    new_code_cell(
        "from framekit.evaluators import Coherence, ResponseRelevance\n\n"
        "scored = fk.evaluate_dataframe(\n"
        "    traces,\n"
        "    [ResponseRelevance(), Coherence()],\n"
        '    {"input": "input", "output": "output", "history": "history"},\n'
        "    judge=JUDGE,\n"
        "    cache=CACHE,\n"
        "    progress=False,  # a notebook gets the one-line summary below instead of a bar\n"
        ")\n"
        "print(fk.last_run().summary())\n"
        "fk.summarize(scored)"
    ),
    new_markdown_cell(
        "## Inspect what failed or scored low\n\nA failed row has a null score and a "
        "one-line `_error` saying why; it is never averaged as 0."
    ),
    new_code_cell(
        'failed = scored.filter(pl.col("response_relevance_error").is_not_null())\n'
        'failed.select("trace_id", "input", "response_relevance_error")'
    ),
    new_markdown_cell(
        "Of the rows that were scored, the lowest first. With the offline judge (the "
        "default here) a score is the embedding similarity of question and answer: a proxy "
        "for relevance that cannot check facts, so a fluent wrong answer on the right topic "
        "still scores high. Set `FRAMEKIT_JUDGE` to an LLM for verdicts."
    ),
    new_code_cell(
        'scored.filter(pl.col("response_relevance_error").is_null()).sort("response_relevance_score").select(\n'
        '    "input", "output", "response_relevance_label", "response_relevance_score"\n'
        ").head(5)"
    ),
    new_markdown_cell(
        '## Score each retrieval step\n\n`level="span"` gives one row per retriever, '
        "reranker or tool span, with the user's request as `input`."
    ),
    new_code_cell(
        "from framekit.evaluators import RetrievalRelevance\n\n"
        'spans = fk.traces.load(SAMPLE_TRACES_PATH, level="span")\n'
        "retrieval = fk.evaluate_dataframe(\n"
        '    spans, [RetrievalRelevance()], {"input": "input", "context": "context"},\n'
        "    judge=JUDGE, cache=CACHE, progress=False,\n"
        ")\n"
        'retrieval.select("span_kind", "name", "retrieval_relevance_label", "retrieval_relevance_score")'
    ),
    new_markdown_cell(
        "## Query with DuckDB\n\nHand DuckDB the Arrow data (no copy) and join scores back "
        "to spans by `trace_id`."
    ),
    new_code_cell(
        "import duckdb\n\n"
        "con = duckdb.connect()\n"
        'con.register("traces_scored", scored.to_arrow())\n'
        'con.register("retrieval_scored", retrieval.to_arrow())\n'
        "con.sql(\n"
        '    """\n'
        "    select t.trace_id,\n"
        "           t.response_relevance_score as answer_relevance,\n"
        "           avg(r.retrieval_relevance_score) as mean_retrieval_relevance,\n"
        "           count(r.span_id) as retrieval_steps\n"
        "    from traces_scored t left join retrieval_scored r using (trace_id)\n"
        "    group by all\n"
        "    order by answer_relevance nulls first\n"
        '    """\n'
        ").pl()"
    ),
    new_markdown_cell(
        "## Write the scores back where the traces live\n\n"
        "`fk.traces.to_annotations` gives Phoenix's span-annotation shape, one row per "
        "(span, evaluator); failed rows are left out and counted. With a Phoenix server "
        "running, `fk.traces.log_to_phoenix(scored, endpoint=...)` sends them (in chunks, "
        "with retries) and they show next to each span."
    ),
    new_code_cell(
        "import warnings\n\n"
        "# Failed rows are left out with a warning; show it as a note of this cell.\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        '    warnings.simplefilter("always")\n'
        "    annotations = fk.traces.to_annotations(scored)\n"
        'print("\\n".join(f"note: {w.message}" for w in caught))\n'
        'annotations.select("span_id", "name", "label", "score").head(4)'
    ),
    new_markdown_cell(
        "For OpenTelemetry back ends, `to_otel_events` writes one `gen_ai.evaluation.result` "
        "event per score, parented to its span (`traceId`, `spanId`), as OTLP/JSON; with "
        "`endpoint=` it exports them with the OpenTelemetry SDK instead."
    ),
    new_code_cell(
        "import json\n\n"
        'result = fk.traces.to_otel_events(retrieval, "evaluation_events.jsonl")\n'
        "print(result)\n"
        'request = json.loads(open("evaluation_events.jsonl").readline())\n'
        'event = request["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]\n'
        '{"eventName": event["eventName"], "spanId": event["spanId"],\n'
        ' **{a["key"]: next(iter(a["value"].values())) for a in event["attributes"]}}'
    ),
]

COMPARE_RETRIEVAL = [
    new_markdown_cell(
        "# Compare two retrieval strategies\n\n"
        "The bundled sample answers 100 questions twice, once with a `bm25` retriever and "
        "once with a `dense` one. Score both, then ask whether the difference is real."
    ),
    new_code_cell(SETUP),
    new_code_cell(
        "from framekit.data import load_sample\n\n"
        "sample = load_sample()\n"
        'sample.group_by("strategy").len()'
    ),
    new_code_cell(
        "from framekit.evaluators import ContextRelevance, RetrievalRelevance\n\n"
        "scored = fk.evaluate_dataframe(\n"
        "    sample,\n"
        "    [RetrievalRelevance(), ContextRelevance()],\n"
        '    {"input": "question", "context": "documents"},\n'
        "    judge=JUDGE,\n"
        "    cache=CACHE,\n"
        "    progress=False,\n"
        ")\n"
        "print(fk.last_run().summary())\n"
        'fk.summarize(scored, by="strategy")'
    ),
    new_markdown_cell(
        "With the offline judge these scores are embedding similarities between question "
        "and documents, a proxy for relevance; the comparison below says which retriever "
        "finds *closer* documents, not which one is right."
    ),
    new_markdown_cell(
        "## Paired comparison\n\nThe same question appears under both strategies, so "
        '`on="question_id"` pairs the rows and tests the per-question differences.'
    ),
    new_code_cell(
        'comparison = fk.compare(scored, by="strategy", on="question_id")\n'
        "print(fk.report.describe_comparison(comparison))\n"
        'comparison.select("evaluator", "group_a", "group_b", "diff", "diff_ci_low", "diff_ci_high", "p_value", "winner")'
    ),
    new_markdown_cell(
        "## Plot\n\n`fk.plot` returns matplotlib Figures; `display` shows them inline and "
        "`fk.plot.save` writes a PNG."
    ),
    new_code_cell(
        "from IPython.display import display\n\n"
        'display(fk.plot.means(scored, by="strategy"))\n'
        'display(fk.plot.distributions(scored, by="strategy"))'
    ),
    new_markdown_cell(
        "## The same from the shell, and an HTML report\n\n`fk.io.write_parquet` keeps the "
        "run record (judge, evaluators, mapping) in the file; `framekit report` reads it "
        "back and writes one self-contained HTML page with the rows to look at."
    ),
    new_code_cell(
        "from framekit.cli import main as framekit_cli\n\n"
        'fk.io.write_parquet(scored, "scored.parquet")\n'
        'framekit_cli(["report", "scored.parquet", "--by", "strategy", "--on", "question_id",\n'
        '              "--html", "report.html"])'
    ),
]

JUDGE_AGREEMENT = [
    new_markdown_cell(
        "# How far can you trust the judge?\n\n"
        "Score a labelled sample, measure how the judge agrees with people (kappa, weighted "
        "kappa, Spearman, with bootstrap intervals), calibrate the pass mark on the labels, "
        "and turn the scores into a pass/fail gate for CI."
    ),
    new_code_cell(SETUP),
    new_markdown_cell(
        "## A labelled sample\n\n60 answers from the bundled sample, with labels standing in "
        "for an annotator's: `human_relevance` on ResponseRelevance's five levels, "
        "`human_retrieval` on RetrievalRelevance's two, `human_coherent` as a boolean."
    ),
    new_code_cell(
        "from framekit.data import load_labelled_sample\n\n"
        "labelled = load_labelled_sample()\n"
        'labelled.group_by("human_relevance").len().sort("len", descending=True)'
    ),
    new_markdown_cell("## Score it"),
    new_code_cell(
        "from framekit.evaluators import Coherence, ResponseRelevance, RetrievalRelevance\n\n"
        "evaluators = [ResponseRelevance(), RetrievalRelevance(), Coherence()]\n"
        'mapping = {"input": "question", "output": "answer", "context": "documents"}\n'
        "scored = fk.evaluate_dataframe(labelled, evaluators, mapping, judge=JUDGE, cache=CACHE,\n"
        "                                progress=False)\n"
        'scored.select("human_relevance", "response_relevance_label", "human_retrieval", '
        '"retrieval_relevance_label").head()'
    ),
    new_markdown_cell(
        "## Agreement with people\n\nOne row per evaluator. Labels are read on the "
        "evaluator's rubric, the labels the judge never chose included (the run remembers "
        "them; `rubric=` adds labels of your own); a boolean human column is compared with "
        "`_passed`. Every figure has a 95 % bootstrap interval."
    ),
    new_code_cell(
        "agreement = pl.concat(\n"
        "    [\n"
        '        fk.agreement(scored, human="human_relevance", evaluators="response_relevance"),\n'
        '        fk.agreement(scored, human="human_retrieval", evaluators="retrieval_relevance"),\n'
        '        fk.agreement(scored, human="human_coherent", evaluators="coherence"),\n'
        "    ],\n"
        '    how="diagonal",\n'
        ")\n"
        'agreement.select("evaluator", "n", "accuracy", "kappa", "kappa_ci_low", "kappa_ci_high",\n'
        '                 "weighted_kappa", "spearman", "spearman_ci_low", "spearman_ci_high")'
    ),
    new_markdown_cell(
        "The confusion matrix shows *how* the judge disagrees; the calibration panel shows "
        "what people said about the rows at each judge score (on the diagonal: calibrated)."
    ),
    new_code_cell('fk.plot.agreement(scored, "human_relevance", "response_relevance")'),
    new_markdown_cell(
        "## Calibrate the pass mark\n\nPeople count the upper half of the rubric as a pass. "
        "`fk.calibrate` tries every score as a threshold and keeps the best F1 (or the most "
        'recall at a precision you name: `target=("precision", 0.9)`).'
    ),
    new_code_cell(
        'calibration = fk.calibrate(scored, human="human_relevance", evaluator="response_relevance")\n'
        "print(calibration)\n"
        "calibration.table"
    ),
    new_code_cell(
        "# The evaluator takes the calibrated threshold; re-scoring is answered from the cache.\n"
        "calibrated = fk.evaluate_dataframe(\n"
        "    labelled, [ResponseRelevance(threshold=calibration.threshold)], mapping,\n"
        "    judge=JUDGE, cache=CACHE, progress=False,\n"
        ")\n"
        'calibrated["response_relevance_passed"].mean(), labelled["human_relevance"].is_in(\n'
        '    ["Completely Yes", "Generally Yes", "Neutral/Mixed"]).mean()'
    ),
    new_markdown_cell(
        "## Gate\n\n`fk.gate` turns a scored frame into one decision; a failed row counts "
        "against the pass rate. In CI the same check is a command that exits 1 below the "
        "bar: `framekit gate scored.parquet --min-pass-rate response_relevance=0.5`."
    ),
    new_code_cell(
        'result = fk.gate(calibrated, min_pass_rate={"response_relevance": 0.5})\n'
        "print(result.describe())\n"
        "result.table"
    ),
    new_code_cell(
        "from framekit.cli import main as framekit_cli\n\n"
        'calibrated.write_parquet("scored.parquet")\n'
        'exit_code = framekit_cli(["gate", "scored.parquet", "--min-pass-rate", "response_relevance=0.9"])\n'
        'print("exit code", exit_code)'
    ),
]

CASCADE = [
    new_markdown_cell(
        "# Spend the strong judge only where the cheap one is unsure\n\n"
        "Score the bundled sample with the free offline judge, send only the rows it is "
        "unsure of to a stronger judge (`fk.Cascade`), choose the threshold with a "
        "guarantee on agreement (`fk.calibrate_cascade`), price it before running "
        "(the dry run), estimate a pass rate from a few human labels (`fk.estimate`), and "
        "draw what each threshold costs and buys."
    ),
    new_code_cell(SETUP),
    new_markdown_cell(
        "## A stand-in for the strong judge\n\nNo API key here, so the test simulator plays "
        "the LLM: an OpenAI-compatible server on 127.0.0.1 whose *noisy judge* `strong` is "
        "right 95 % of the time and reports a calibrated probability through its logprobs, "
        "as a real model does. It judges against a truth it reads from a marker in the "
        "question: the sample's `retrieval_hit` (whether retrieval found the right "
        'document). With a real key, put `fk.Judge("openai/gpt-4o-mini")` in its place.'
    ),
    new_code_cell(
        "from framekit.data import load_sample\n"
        "from framekit.evaluators import RetrievalRelevance\n"
        "from framekit.testing import JudgeSimulator, NoisyJudge, SimulatorConfig\n\n"
        'sim = JudgeSimulator(SimulatorConfig(noisy_judges={"strong": NoisyJudge(0.95)})).start()\n'
        'strong = fk.Judge("openai/strong", api_base=sim.api_base, api_key="sk-simulated")\n\n'
        "sample = load_sample().with_columns(\n"
        '    truth=pl.when("retrieval_hit").then(pl.lit("relevant")).otherwise(pl.lit("irrelevant")),\n'
        ")\n"
        'sample = sample.with_columns(question=pl.format("{} @sim(truth={})", "question", "truth"))\n'
        'mapping = {"input": "question", "context": "documents"}\n'
        "evaluator = RetrievalRelevance()"
    ),
    new_markdown_cell(
        "## The offline judge, and how sure it is\n\n`_confidence` is the probability that "
        "its verdict is right, from a map fitted on WikiQA dev (Platt scaling). Per band of "
        "confidence, how often it is right about this sample:"
    ),
    new_code_cell(
        'offline = fk.evaluate_dataframe(sample, [evaluator], mapping, judge="local", cache=CACHE,\n'
        "                                progress=False)\n"
        "offline.group_by(\n"
        '    confidence=(pl.col("retrieval_relevance_confidence") * 10).floor() / 10,\n'
        '    label="retrieval_relevance_label",\n'
        ').agg(rows=pl.len(), right=(pl.col("retrieval_relevance_label") == pl.col("truth")).mean()'
        ').sort("confidence", "label")'
    ),
    new_markdown_cell(
        'On this sample it is backwards: sure of its "irrelevant" verdicts and wrong on '
        'about half of them, unsure of its "relevant" ones and right on all. The map '
        "carries WikiQA's base rate (5 % of its pairs are relevant), while half of this "
        "sample's retrievals found the right document. A confidence is only as good as the "
        "data it was fitted on, which is why the threshold below is chosen on labelled "
        "rows of *this* data rather than guessed."
    ),
    new_markdown_cell(
        "## A cascade\n\nEvery row goes to the offline judge; a row whose confidence there "
        "is below 0.8 goes on to the strong judge, whose verdict stands. `_judge` "
        "(with `details=True`) says which judge decided each row."
    ),
    new_code_cell(
        'cascade = fk.Cascade(["local", strong], escalate_below=[0.8])\n'
        "scored = fk.evaluate_dataframe(sample, [evaluator], mapping, judge=cascade, cache=CACHE,\n"
        "                               details=True, progress=False)\n"
        "print(fk.last_run().summary())\n"
        'print("strong judge requests:", sim.stats()["by_model"].get("strong", 0), "for", sample.height, "rows")\n'
        'scored.group_by("retrieval_relevance_judge").agg(\n'
        '    rows=pl.len(), right=(pl.col("retrieval_relevance_label") == pl.col("truth")).mean()\n'
        ")"
    ),
    new_markdown_cell(
        "A guessed threshold of 0.8 trusts the overconfident verdicts: the rows the offline "
        "judge kept are right about half the time."
    ),
    new_markdown_cell(
        "## Choose the threshold with a guarantee\n\n`fk.calibrate_cascade` scores labelled "
        "rows through every stage (answers are cached: the rows above cost nothing again) "
        "and picks the cheapest threshold under which agreement with the reference is at "
        "least the target with probability at least 1 - risk (fixed-sequence testing with "
        "an exact binomial bound). Here the reference is the strong judge itself: how "
        "often may the cascade differ from what the strong judge alone would say?"
    ),
    new_code_cell(
        "found = fk.calibrate_cascade(sample, cascade, evaluator, mapping, target_agreement=0.9,\n"
        "                             risk=0.1, cache=CACHE)\n"
        "print(found.calibration.reason)\n"
        "found.cascade"
    ),
    new_markdown_cell(
        "The calibration trusts the offline judge only where it is nearly certain and sends "
        "the rest on: agreement with the strong judge at a fraction of its requests."
    ),
    new_markdown_cell(
        "The dry run prices a calibrated cascade at the share of rows expected to reach "
        "each stage (an uncalibrated one at every row, every stage: an upper bound)."
    ),
    new_code_cell(
        'sample.write_parquet("sample.parquet")\n'
        'plan = fk.io.plan_parquet("sample.parquet", [evaluator], mapping, judge=found.cascade,\n'
        "                          cache=False)\n"
        "print(plan.describe())"
    ),
    new_markdown_cell(
        "## What each threshold costs and buys\n\nEvery candidate the calibration tested: "
        "the share of rows sent to the strong judge against the agreement on the labelled "
        "rows. The chosen threshold is the cheapest whose lower bound clears the target."
    ),
    new_code_cell(
        "import matplotlib.pyplot as plt\n\n"
        "table = found.calibration.table.with_columns(\n"
        '    escalated=1 - pl.col("decided_share").list.first(),\n'
        '    threshold=pl.col("escalate_below").list.first(),\n'
        ').filter(pl.col("threshold").is_finite())\n'
        "fig, ax = plt.subplots(figsize=(6, 3.5))\n"
        'ax.plot(table["escalated"], table["agreement"], ".-", color="tab:blue", label="candidates")\n'
        'chosen = table.filter(pl.col("threshold") == found.cascade.escalate_below[0])\n'
        'ax.scatter(chosen["escalated"], chosen["agreement"], s=80, color="tab:red", zorder=3,\n'
        '           label=f"chosen: escalate below {found.cascade.escalate_below[0]:g}")\n'
        'ax.axhline(0.9, color="grey", linestyle="--", label="target agreement")\n'
        'ax.set(xlabel="share of rows sent to the strong judge", ylabel="agreement with the strong judge")\n'
        'ax.legend(loc="lower right")\n'
        "plt.close(fig)\n"
        "fig"
    ),
    new_markdown_cell(
        "## A pass rate from a few labels\n\nSay people labelled 40 random rows "
        "(`human`, null elsewhere). `fk.estimate` combines them with every judged row "
        "(prediction-powered inference): a valid 95 % interval, narrower than the 40 "
        "labels alone give when the judge is good, next to the judge-only figure."
    ),
    new_code_cell(
        "labelled_rows = pl.int_range(pl.len()).shuffle(seed=7) < 40\n"
        'with_labels = scored.with_columns(human=pl.when(labelled_rows).then(pl.col("retrieval_hit")))\n'
        'fk.estimate(with_labels, human="human", evaluator="retrieval_relevance")'
    ),
    new_code_cell("sim.stop()  # the simulator's server thread"),
]

PAIRWISE = [
    new_markdown_cell(
        "# Strategies head to head\n\n"
        "The bundled sample answers 100 questions twice, with a `bm25` and a `dense` "
        "retriever. `02_compare_retrieval` scores each answer alone and tests the paired "
        "differences; here a judge is shown the two answers to the same question side by "
        "side and asked which is better, in both orders (`fk.evaluate_pairwise`), and the "
        "verdicts are ranked with intervals (`fk.rank`). Both views, next to each other."
    ),
    new_code_cell(SETUP),
    new_code_cell(
        "from framekit.data import load_sample\n\n"
        "sample = load_sample()\n"
        'mapping = {"input": "question", "output": "answer", "context": "documents"}\n'
        'sample.group_by("strategy").len()'
    ),
    new_markdown_cell(
        "## Pointwise: each answer scored alone, then compared\n\n"
        "`ResponseRelevance` on its five-level scale, then `fk.compare` pairs the rows by "
        "question."
    ),
    new_code_cell(
        "from framekit.evaluators import ResponseRelevance\n\n"
        "scored = fk.evaluate_dataframe(sample, [ResponseRelevance()], mapping, judge=JUDGE,\n"
        "                               cache=CACHE, progress=False)\n"
        'pointwise = fk.compare(scored, by="strategy", on="question_id")\n'
        'pointwise.select("group_a", "group_b", "mean_a", "mean_b", "diff", "diff_ci_low", "diff_ci_high", "winner")'
    ),
    new_markdown_cell(
        "## Pairwise: which of the two answers is better?\n\n"
        "`Preference()` shows the question and both answers (each with its own documents), "
        "asks for the reasoning first, then `A`, `B` or `tie`. Every pair is asked twice, "
        "each answer shown first once; when the two verdicts disagree the pair is a tie. "
        "With the offline judge a verdict compares the two answers' embedding similarity "
        "to the question (a proxy; near-equal is a tie), and it has no position bias."
    ),
    new_code_cell(
        "from framekit.evaluators import Preference\n\n"
        'pairs = fk.evaluate_pairwise(sample, [Preference()], mapping, by="strategy",\n'
        '                             on="question_id", judge=JUDGE, cache=CACHE, progress=False)\n'
        "print(fk.last_run().summary())\n"
        'pairs.select("question_id", "a", "b", "preference_winner", "preference_ab", "preference_ba",\n'
        '             "preference_consistent").head()'
    ),
    new_code_cell(
        'ranked = fk.rank(pairs, by="strategy")\n'
        'ranked.select("strategy", "wins", "ties", "losses", "win_rate", "strength",\n'
        '              "strength_ci_low", "strength_ci_high", "rank")'
    ),
    new_markdown_cell(
        "## A judge with a position bias\n\n"
        "No API key here, so the test simulator plays an LLM judge: an OpenAI-compatible "
        "server on 127.0.0.1 whose pairwise judge prefers the answer shown first on 30 % "
        "of its verdicts, whatever the answers, and otherwise picks the better one by a "
        "hidden quality (here: the sample's `expected_quality`, written into each answer "
        'as a marker). With a real key, put `fk.Judge("openai/gpt-4o-mini")` in its place.'
    ),
    new_code_cell(
        "from framekit.testing import JudgeSimulator, PairwiseJudge, SimulatorConfig\n\n"
        'sim = JudgeSimulator(SimulatorConfig(pairwise_judges={"biased": PairwiseJudge(bias=0.3)})).start()\n'
        'biased = fk.Judge("openai/biased", api_base=sim.api_base, api_key="sk-simulated")\n'
        'quality = {"good": 0.8, "noncommittal": 0.4, "incoherent": 0.3, "off_topic": 0.1}\n'
        "marked = sample.with_columns(\n"
        '    answer=pl.format("{} @sim(quality={})", "answer",\n'
        '                     pl.col("expected_quality").replace_strict(quality, return_dtype=pl.String))\n'
        ")\n"
        'judged = fk.evaluate_pairwise(marked, [Preference()], mapping, by="strategy",\n'
        '                              on="question_id", judge=biased, cache=CACHE, progress=False)\n'
        "print(fk.last_run().summary())\n"
        'print("requests:", sim.stats()["chat"], "for", judged.height, "pairs")\n'
        'fk.rank(judged, by="strategy").select("strategy", "wins", "ties", "losses", "win_rate",\n'
        '                                     "strength_ci_low", "strength_ci_high", "rank")'
    ),
    new_markdown_cell(
        "Asked once, with `bm25` always shown first, the same judge would have credited "
        "`bm25` with every verdict its position bias gave it. Both orders turn those into "
        "ties:"
    ),
    new_code_cell(
        "one_order = judged.select(\n"
        '    bm25_first_wins=(pl.col("preference_ab") == "A").mean(),\n'
        '    bm25_wins_both_orders=(pl.col("preference_winner") == "bm25").mean(),\n'
        '    flipped=(~pl.col("preference_consistent")).sum(),\n'
        ")\n"
        "one_order"
    ),
    new_markdown_cell(
        "## Both views\n\nThe pointwise difference (`dense` minus `bm25` on a [0, 1] scale) "
        "and the pairwise win rate of `dense`, each with its 95 % interval."
    ),
    new_code_cell(
        "row = pointwise.row(0, named=True)\n"
        'dense = ranked.filter(pl.col("strategy") == "dense").row(0, named=True)\n'
        "pl.DataFrame({\n"
        '    "view": ["pointwise: mean difference", "pairwise: dense win rate"],\n'
        '    "estimate": [row["diff"], dense["win_rate"]],\n'
        '    "ci_low": [row["diff_ci_low"], dense["win_rate_ci_low"]],\n'
        '    "ci_high": [row["diff_ci_high"], dense["win_rate_ci_high"]],\n'
        '    "says": [row["winner"], "dense" if dense["rank"] == 1 and dense["win_rate"] > 0.5 else None],\n'
        "})"
    ),
    new_markdown_cell(
        "## The head-to-head page\n\nThe win matrix, the strengths with intervals, the "
        "position bias and the pairs the judge flipped on, with both answers side by side."
    ),
    new_code_cell(
        "from framekit.analysis import write_pairwise_report\n\n"
        'write_pairwise_report(judged, "pairs.html", data=marked, provenance=fk.last_run().provenance)'
    ),
    new_code_cell("sim.stop()  # the simulator's server thread"),
]


def write(name: str, cells: list[nbformat.NotebookNode]) -> Path:
    notebook = new_notebook(cells=cells)
    for i, cell in enumerate(notebook.cells):
        cell.id = f"cell-{i:02d}"  # stable ids: regenerating gives the same file
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path = ROOT / name
    ROOT.mkdir(exist_ok=True)
    nbformat.write(notebook, path)
    return path


def execute(path: Path) -> None:
    """Run the notebook on the offline judge in a scratch directory; store its outputs."""
    notebook = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory() as scratch:
        env = dict(os.environ)
        os.environ["FRAMEKIT_CACHE_DIR"] = str(Path(scratch) / "cache")
        os.environ.pop("FRAMEKIT_JUDGE", None)
        try:
            nbclient.NotebookClient(
                notebook,
                timeout=300,
                kernel_name="python3",
                resources={"metadata": {"path": scratch}},
            ).execute()
        finally:
            os.environ.clear()
            os.environ.update(env)
    nbformat.write(notebook, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-execute", action="store_true", help="write the cells only")
    args = parser.parse_args()
    for name, cells in (
        ("01_score_traces.ipynb", SCORE_TRACES),
        ("02_compare_retrieval.ipynb", COMPARE_RETRIEVAL),
        ("03_judge_agreement.ipynb", JUDGE_AGREEMENT),
        ("04_cascade.ipynb", CASCADE),
        ("05_pairwise.ipynb", PAIRWISE),
    ):
        path = write(name, cells)
        if not args.no_execute:
            execute(path)
        print(path)


if __name__ == "__main__":
    main()
