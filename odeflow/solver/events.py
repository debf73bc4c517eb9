"""Ready events for :func:`odeflow.solve` (passed on to ``solve_ivp``'s ``events``).

A plain event is what ``solve_ivp`` takes: a function ``event(t, y)`` of the raw
flat state, with optional attributes ``terminal`` and ``direction``. The
events here are *field events*: they know what the state means only once the
solver binds them to the vector field of the chosen level, so they work the
same on every level that has a decoder margin (exact, finite_t, reduced, snap).

- :func:`snap_transition`: the snap transition ``t_0`` where the speed-control
  coefficient ``gamma = h (M-1) / (exp(h) + M - 1)`` (Theorem 1b, Eqn 9)
  is largest, i.e. ``(h - 1) exp(h) = M - 1``.
- :func:`margin_crossover`: CF2's crossover ``exp(h) = M - 1`` (``alpha_nn =
  1/2``), the ``t_0`` of :func:`odeflow.analysis.diagnostics.transition_time`
  and :func:`odeflow.closed_forms.transition_time`.

Both are read off the margin ``h_n`` of one class (Level R and the Sec. 6
system carry it; Level E and Level T read it off the decoder, see
``ExactFlow.margins``).
"""

from __future__ import annotations

import math

import numpy as np

from odeflow.errors import ValidationError
from odeflow.fields.base import Field


class FieldEvent:
    """An event defined on a level's quantities rather than on the raw state.

    Parameters
    ----------
    name : str
        Name under which the result lists it (``Trajectory.event_names``).
    terminal : bool
        Stop the integration when it fires (as in ``solve_ivp``).
    direction : float
        ``solve_ivp``'s direction: +1 fires on an increasing crossing only.
    """

    def __init__(self, name: str, terminal: bool = False, direction: float = 1.0):
        if not isinstance(terminal, bool):
            raise ValidationError("terminal", f"must be True or False, got {terminal!r}")
        self.name = name
        self.terminal = terminal
        self.direction = float(direction)

    def prepare(self, field):
        """For ``field``, the function ``f(y)`` of the raw state whose zero is the event."""
        raise NotImplementedError

    def bind(self, field):
        """A ``solve_ivp`` event function ``event(t, y)`` for ``field``."""
        value = self.prepare(field)

        def event(t, y):
            return value(y)

        event.terminal = self.terminal
        event.direction = self.direction
        event.__name__ = self.name
        return event

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, terminal={self.terminal})"


class _MarginEvent(FieldEvent):
    """An event on the margin ``h_n`` of one class."""

    def __init__(self, name, next_token=None, terminal=False):
        super().__init__(name, terminal, direction=1.0)
        self.next_token = next_token

    def class_position(self, field) -> int:
        data = getattr(field, "data", None)
        if data is None:  # Sec. 6 system from parameters: one margin
            return 0
        if self.next_token is None:
            return int(np.argmax(np.asarray(data.weights)))
        where = np.flatnonzero(np.asarray(data.next_tokens) == self.next_token)
        if where.size == 0:
            raise ValidationError("next_token", f"{self.next_token!r} is not a next token of "
                                  f"the data model ({data.next_tokens.tolist()[:20]})")
        return int(where[0])

    def prepare(self, field):
        if type(field).margins is Field.margins:      # a level without a decoder margin
            raise ValidationError("events", f"{self.name}: flow {field.name!r} has no decoder "
                                  "margin h_n (Eqn 44) to watch")
        k = self.class_position(field)
        log_m_minus_1 = math.log(_vocab_size(field) - 1)
        margin = field.margins  # raises ValidationError for a level without a margin

        def value(y):
            h = margin(y)
            return self.level_function(float(h[min(k, h.size - 1)]), log_m_minus_1)

        return value


def _vocab_size(field) -> int:
    data = getattr(field, "data", None)
    return int(data.vocab_size) if data is not None else int(field.M)


class _SnapTransition(_MarginEvent):
    @staticmethod
    def level_function(h: float, log_m_minus_1: float) -> float:
        # d gamma / dh = 0  <=>  (h - 1) e^h = M - 1  <=>  (h - 1) - (M - 1) e^{-h} = 0,
        # increasing in h, and e^{-h} cannot overflow for the h >= 0 of a flow from Y = 0.
        return (h - 1.0) - math.exp(log_m_minus_1 - h)


class _MarginCrossover(_MarginEvent):
    @staticmethod
    def level_function(h: float, log_m_minus_1: float) -> float:
        return h - log_m_minus_1


def snap_transition(next_token=None, terminal: bool = False) -> FieldEvent:
    """Event at the snap transition ``t_0``: the maximum of ``gamma(t)`` (Theorem 1b).

    ``gamma = h (M - 1) / (exp(h) + M - 1)`` (Eqn 9) as a function of the
    margin ``h`` is largest where ``(h - 1) exp(h) = M - 1``; since ``h``
    increases along the flow, that is where ``gamma(t)`` peaks, the end of the
    scanning stage. At Level R and in the Sec. 6 system this is exactly
    ``argmax_t gamma(t)``; at Level E and Level T the same condition is applied
    to the margin read off the decoder.

    Parameters
    ----------
    next_token : int, optional
        The class whose margin is watched; the class of largest weight (the
        first one for uniform weights) by default.
    terminal : bool, default False
        Stop the solve at ``t_0``.

    Returns
    -------
    FieldEvent
        Pass it in ``odeflow.solve(..., events=[...])``; the times are in
        ``traj.t_events`` (``traj.event_times("snap_transition")``).
    """
    return _SnapTransition("snap_transition", next_token, terminal)


def margin_crossover(next_token=None, terminal: bool = False) -> FieldEvent:
    """Event at CF2's crossover ``exp(h) = M - 1`` (``alpha_nn = 1/2``), Lemma 9.

    The ``t_0`` of CF2, ``(M - 2 + (M-1) ln(M-1)) / (eta_Y pi M)`` at Level R;
    it comes a little after :func:`snap_transition`. Parameters as there.
    """
    return _MarginCrossover("margin_crossover", next_token, terminal)


def bind_events(events, field) -> tuple[list, list[str]]:
    """``solve_ivp`` event functions and their names from what the user passed.

    ``events`` is one event or a sequence of them; each a :class:`FieldEvent`
    or a plain callable ``event(t, y)`` (passed through unchanged).
    """
    if events is None:
        return [], []
    items = [events] if callable(events) or isinstance(events, FieldEvent) else events
    try:
        items = list(items)
    except TypeError:
        raise ValidationError("events", f"must be an event or a list of events, got "
                              f"{type(events).__name__}") from None
    bound, names = [], []
    for i, item in enumerate(items):
        if isinstance(item, FieldEvent):
            bound.append(item.bind(field))
            names.append(item.name)
        elif callable(item):
            bound.append(item)
            names.append(getattr(item, "__name__", f"event{i}"))
        else:
            raise ValidationError(f"events[{i}]", f"must be callable event(t, y) or a "
                                  f"FieldEvent, got {type(item).__name__}")
    return bound, names
