"""The offline judge's calibrated confidence: the shipped map, its figures, the benchmark."""

from __future__ import annotations

import math

import pytest

from benchmarks import bench_trust_offline
from framekit.judges.local.confidence import (
    load_confidence,
    relevant_probability,
    verdict_confidence,
)
from framekit.judges.local.embedder import MODEL_ID

SIGNALS = [-0.2, 0.0, 0.2, 0.4, 0.5633, 0.7, 0.9, 1.0]


def test_a_pass_and_a_fail_on_the_same_signal_are_complements():
    for s in SIGNALS:
        assert verdict_confidence(s, True) + verdict_confidence(s, False) == pytest.approx(1.0)
        assert 0.0 <= verdict_confidence(s, True) <= 1.0


def test_relevance_rises_with_the_cosine():
    values = [relevant_probability(s) for s in SIGNALS]
    assert values == sorted(values) and values[0] < values[-1]


def test_the_shipped_map_is_measured_better_than_the_cut_points_own_reading():
    fit = load_confidence()
    assert fit["model_id"] == MODEL_ID
    assert fit["method"] in ("isotonic", "platt")
    assert fit["pairs"] == 2733
    assert set(fit["evaluators"]) == {
        "retrieval_relevance",
        "context_relevance",
        "response_relevance",
    }
    for name, figures in fit["evaluators"].items():
        assert figures["ece_after_out_of_fold"] < figures["ece_before"] / 4, name
        assert figures["brier_after_out_of_fold"] < figures["brier_before"], name
    chosen = fit["choice"]["mean_brier_out_of_fold"]
    assert chosen[fit["method"]] == min(chosen.values())


def test_a_prior_moves_the_fit_to_another_base_rate_by_the_odds():
    base = load_confidence()["positive_rate"]
    for s in SIGNALS:
        p = relevant_probability(s)
        assert relevant_probability(s, prior=base) == pytest.approx(p)
        shifted = relevant_probability(s, prior=0.5)
        odds = p / (1 - p) * (0.5 / 0.5) / (base / (1 - base))
        assert shifted == pytest.approx(odds / (1 + odds))
        assert shifted > p


def test_an_isotonic_map_is_read_by_interpolating_its_knots():
    fit = {
        "method": "isotonic",
        "isotonic": {"x": [0.0, 0.4, 0.6, 1.0], "y": [0.0, 0.0, 0.5, 0.5]},
        "positive_rate": 0.1,
    }
    assert relevant_probability(0.2, fit=fit) == 0.0
    assert relevant_probability(0.5, fit=fit) == pytest.approx(0.25)
    assert relevant_probability(2.0, fit=fit) == 0.5
    assert verdict_confidence(0.2, False, fit=fit) == 1.0


def test_bad_signals_and_priors_are_refused():
    with pytest.raises(ValueError, match="NaN"):
        relevant_probability(math.nan)
    with pytest.raises(ValueError, match="prior"):
        relevant_probability(0.5, prior=1.0)


def test_the_benchmark_skips_cleanly_without_the_shared_data(tmp_path, capsys):
    results = bench_trust_offline.ROOT / "benchmarks" / "results" / "trust_offline.json"
    before = results.stat().st_mtime_ns if results.exists() else None
    assert bench_trust_offline.main(["--data", str(tmp_path / "absent.tsv")]) == 0
    assert "nothing to measure" in capsys.readouterr().out
    assert (results.stat().st_mtime_ns if results.exists() else None) == before
