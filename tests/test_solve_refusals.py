"""The combinations of solve options that docs/api.md lists as refused are refused by name."""

from __future__ import annotations

import pytest

import odeflow
from odeflow.errors import ValidationError
from odeflow.fields.induction import Schedule

SCAN_SNAP = odeflow.DataModel.preset("syn-small")
INDUCTION = odeflow.InductionData.preset("ih-point")


def refusals():
    staged = Schedule.staged(1, 1, 1)
    return [
        ("events", lambda: odeflow.solve(INDUCTION, schedule=staged, events=[lambda t, y: t])),
        ("rates", lambda: odeflow.solve(INDUCTION, schedule=staged, rates=1.0)),
        ("t_span", lambda: odeflow.solve(INDUCTION, schedule=staged, t_span=(0.0, 2.0))),
        ("dense_output", lambda: odeflow.solve(INDUCTION, schedule=staged, dense_output=True,
                                               optimizer=odeflow.Momentum(0.9))),
        ("schedule[0].duration", lambda: odeflow.solve(
            INDUCTION, schedule=Schedule.staged(1.5, 1, 1), optimizer=odeflow.Momentum(0.9))),
        ("schedule", lambda: odeflow.solve(SCAN_SNAP, schedule=staged)),
        ("optimizer", lambda: odeflow.solve(SCAN_SNAP, flow="reduced",
                                            optimizer=odeflow.Momentum(0.9), t_span=(0, 2))),
        ("t_span", lambda: odeflow.solve(SCAN_SNAP, optimizer=odeflow.Momentum(0.9),
                                         t_span=(0.5, 2.0))),
        ("events", lambda: odeflow.solve(SCAN_SNAP, t_span=(0, 2), events=[lambda t, y: t],
                                         optimizer=odeflow.Momentum(0.9, slow_manifold=1e-6))),
        ("dense_output", lambda: odeflow.solve(
            SCAN_SNAP, t_span=(0, 2), dense_output=True,
            optimizer=odeflow.Momentum(0.9, slow_manifold=1e-6))),
        ("events", lambda: odeflow.solve(INDUCTION, events=[odeflow.snap_transition()],
                                         t_span=(0, 1))),
        ("method", lambda: odeflow.solve_ensemble(SCAN_SNAP, [(None, None)], method="Radau",
                                                  t_span=(0, 1))),
        ("members", lambda: odeflow.solve_ensemble(SCAN_SNAP, [(None, None)], flow="reduced",
                                                   t_span=(0, 1))),
        ("params[0]", lambda: odeflow.solve_batch(INDUCTION, [(1.0, 1.0)], flow="population",
                                             t_span=(0, 1))),
    ]


@pytest.mark.parametrize("field, call", refusals(),
                         ids=[f"{i}-{f}" for i, (f, _) in enumerate(refusals())])
def test_refused_combinations_name_the_option(field, call):
    with pytest.raises(ValidationError) as err:
        call()
    assert err.value.field == field
