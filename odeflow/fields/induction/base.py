"""Base of the induction-head levels (``docs/induction.md``): parameter layout, rates, stages.

The flat parameters of every induction-head field are the family's vector
``theta = concatenate(c (#S,), w.ravel() (H*H,), [a])`` (selector
coefficients, copier logits, classifier weight; 17 numbers at ``H = 3, D = 2``);
a level whose copier is fixed (``flow="copier"``) drops ``w``. The solver's state
has the same layout with ``ln|c|`` in place of ``c`` (below). Each field exposes

- :meth:`InductionField.loss` and :meth:`InductionField.gradient`: the
  population loss and its plain gradient on the flat parameters;
- :attr:`InductionField.rate_vector`: one learning rate per entry (its
  group's rate; 0 for a frozen group);

and its right-hand side is the gradient flow ``theta' = -rate_vector *
gradient(theta)``, integrated with the selector in log coordinates (below).

Selector coordinates
--------------------
The loss depends on ``c`` only through ``p_S = c_S^2 / sum c^2``, so the flow of
``c`` is multiplicative, ``c_S' = -rate_c (2 c_S / U) (dL/dp_S - p . dL/dp)``: a
coefficient keeps its sign, a zero stays zero and ``U = sum c^2`` is conserved.
The solver's state holds ``l_S = ln|c_S|`` in place of ``c_S`` (the same slots;
``w`` and ``a`` unchanged), whose flow ``l_S' = -rate_c (2 / U) (dL/dp_S - p .
dL/dp)`` is the same ODE in coordinates where a losing subset's decay is a
straight line. In ``c`` a losing coefficient can leave the range of doubles
before it recovers (on ``ih-point`` ``c_(1,2)`` falls to ``e^-806`` before
``{1, 2}`` wins), and the absolute error control of ``c`` (``atol``), not the ODE,
would set the time of that recovery (``docs/induction.md``, "Figures"). The model is
evaluated at ``c~ = sign(c) exp(max(l - l_max, -SELECTOR_LOG_FLOOR))`` (the same
``p`` to rounding; ``p`` is scale-free) and :meth:`InductionField.to_parameters`,
:meth:`InductionField.selector_weights` map states back (``p = softmax(2 l)`` in
log space). :meth:`InductionField.initial_state` is the solver's state;
:attr:`InductionField.start` the parameters.

Stage schedules
---------------
The authors train in stages (``c``, then ``w`` at rate ``1e5``, then ``a``)
or jointly (``RPE/train_simplified.py``). A field moves the groups given a
non-zero rate in ``rates={"c": .., "w": .., "a": ..}`` (an omitted group is
frozen; ``rates=None`` moves every group at rate 1, the joint run) and starts
from ``start`` (flat parameters; the data model's init by default). A
:class:`Schedule` is a list of :class:`Stage` (groups' rates and the stage's
duration); :func:`odeflow.solver.induction.solve_schedule` solves the stages
one after the other, each from the end of the one before, and concatenates
the trajectories.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from odeflow.data.checks import as_real_array, validate_finite
from odeflow.errors import ValidationError
from odeflow.fields.base import Field
from odeflow.fields.induction.parameters import InductionParameters, join_series
from odeflow.numerics import log_magnitude, log_magnitude_mismatches

#: Parameter groups of the flat vector, in their order.
GROUPS = ("c", "w", "a")
#: The loss names of the family: ``-log y_target`` and the code's cross-entropy of ``y``.
LOSSES = ("nll", "code")
#: The model is evaluated with every selector coefficient at least ``e^-FLOOR`` times the
#: largest (``e^-300 = 5e-131``; its square is still a normal double): a ``p_S`` below
#: ``e^-600`` moves the kernel by far less than rounding (module docstring).
SELECTOR_LOG_FLOOR = 300.0
#: Largest ``ln|c_S|`` a start may give: ``c`` itself must be a double (``U = sum c^2``
#: is conserved, so the largest coefficient never grows).
MAX_LOG_C = 709.0
#: Smallest ``ln`` of the largest ``|c_S|`` a start may have: the flow of ``c`` carries
#: ``1/U``, and ``e^{2 * 300}`` is still a double.
MIN_LOG_C = -300.0


def check_loss(loss) -> str:
    """``loss`` if it is one of :data:`LOSSES`, else a ValidationError naming ``loss``."""
    if not isinstance(loss, str) or loss not in LOSSES:
        raise ValidationError("loss", f"must be one of {list(LOSSES)}, got {loss!r:.80}")
    return loss


def check_rates(rates, groups: Sequence[str], field_name: str = "rates") -> dict:
    """``{group: rate}`` over ``groups``: finite, ``>= 0``; omitted groups get 0 (frozen).

    ``None`` moves every group at rate 1 (the authors' joint run at lr 1); a single
    number moves every group at that rate.
    """
    if rates is None:
        return dict.fromkeys(groups, 1.0)
    if isinstance(rates, (int, float)) and not isinstance(rates, bool):
        rate = validate_finite(rates, field_name)
        if not rate > 0:
            raise ValidationError(field_name, f"must be > 0, got {rate!r}")
        return dict.fromkeys(groups, rate)
    if not isinstance(rates, Mapping):
        raise ValidationError(field_name, f"must be a mapping of group to rate, e.g. "
                              f"{{'c': 1.0, 'a': 1.0}}, got {rates!r:.80}")
    out = dict.fromkeys(groups, 0.0)
    for key, value in rates.items():
        if key not in groups:
            raise ValidationError(f"{field_name}.{key}", f"unknown parameter group; this flow "
                                  f"has {list(groups)}")
        rate = validate_finite(value, f"{field_name}.{key}")
        if rate < 0:
            raise ValidationError(f"{field_name}.{key}", f"must be >= 0, got {rate!r}")
        out[key] = rate
    if not any(out.values()):
        raise ValidationError(field_name, "every group is frozen; give at least one rate > 0")
    return out


class InductionField(Field):
    """A level of the induction-head family: a gradient flow on the flat parameters.

    Parameters
    ----------
    data : InductionData
    loss : {"nll", "code"}, default "nll"
        ``-log y_{x_{L+1}}`` (the analysis) or the cross-entropy of the vector
        ``y`` used as logits (the authors' training code).
    rates : mapping of group to rate, optional
        Learning rate of each group of :attr:`groups`; omitted or 0: frozen.
        Default: every group at 1.
    start : array_like, optional
        Flat initial parameters (e.g. the end of a previous stage); the data model's
        init (``c0, w+, w-, a0``) by default.
    start_log_c : array_like, optional
        The logarithms of the magnitudes of ``c`` at the start, one per subset
        (``-inf`` for a zero coefficient), for magnitudes beyond the range of doubles
        (``traj.log_c[-1]`` of a previous stage). The signs stay those of the ``c`` of
        ``start``, of a signed zero too. By default, those of ``start``.

    Notes
    -----
    Subclasses set :attr:`groups` and implement :meth:`loss_and_gradient`.
    """

    #: Parameter groups of this level's flat parameters (and state), in order.
    groups: tuple = GROUPS

    #: Not itself wrapped by an optimiser flow: its state holds ``ln|c|``, and its
    #: ``gradient`` is ``+grad L`` (``docs/optimisers.md``); :meth:`parameter_level` is.
    optimizer_flows = False

    def __init__(self, data, loss: str = "nll", rates=None, start=None, start_log_c=None):
        super().__init__()
        from odeflow.data.induction import InductionData

        if not isinstance(data, InductionData):
            raise ValidationError("data", f"must be an InductionData, got {type(data).__name__}")
        self.data = data
        self.loss_name = check_loss(loss)
        self.rates = check_rates(rates, self.groups)
        self.subsets = [tuple(s) for s in data.subsets]
        self.heads = int(data.heads)
        self.slices = self._layout()
        self._start = self._check_start(start)
        c = self._start[self.slices["c"]]
        self._sign = np.copysign(1.0, c)
        log_c = self._check_log_c(start_log_c, c)
        self._alive = np.isfinite(log_c)
        self._log_c0 = np.where(self._alive, log_c, 0.0)
        self.rate_vector = np.zeros(self.size)
        for g, rate in self.rates.items():
            self.rate_vector[self.slices[g]] = rate
        self.rate_vector.setflags(write=False)

    # ------------------------------------------------------------- layout
    def _layout(self) -> dict:
        sizes = {"c": len(self.subsets), "w": self.heads ** 2, "a": 1}
        out, at = {}, 0
        for g in self.groups:
            out[g] = slice(at, at + sizes[g])
            at += sizes[g]
        self._size = at
        return out

    @property
    def size(self) -> int:
        return self._size

    def group_mask(self, group: str) -> np.ndarray:
        """Boolean mask of the entries of ``group`` in the flat parameters (or state)."""
        mask = np.zeros(self.size, dtype=bool)
        mask[self.slices[group]] = True
        return mask

    def pack(self, c, w=None, a=0.0) -> np.ndarray:
        """The flat parameters from ``c`` (#S,), ``w`` (H, H) (levels with a copier) and ``a``."""
        parts = {"c": np.asarray(c, float).ravel(), "a": np.asarray([a], float).ravel()}
        if "w" in self.groups:
            parts["w"] = np.asarray(w, float).ravel()
        return np.concatenate([parts[g] for g in self.groups])

    def split(self, y: np.ndarray) -> dict:
        """``{"c": (#S,), "w": (H, H), "a": float}`` views of the flat parameters ``y``."""
        out = {"c": y[self.slices["c"]], "a": float(y[self.slices["a"]][0])}
        if "w" in self.groups:
            out["w"] = y[self.slices["w"]].reshape(self.heads, self.heads)
        return out

    def _check_start(self, start) -> np.ndarray:
        if start is None:
            d = self.data
            w = np.full((self.heads, self.heads), float(d.w_minus))
            w[:, 0] = float(d.w_plus)
            return self.pack(np.full(len(self.subsets), float(d.c0)), w, float(d.a0))
        arr = as_real_array(start, "start").ravel()
        if arr.shape != (self.size,):
            raise ValidationError("start", f"must be flat parameters, {self.size} numbers "
                                  f"({' + '.join(self.groups)}), got shape {np.shape(start)}")
        if not np.all(np.isfinite(arr)):
            raise ValidationError("start", "must be finite")
        if not np.any(arr[self.slices["c"]] != 0):
            raise ValidationError("start", "the selector coefficients c are all 0 (p_S = "
                                  "c_S^2 / sum c^2 is undefined)")
        return arr.copy()

    def _check_log_c(self, start_log_c, c) -> np.ndarray:
        if start_log_c is None:
            return self._check_scale(log_magnitude(c), "start")
        arr = as_real_array(start_log_c, "start_log_c").ravel()
        if arr.shape != c.shape:
            raise ValidationError("start_log_c", f"must hold {c.size} numbers (one per "
                                  f"subset), got shape {np.shape(start_log_c)}")
        if np.any(np.isnan(arr)) or np.any(arr == np.inf):
            raise ValidationError("start_log_c", "must be finite or -inf (a zero coefficient)")
        if np.any(arr > MAX_LOG_C):
            raise ValidationError("start_log_c", f"must be <= {MAX_LOG_C:g} (a coefficient "
                                  "above the range of doubles), got "
                                  f"{float(np.max(arr)):g}")
        if not np.any(np.isfinite(arr)):
            raise ValidationError("start_log_c", "every coefficient is zero (-inf): p_S = "
                                  "c_S^2 / sum c^2 is undefined")
        # the magnitudes must be those of start's c wherever c is a double (0 where e^l is)
        bad = log_magnitude_mismatches(arr, c)
        if bad.size:
            i = int(bad[0])
            raise ValidationError("start_log_c", f"entry {i} ({arr[i]:g}) is not ln|c| of "
                                  f"start's c ({c[i]:g}); give start's c as sign * e^l")
        return self._check_scale(arr, "start_log_c")

    def _check_scale(self, log_c, field_name: str) -> np.ndarray:
        """``log_c`` unless ``U = sum c^2`` is below ``e^{-2 MIN_LOG_C}`` (the selector's
        rates ``2/U`` are then beyond the range of doubles)."""
        top = float(np.max(log_c))
        if top < MIN_LOG_C:
            raise ValidationError(field_name, f"the largest selector coefficient is "
                                  f"e^{top:.4g}, below e^{MIN_LOG_C:g}: the selector's rates "
                                  "2/U (U = sum c^2) leave the range of doubles; scale c up "
                                  "(p_S does not change)")
        return log_c

    @property
    def start(self) -> np.ndarray:
        """The flat initial parameters ``theta = (c, w, a)``."""
        return self._start.copy()

    def initial_state(self) -> np.ndarray:
        """The solver's initial state: :attr:`start` with ``ln|c_S|`` in place of ``c_S``
        (module docstring)."""
        x = self._start.copy()
        x[self.slices["c"]] = self._log_c0
        return x

    def log_c(self, states) -> np.ndarray:
        """``ln|c_S|`` of solver states ``(..., size)``: ``(..., #S)``, ``-inf`` where
        ``c_S = 0``."""
        log_c = np.array(np.asarray(states, float)[..., self.slices["c"]])
        log_c[..., ~self._alive] = -np.inf
        return log_c

    def to_parameters(self, states) -> np.ndarray:
        """The parameters ``theta`` of solver states ``(..., size)`` (``c = sign e^l``; a
        coefficient below the range of doubles is 0 there, its ``p_S`` too)."""
        theta = np.array(states, dtype=float)
        theta[..., self.slices["c"]] = self._sign * np.exp(self.log_c(theta))
        return theta

    def selector_weights(self, states) -> np.ndarray:
        """``p_S = softmax(2 l)_S`` of solver states ``(..., size)``, in log space."""
        twice = 2.0 * self.log_c(states)
        twice -= np.max(twice, axis=-1, keepdims=True)
        weights = np.exp(twice)
        return weights / np.sum(weights, axis=-1, keepdims=True)

    def _model_point(self, x: np.ndarray) -> tuple[np.ndarray, float]:
        """``(theta~, l_max)``: the parameters at which the model is evaluated for the
        state ``x`` (``c~ = sign e^{max(l - l_max, -floor)}``: the same ``p`` to
        rounding, no entry below the range of doubles)."""
        sl = self.slices["c"]
        log_c = x[sl]
        top = float(np.max(log_c[self._alive]))
        theta = np.array(x, dtype=float)
        theta[sl] = np.where(self._alive, self._sign * np.exp(
            np.maximum(log_c - top, -SELECTOR_LOG_FLOOR)), 0.0)
        return theta, top

    # ------------------------------------------------------------- the flow
    def loss_and_gradient(self, y: np.ndarray, gradient: bool = True, value: bool = True):
        """``(loss, gradient)`` at the flat parameters ``y`` (gradient None if not asked; loss
        None if not asked, ``value=False``: the gradient alone skips the loss's logarithms)."""
        raise NotImplementedError

    def loss(self, y: np.ndarray) -> float:
        """The population loss at the flat parameters ``y``."""
        return self.loss_and_gradient(np.asarray(y, float), gradient=False)[0]

    def gradient(self, y: np.ndarray) -> np.ndarray:
        """The plain gradient of :meth:`loss` at the flat parameters (every group, frozen or
        not)."""
        return self.loss_and_gradient(np.asarray(y, float), value=False)[1]

    def rhs(self, t: float, y: np.ndarray) -> np.ndarray:
        """The gradient flow ``theta' = -rate_vector * gradient(theta)`` of the moving
        groups, on the solver's state ``y`` (``l = ln|c|`` in the ``c`` slots: ``l_S' =
        c_S' / c_S``, module docstring)."""
        self.nfev += 1
        theta, top = self._model_point(np.asarray(y, float))
        grad = self.gradient(theta)
        out = -self.rate_vector * grad
        sl = self.slices["c"]
        # c_S'/c_S = -rate (2 / U) (dL/dp_S - p.dL/dp); at c~ it carries 1/U~ = e^{2 l_max}/U
        relative = np.divide(grad[sl], theta[sl], out=np.zeros(len(self.subsets)),
                             where=self._alive)
        out[sl] = -self.rate_vector[sl] * relative * math.exp(-2.0 * top)
        return out

    def parameter_level(self):
        """This level with ``theta = (c, w, a)`` as its state, for an optimiser flow
        (:class:`~odeflow.fields.induction.parameters.InductionParameters`)."""
        return InductionParameters(self)

    def parameters(self) -> dict:
        out = {"flow": self.name, "loss": self.loss_name, "rates": dict(self.rates),
               "groups": list(self.groups), "start": self._start.tolist()}
        c = self._start[self.slices["c"]]
        if not np.array_equal(self._log_c0[self._alive], log_magnitude(c[self._alive])):
            # magnitudes beyond the range of doubles (None: a zero coefficient)
            out["start_log_c"] = [float(v) if a else None
                                  for v, a in zip(self._log_c0, self._alive, strict=True)]
        return out

    def trajectory(self, t, states, stats):
        """An :class:`~odeflow.results.induction.InductionTrajectory` (the loss evaluated at
        every output time; ``copier_logits`` None for a level without ``w``)."""
        from odeflow.results.induction import InductionTrajectory

        states = np.asarray(states, float)
        n = states.shape[0]
        theta = self.to_parameters(states)
        w = (theta[:, self.slices["w"]].reshape(n, self.heads, self.heads)
             if "w" in self.groups else None)
        losses = np.array([self.loss(self._model_point(row)[0]) for row in states])
        meta = {**self.parameters(), "schedule": [{"rates": dict(self.rates),
                                                   "t_span": [float(t[0]), float(t[-1])]}]}
        return InductionTrajectory(np.asarray(t, float), theta[:, self.slices["a"]][:, 0],
                                   self.subsets, self.selector_weights(states), w,
                                   theta[:, self.slices["c"]], losses, stats=stats,
                                   meta=meta, data=self.data, log_c=self.log_c(states))

    @classmethod
    def join(cls, parts):
        """One :class:`~odeflow.results.induction.InductionTrajectory` from the stages of a
        schedule (consecutive spans; the repeated boundary point is kept once).

        ``stats`` sums ``nfev``, ``njev``, ``nlu``, ``rhs_calls`` and ``wall_time`` and
        lists each stage's statistics under ``"stages"``; ``meta["schedule"]`` lists the
        stages (rates, the span of each part's ``t``). Stages of optimiser flows (each
        on the step axis, from rest; their ``t`` shifted to the schedule's steps) join
        their ``series`` too: the optimiser's state per stage, and the heavy ball's
        ``flow_time`` accumulated over the stages (:func:`join_series`).
        """
        from odeflow.results.induction import InductionTrajectory

        first = parts[0]
        keep = [np.ones(first.t.size, dtype=bool)]
        for prev, part in zip(parts, parts[1:], strict=False):
            keep.append(part.t > prev.t[-1])

        def cat(name):
            if getattr(first, name) is None:
                return None
            return np.concatenate([getattr(p, name)[k] for p, k in zip(parts, keep, strict=True)])

        stats = {"method": first.stats.get("method"), "status": 0,
                 "stages": [dict(p.stats) for p in parts]}
        for key in ("nfev", "njev", "nlu", "rhs_calls", "wall_time"):
            stats[key] = sum(p.stats.get(key, 0) for p in parts)
        schedule = [{**s, "t_span": [float(p.t[0]), float(p.t[-1])]}
                    for p in parts for s in p.meta["schedule"]]
        meta = {**first.meta, "schedule": schedule,
                "t_span": [float(first.t[0]), float(parts[-1].t[-1])]}
        meta.pop("rates", None)
        meta.pop("start", None)
        out = InductionTrajectory(cat("t"), cat("a"), first.subsets, cat("subset_weights"),
                                  cat("copier_logits"), cat("c"), cat("loss"), stats=stats,
                                  meta=meta, data=first.data, log_c=cat("log_c"))
        series = join_series(parts, keep)
        if series:
            out.series = series
        y = np.concatenate([p.y[:, k] for p, k in zip(parts, keep, strict=True)], axis=1)
        out.attach_solution(y)
        return out


@dataclass(frozen=True)
class Stage:
    """One stage of a schedule: the groups' rates (omitted: frozen) and its duration.

    Parameters
    ----------
    rates : mapping of group to rate, or float
        E.g. ``{"c": 1.0}`` (stage 1 of the authors), ``{"w": 1e5}``, ``{"a": 1.0}``;
        a number moves every group of the level at that rate.
    duration : float
        Flow time of the stage (> 0).
    """

    rates: dict | float = field(default_factory=dict)
    duration: float = 1.0

    def checked(self, index: int, groups) -> Stage:
        where = f"schedule[{index}]"
        duration = validate_finite(self.duration, f"{where}.duration")
        if not duration > 0:
            raise ValidationError(f"{where}.duration", f"must be > 0, got {duration!r}")
        return Stage(check_rates(self.rates, groups, f"{where}.rates"), duration)


class Schedule(tuple):
    """A sequence of :class:`Stage` run one after the other (``docs/induction.md``, "Levels").

    ``Schedule.staged(t1, t2, t3)`` is the authors' ``c -> w -> a`` (rates 1, 1e5, 1
    by default); ``Schedule.joint(t)`` moves every group together at rate 1.
    """

    def __new__(cls, stages=()):
        stages = tuple(stages)
        for i, s in enumerate(stages):
            if not isinstance(s, Stage):
                raise ValidationError(f"schedule[{i}]", f"must be a Stage, got "
                                      f"{type(s).__name__}")
        if not stages:
            raise ValidationError("schedule", "needs at least one stage")
        return super().__new__(cls, stages)

    @classmethod
    def staged(cls, t_c: float, t_w: float, t_a: float, rate_c: float = 1.0,
               rate_w: float = 1e5, rate_a: float = 1.0) -> Schedule:
        """The authors' staged run: ``c`` for ``t_c``, then ``w`` for ``t_w``, then ``a``."""
        return cls([Stage({"c": rate_c}, t_c), Stage({"w": rate_w}, t_w),
                    Stage({"a": rate_a}, t_a)])

    @classmethod
    def joint(cls, t_end: float, rate: float = 1.0) -> Schedule:
        """Every group at ``rate`` for ``t_end``."""
        return cls([Stage(float(rate), t_end)])

    def checked(self, groups) -> list[Stage]:
        return [s.checked(i, groups) for i, s in enumerate(self)]

    @property
    def end(self) -> float:
        return math.fsum(s.duration for s in self)
