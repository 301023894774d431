"""fk.calibrate_cascade with a reference column of the wrong kind (issue 39): an InputError
naming the column and what was expected, before any judge is asked; never "target not
reachable", which blames the judges for the column."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import framekit as fk
from framekit.evaluators import RetrievalRelevance
from framekit.testing import JudgeSimulator, NoisyJudge, SimulatorConfig
from tests.helpers import API_KEY, MAPPING


def _frame(reference: pl.Series) -> pl.DataFrame:
    n = reference.len()
    truth = ["relevant" if i % 2 else "irrelevant" for i in range(n)]
    return pl.DataFrame(
        {
            "question": [f"What is item {i}? @sim(truth={t})" for i, t in enumerate(truth)],
            "docs": [[f"Item {i} is a thing."] for i in range(n)],
            "human": reference,
        }
    )


CASES = {
    "zero_one_integers": (pl.Series([i % 2 for i in range(30)]), "holds Int64"),
    "all_nan": (pl.Series([float("nan")] * 30), "all null or NaN"),
    "all_null": (pl.Series([None] * 30, dtype=pl.String), "all null or NaN"),
    "labels_of_another_rubric": (
        pl.Series(["Completely Yes", "Not At All"] * 15),
        "row 0: 'Completely Yes' is not one of",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_reference_of_the_wrong_kind_names_the_column_and_the_rubric(case, tmp_path):
    reference, problem = CASES[case]
    judges = {"weak": NoisyJudge(0.75, seed=1), "strong": NoisyJudge(0.95, seed=2)}
    with JudgeSimulator(SimulatorConfig(noisy_judges=judges)) as sim:
        stages = [
            fk.Judge(f"openai/{m}", api_base=sim.api_base, api_key=API_KEY)
            for m in ("weak", "strong")
        ]
        with pytest.raises(fk.InputError) as raised:
            fk.calibrate_cascade(
                _frame(reference), fk.Cascade(stages, [0.5]), RetrievalRelevance(), MAPPING,
                reference="human", cache=tmp_path,
            )  # fmt: skip
        requests = sim.stats()["total"]
    message = str(raised.value)
    assert "reference column 'human'" in message and problem in message, message
    assert "'relevant'" in message and "'irrelevant'" in message  # what was expected
    assert "\n" not in message and "not reachable" not in message
    assert requests == 0  # refused before any stage was paid for


def test_a_reference_of_the_rubrics_labels_in_any_case_is_accepted(tmp_path):
    rng = np.random.default_rng(4)
    truth = pl.Series([("RELEVANT", " irrelevant ")[i] for i in rng.integers(0, 2, 30)])
    judges = {"weak": NoisyJudge(0.75, seed=1), "strong": NoisyJudge(0.95, seed=2)}
    with JudgeSimulator(SimulatorConfig(noisy_judges=judges)) as sim:
        stages = [
            fk.Judge(f"openai/{m}", api_base=sim.api_base, api_key=API_KEY)
            for m in ("weak", "strong")
        ]
        found = fk.calibrate_cascade(
            _frame(truth), fk.Cascade(stages, [0.5]), RetrievalRelevance(), MAPPING,
            reference="human", cache=tmp_path,
        )  # fmt: skip
    assert found.calibration.n == 30
