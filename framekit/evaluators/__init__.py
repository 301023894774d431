"""The built-in evaluators and the base for custom rubrics.

>>> from framekit.evaluators import RetrievalRelevance
>>> RetrievalRelevance().name
'retrieval_relevance'
"""

from framekit.evaluators.base import Evaluator, Verdict
from framekit.evaluators.retrieval import RetrievalRelevance
from framekit.evaluators.rubric import ClassificationEvaluator, RubricEvaluator

__all__ = [
    "ClassificationEvaluator",
    "Evaluator",
    "RetrievalRelevance",
    "RubricEvaluator",
    "Verdict",
]
