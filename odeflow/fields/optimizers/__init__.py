"""Optimisers and optimiser flows (``docs/optimisers.md``).

One class per optimiser behind :class:`Optimizer` (:mod:`.base`): plain gradient
steps (:class:`GradientDescent`), heavy-ball :class:`Momentum` and :class:`Adam`,
each with the discrete ``step`` that every trainer and the deterministic recursion
take and the ODE of the augmented state in step time that :class:`OptimizerFlow`
(:mod:`.flow`) integrates around a parameter-level field; the heavy ball's slow
manifold (:mod:`.slow_manifold`) is its first-order phase once the velocity has relaxed.
"""

from odeflow.fields.optimizers.adam import ADAM_STARTS, DEFAULT_EXACT_STEPS, DEFAULT_OFFSET, Adam
from odeflow.fields.optimizers.base import Optimizer
from odeflow.fields.optimizers.flow import (
    AUTO_EXACT_LIMIT,
    OPTIMIZERS,
    OptimizerFlow,
    check_optimizer,
    check_parameter_field,
    optimizer_flow,
)
from odeflow.fields.optimizers.gradient import GradientDescent
from odeflow.fields.optimizers.momentum import MOMENTUM_STARTS, Momentum, warmup_flow_time
from odeflow.fields.optimizers.slow_manifold import (
    SWITCH_TOLERANCE,
    SlowManifold,
    solve_slow_manifold,
)

__all__ = ["ADAM_STARTS", "AUTO_EXACT_LIMIT", "DEFAULT_EXACT_STEPS", "DEFAULT_OFFSET",
           "MOMENTUM_STARTS", "OPTIMIZERS", "SWITCH_TOLERANCE", "Adam", "GradientDescent",
           "Momentum", "Optimizer", "OptimizerFlow", "SlowManifold", "check_optimizer",
           "check_parameter_field", "optimizer_flow", "solve_slow_manifold",
           "warmup_flow_time"]
