"""Testing helpers: the loopback judge simulator and its pytest fixtures.

Names are imported lazily so ``python -m framekit.testing.simulator`` does not import the
module twice (once as a package member, once as ``__main__``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from framekit.testing._assert import assert_meets
    from framekit.testing._sim_answers import expected_choice
    from framekit.testing.simulator import (
        JudgeSimulator,
        NoisyJudge,
        PairwiseJudge,
        SimulatorConfig,
        SimulatorProcess,
        SimulatorStats,
    )

__all__ = [
    "JudgeSimulator",
    "NoisyJudge",
    "PairwiseJudge",
    "SimulatorConfig",
    "SimulatorProcess",
    "SimulatorStats",
    "assert_meets",
    "expected_choice",
]


def __getattr__(name: str) -> Any:
    if name == "assert_meets":
        from framekit.testing._assert import assert_meets

        return assert_meets
    if name == "expected_choice":
        from framekit.testing._sim_answers import expected_choice

        return expected_choice
    if name in __all__:
        from framekit.testing import simulator

        return getattr(simulator, name)
    raise AttributeError(f"module 'framekit.testing' has no attribute {name!r}")
