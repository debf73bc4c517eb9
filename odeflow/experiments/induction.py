"""The induction-head reproduction (Chen, Sheen, Wang, Yang 2024) and its goal table.

The authors' protocol (``ih-paper``: 9000 sequences of length ``L = 100`` per seed,
full-batch gradient descent at learning rate 1 from the code's init) beside the
population flow and the finite-``L`` level, through the library's
:func:`odeflow.training.induction.compare`. The goal (``docs/induction.md``): the
run's ``a(t)`` within :data:`A_TOLERANCE` (relative) and its loss within
:data:`LOSS_TOLERANCE` (absolute, nats) of the flow at :data:`GOAL_TIMES`, and over
every recorded step between the first and the last of them.
``odeflow reproduce induction`` writes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from odeflow.training.induction import beside_flow

#: Times of the goal table (flow time ``t = k``, steps).
GOAL_TIMES = beside_flow.GOAL_TIMES
#: The goal: relative error of ``a`` and absolute error of the loss (nats).
A_TOLERANCE = beside_flow.A_TOLERANCE
LOSS_TOLERANCE = beside_flow.LOSS_TOLERANCE


@dataclass(frozen=True)
class Reproduction:
    """The comparison and its tables.

    Attributes
    ----------
    comparison : Comparison
        Runs, population flow and finite-``L`` level (:func:`beside_flow.compare`).
    table : list of dict
        One row per recorded step (:func:`beside_flow.rows`).
    goal : list of dict
        The goal table at :data:`GOAL_TIMES` reached (:func:`beside_flow.agreement`).
    worst : list of dict
        The goal over its interval, one row per level; empty when the run stops
        before ``GOAL_TIMES[0]`` (:func:`beside_flow.worst_agreement`).
    """

    comparison: object
    table: list
    goal: list
    worst: list


def reproduce(seeds=10, steps: int = 100, progress: bool | None = None) -> Reproduction:
    """The authors' protocol on ``ih-paper`` for ``steps`` steps and ``seeds`` seeds,
    beside the flows, with its tables (:class:`Reproduction`)."""
    comp = beside_flow.compare(seeds=seeds, steps=steps, progress=progress)
    table = beside_flow.rows(comp)
    goal = beside_flow.agreement(comp, GOAL_TIMES, a_tolerance=A_TOLERANCE,
                                 loss_tolerance=LOSS_TOLERANCE)
    reached = any(k >= GOAL_TIMES[0] for k in comp.steps)
    worst = (beside_flow.worst_agreement(comp, GOAL_TIMES[0], GOAL_TIMES[-1],
                                         a_tolerance=A_TOLERANCE,
                                         loss_tolerance=LOSS_TOLERANCE)
             if reached else [])
    return Reproduction(comp, table, goal, worst)
