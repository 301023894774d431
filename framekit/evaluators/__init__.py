"""The built-in evaluators and the base for custom rubrics.

>>> from framekit.evaluators import RetrievalRelevance
>>> RetrievalRelevance().name
'retrieval_relevance'
"""

from framekit.evaluators.answer_relevancy import AnswerRelevancy
from framekit.evaluators.base import Evaluator, Verdict
from framekit.evaluators.conversation import Coherence, ResponseRelevance
from framekit.evaluators.groundedness import ContextRecall, Groundedness
from framekit.evaluators.pairwise import Preference
from framekit.evaluators.retrieval import ContextRelevance, RetrievalRelevance
from framekit.evaluators.rubric import ClassificationEvaluator, RubricEvaluator

__all__ = [
    "AnswerRelevancy",
    "ClassificationEvaluator",
    "Coherence",
    "ContextRecall",
    "ContextRelevance",
    "Evaluator",
    "Groundedness",
    "Preference",
    "ResponseRelevance",
    "RetrievalRelevance",
    "RubricEvaluator",
    "Verdict",
]
