"""What every solve result carries in ``scipy.integrate.solve_ivp``'s terms.

:class:`SolverOutput` is the base of every family's result
(:class:`~odeflow.results.Trajectory`, :class:`~odeflow.results.SnapResult`, the
induction and two-stage trajectories), so a scipy user finds the names of
``solve_ivp``'s ``OdeResult`` on them: ``success``, ``status``, ``message``,
``y`` (the raw state), ``sol`` (dense output), ``t_events`` and ``y_events``;
and the result of an optimiser flow of any family has the same accessors of its
step axis and optimiser state (``optimizer``, ``steps``, ``flow_time``,
``velocity``, ``moments``; ``docs/optimisers.md``).
"""

from __future__ import annotations

import numpy as np

from odeflow.errors import ValidationError


class SolverOutput:
    """``solve_ivp``'s result fields on an odeflow result.

    Attributes
    ----------
    y : ndarray of shape (n_state, n), or None
        The raw flat state of the vector field at ``t``, as ``solve_ivp``
        returns it (layout: the field's ``split``). ``None`` for a result read
        from a file: files keep the named arrays, not the raw state.
    sol : scipy.integrate.OdeSolution or None
        Dense output, ``sol(t)`` the raw state at any ``t`` in the span; only
        when solved with ``dense_output=True``.
    t_events, y_events : list of ndarray, or None
        Per event passed to :func:`odeflow.solve`, the times at which it fired
        and the raw states there (``None`` when no events were given).
    event_names : tuple of str
        A name per event (``"snap_transition"`` for the ready event, the
        function's ``__name__`` otherwise).
    series : dict
        Named series over ``t`` that a wrapping field adds (an optimiser flow's
        ``velocity`` or ``moment1``, ``moment2``); empty unless one did.
    """

    y = None
    sol = None
    t_events = None
    y_events = None
    event_names: tuple = ()

    def __getattr__(self, name: str):
        # ``series``: named series over ``t`` that a wrapping field adds (an optimiser
        # flow's velocity or moments); created empty on first use for result types
        # that keep their own series as attributes.
        if name == "series":
            self.series = {}
            return self.series
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # ------------------------------------------------------------ optimiser flows
    @property
    def optimizer(self) -> dict | None:
        """The optimiser of an optimiser flow (``docs/optimisers.md``) as a dict, e.g.
        ``{"kind": "momentum", "mu": 0.9, "start": "rest", "modified": True}``;
        None for a gradient flow."""
        return self.meta.get("optimizer")

    @property
    def steps(self) -> np.ndarray:
        """The optimiser steps of an optimiser flow's samples (its time axis ``t``).

        Raises ValidationError naming ``steps`` for a gradient flow, whose ``t``
        is flow time (see :attr:`flow_time`).
        """
        if self.optimizer is None:
            raise ValidationError("steps", f"flow {self.meta.get('flow', '')!r} is not an "
                                  "optimiser flow; its t is flow time")
        return self.t

    @property
    def flow_time(self) -> np.ndarray | None:
        """First-order flow time of the samples: for a heavy-ball flow the warm-up map
        of its steps, for an Adam flow None (no first-order time map), for a gradient
        flow ``t``."""
        if self.optimizer is None:
            return self.t
        return self.series.get("flow_time")

    @property
    def velocity(self) -> np.ndarray:
        """A heavy-ball flow's velocity ``u = eta v``, shape (n, state size), in the
        level's flat parameter layout, at the same steps as the parameters."""
        return self._optimizer_series("velocity")

    @property
    def moments(self) -> tuple[np.ndarray, np.ndarray]:
        """An Adam flow's moments ``(m, v)`` (not bias-corrected), each (n, state size),
        in the level's flat parameter layout."""
        return self._optimizer_series("moment1"), self._optimizer_series("moment2")

    def _optimizer_series(self, name: str) -> np.ndarray:
        if name not in self.series:
            kind = (self.optimizer or {}).get("kind", "none")
            raise ValidationError(name, f"not recorded by this trajectory (optimizer: {kind})")
        return self.series[name]

    @property
    def status(self) -> int:
        """``solve_ivp``'s status: 0 reached the end, 1 a terminal event stopped it."""
        return int(self.stats.get("status", 0))

    @property
    def success(self) -> bool:
        """True when the solver reached the end or a terminal event (``status >= 0``).

        :func:`odeflow.solve` raises :class:`~odeflow.errors.SolveError` instead of
        returning a failed solve, so a result in hand is always a success; the
        flag is here for code written against ``solve_ivp``.
        """
        return self.status >= 0

    @property
    def message(self) -> str:
        """``solve_ivp``'s termination message."""
        return str(self.stats.get("message", ""))

    def attach_solution(self, y, sol=None, t_events=None, y_events=None,
                        event_names=()) -> None:
        """Keep the raw output of ``solve_ivp`` (called by :func:`odeflow.solve`)."""
        self.y = y
        self.sol = sol
        self.t_events = None if t_events is None else [np.asarray(a) for a in t_events]
        self.y_events = None if y_events is None else [np.asarray(a) for a in y_events]
        self.event_names = tuple(event_names)

    def event_times(self, name: str = "snap_transition") -> np.ndarray:
        """Times at which the event called ``name`` fired (empty if it never did)."""
        if self.t_events is None or name not in self.event_names:
            raise ValidationError("name", f"no event {name!r} in this solve; events: "
                                  f"{list(self.event_names) or 'none'}")
        return self.t_events[self.event_names.index(name)]
