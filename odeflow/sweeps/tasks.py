"""The task kinds a sweep can run, by name: one solve or one training run per point.

A task kind is a :class:`TaskKind` in :data:`TASKS`: its name, its family
(``"flow"``: time is the flow time ``t``, the horizon is ``t_end``; ``"run"``:
time is the step count, the horizon is ``steps``), the function that runs one
point and the parameters it takes, each with a default and a check. Adding a
kind is one registry entry, e.g. a new flow of :mod:`odeflow.fields`::

    register(flow_task("finite_t", Parameter("seq_len", 128, "count")))

or a new training run (a function ``(data, values, times) -> Trajectory``)::

    register(TaskKind("my_run", "run", run_my_run, RUN_PARAMETERS, stochastic=True))

Only names travel to the workers (the worker looks the kind up here), so no
user code is pickled.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from odeflow.data import DEFAULT_PRESET, validate_finite, validate_positive
from odeflow.errors import ValidationError
from odeflow.results import Trajectory
from odeflow.solver import METHODS, solve
from odeflow.sweeps.outputs import SCAN_SNAP, OutputSet
from odeflow.training import Protocol, gradient_ascent, train, train_sgd
from odeflow.training.common import check_count, check_fraction, check_seed

#: How a parameter's values are checked and stored (the dtype of its coordinate).
KINDS = ("positive", "count", "fraction", "rate", "method", "text")


@dataclass(frozen=True)
class Parameter:
    """A parameter of a task kind: its name, default and kind of value.

    ``kind`` is one of ``"positive"`` (a finite float > 0), ``"count"`` (an
    integer >= 1), ``"seed"`` (an integer >= 0), ``"fraction"`` (a float in
    [0, 1)), ``"rate"`` (a finite float >= 0; 0 freezes), ``"method"`` (a
    ``solve_ivp`` method or ``"auto"``) or ``"text"`` (one of ``choices`` when
    given).
    """

    name: str
    default: object
    kind: str = "positive"
    choices: tuple = ()

    def check(self, value, field: str):
        """The checked value, or a :class:`ValidationError` naming ``field``."""
        if self.kind == "positive":
            return validate_positive(value, field)
        if self.kind == "count":
            return check_count(value, field)
        if self.kind == "seed":
            return check_seed(value, field)
        if self.kind == "fraction":
            return check_fraction(value, field)
        if self.kind == "rate":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValidationError(field, f"must be a number, got {value!r:.80}")
            rate = validate_finite(value, field)
            if rate < 0:
                raise ValidationError(field, f"must be >= 0 (0 freezes), got {rate!r}")
            return rate
        if not isinstance(value, str):
            raise ValidationError(field, f"must be text, got {value!r}")
        if self.kind == "method" and value not in ("auto", *METHODS):
            raise ValidationError(field, f"unknown method {value!r}; choose 'auto' or one of "
                                  f"{list(METHODS)}")
        if self.choices and value not in self.choices:
            raise ValidationError(field, f"must be one of {list(self.choices)}, got {value!r}")
        return value

    @property
    def numeric(self) -> bool:
        return self.kind in ("positive", "count", "seed", "fraction", "rate")


@dataclass(frozen=True)
class TaskKind:
    """One kind of sweep task.

    Parameters
    ----------
    name : str
        The name used in ``odeflow.sweep(task=...)`` and in ``[sweep] task``.
    family : {"flow", "run"}
        ``"flow"``: horizon ``t_end``, time is flow time. ``"run"``: horizon
        ``steps``, time is the step count (step ``k`` is ``t = k``).
    run : callable
        ``run(data, values, times) -> Trajectory or SnapResult``; ``values``
        holds every parameter (checked), ``times`` the output times up to the
        point's own horizon.
    parameters : tuple of Parameter
    stochastic : bool
        Whether the result depends on a seed (``values["seed"]``).
    outputs : OutputSet
        The task's outputs (:mod:`odeflow.sweeps.outputs`; Scan and Snap's by default).
        The tasks of one sweep share one set.
    model_family : str
        The family of the data models the task takes (``"scan_snap"``, ``"induction"``).
    default_preset : str
        The data model of a sweep that names none.
    model_fields : bool
        Whether the grid and settings may set numbers of the data model by dotted
        name (``prior.alpha``: :mod:`odeflow.sweeps.models`), passed among ``values``.
    check : callable, optional
        ``check(grid, settings)`` on the checked grid and the settings given: a
        ValidationError naming the key refuses a sweep the task cannot run as meant.
    """

    name: str
    family: str
    run: Callable
    parameters: tuple[Parameter, ...]
    stochastic: bool = False
    outputs: OutputSet = SCAN_SNAP
    model_family: str = "scan_snap"
    default_preset: str = DEFAULT_PRESET
    model_fields: bool = False
    check: Callable | None = None

    @property
    def horizon(self) -> str:
        """The parameter that sets the end of the time axis."""
        return "t_end" if self.family == "flow" else "steps"

    def parameter(self, name: str) -> Parameter | None:
        return next((p for p in self.parameters if p.name == name), None)


#: Parameters of every flow task (the arguments of :func:`odeflow.solve`).
FLOW_PARAMETERS = (Parameter("eta_y", 1.0), Parameter("eta_z", 0.1), Parameter("t_end", 1e4),
                   Parameter("method", "auto", "method"), Parameter("rtol", 1e-8),
                   Parameter("atol", 1e-10))

#: Parameters of every training run.
RUN_PARAMETERS = (Parameter("eta_y", 1.0), Parameter("eta_z", 0.1),
                  Parameter("steps", 1000, "count"))

#: Further parameters of the minibatch SGD run (:func:`odeflow.training.train_sgd`).
SGD_PARAMETERS = (Parameter("batch_size", 128, "count"), Parameter("seq_len", 128, "count"),
                  Parameter("momentum", 0.0, "fraction"))

#: Further parameters of the Adam run (the paper's protocol, Sec. 8 and Fig. 5,
#: :func:`odeflow.training.train`; ``beta1``, ``beta2`` are ``Protocol.betas``).
ADAM_PARAMETERS = (Parameter("batch_size", 128, "count"), Parameter("seq_len", 128, "count"),
                   Parameter("beta1", 0.9, "fraction"), Parameter("beta2", 0.999, "fraction"),
                   Parameter("eps", 1e-8))

#: The task kinds by name.
TASKS: dict[str, TaskKind] = {}


def register(kind: TaskKind) -> TaskKind:
    """Add ``kind`` to :data:`TASKS` (a later entry of the same name replaces it)."""
    if kind.family not in ("flow", "run"):
        raise ValidationError("family", f"must be 'flow' or 'run', got {kind.family!r}")
    TASKS[kind.name] = kind
    return kind


def solve_flow(data, values: dict, times: np.ndarray, flow: str, options: tuple = ()):
    """Run one point of a flow task: :func:`odeflow.solve` on the output ``times``.

    ``options`` names the flow's own options among ``values`` (``seed`` too,
    for a flow that draws a sample).
    """
    options = {name: values[name] for name in options}
    return solve(data, flow=flow, eta_y=values["eta_y"], eta_z=values["eta_z"],
                 t_span=(0.0, values["t_end"]), t_eval=times, method=values["method"],
                 rtol=values["rtol"], atol=values["atol"], progress=False, **options)


def flow_task(flow: str, *extra: Parameter, seeded: bool = False) -> TaskKind:
    """The task kind that solves ``flow`` (a key of :data:`odeflow.fields.FLOWS`).

    ``extra`` are the flow's own options (passed to its vector field);
    ``seeded`` flows also take ``seed`` (the sweep's ``seed`` dimension).
    """
    options = tuple(p.name for p in extra) + (("seed",) if seeded else ())
    return TaskKind(flow, "flow", partial(solve_flow, flow=flow, options=options),
                    FLOW_PARAMETERS + extra, stochastic=seeded)


def run_gradient_ascent(data, values: dict, times: np.ndarray):
    """One point of ``gradient_ascent``: Euler steps of Level E (Lemma 5), recorded at ``times``."""
    return gradient_ascent(data, values["eta_y"], values["eta_z"], values["steps"],
                           record_every=record_every(times), progress=False)


def run_sgd(data, values: dict, times: np.ndarray):
    """One point of ``sgd``: minibatch SGD on sampled finite-``T`` sequences."""
    traj = train_sgd(data, values["eta_y"], values["eta_z"], values["steps"],
                     values["batch_size"], values["seq_len"], momentum=values["momentum"],
                     seed=values["seed"], record_every=record_every(times), progress=False)
    # train_sgd records flow time t_k (warm-up map); the sweep's run axis is the step count
    traj.t = np.asarray(traj.meta["recorded_steps"], dtype=float)
    return traj


def adam_protocol(values: dict) -> Protocol:
    """The :class:`~odeflow.training.Protocol` of one ``adam`` point (zero start, no decay)."""
    return Protocol(optimizer="adam", eta_y=values["eta_y"], eta_z=values["eta_z"],
                    betas=(values["beta1"], values["beta2"]), eps=values["eps"],
                    batch_size=values["batch_size"], seq_len=values["seq_len"],
                    steps=values["steps"])


def run_adam(data, values: dict, times: np.ndarray):
    """One point of ``adam``: the paper's training protocol with Adam (Sec. 8, Fig. 5).

    One seed per point (the sweep's ``seed`` dimension), recorded every
    ``record_every(times)`` steps; ``beta1``, ``beta2``, ``eps`` are Adam's
    ``betas`` and ``eps`` (PyTorch's defaults 0.9, 0.999, 1e-8). The logits
    (hence the entropy) are on every recorded step, but
    :func:`~odeflow.training.train` keeps the decoder only at the start and the
    end: ``J`` is known at step 0 and at the last step (NaN in between), and
    ``t_0``, which needs the decoder's margin at every step, is NaN.
    """
    run = train(data, adam_protocol(values), seeds=[values["seed"]],
                record_every=record_every(times), progress=False)
    return training_trajectory(run)


def training_trajectory(run, i: int = 0) -> Trajectory:
    """Member ``i`` of a :class:`~odeflow.training.TrainingRun` on the step axis.

    The objective ``J`` of Eqn 2 goes in ``series["J"]`` where the decoder is
    known (the first and the last recorded step), NaN elsewhere.
    """
    traj = run.trajectory(i)
    traj.t = np.asarray(run.steps, dtype=float)  # the sweep's run axis: the step count
    J = np.full(traj.t.size, np.nan)
    if run.lumped:
        ends = [0, traj.t.size - 1]
        known = Trajectory(run.data, traj.t[ends], run.z_active[i][ends], run.z_base[i],
                           decoder_lumped=np.stack([run.decoder_initial[i],
                                                    run.decoder_final[i]]))
        J[ends] = known.objective
    traj.series["J"] = J
    return traj


def record_every(times: np.ndarray) -> int:
    """The step spacing of a run's shared time grid (``0, r, 2r, ...``)."""
    return int(times[1] - times[0]) if times.size > 1 else 1


for _kind in (flow_task("exact"), flow_task("reduced"), flow_task("snap"),
              flow_task("finite_t", Parameter("seq_len", 128, "count"),
                        Parameter("samples_per_class", 64, "count"), seeded=True),
              TaskKind("gradient_ascent", "run", run_gradient_ascent, RUN_PARAMETERS),
              TaskKind("sgd", "run", run_sgd, RUN_PARAMETERS + SGD_PARAMETERS,
                       stochastic=True),
              TaskKind("adam", "run", run_adam, RUN_PARAMETERS + ADAM_PARAMETERS,
                       stochastic=True)):
    register(_kind)


def task_kind(name, field: str = "task") -> TaskKind:
    """The registered kind called ``name``, or a :class:`ValidationError` naming ``field``."""
    if not isinstance(name, str) or name not in TASKS:
        raise ValidationError(field, f"unknown task {name!r}; choose one of {sorted(TASKS)}")
    return TASKS[name]


def time_grid(family: str, horizon: float, points_per_decade: int = 10,
              records: int = 100) -> np.ndarray:
    """The shared output times of a sweep whose largest horizon is ``horizon``.

    Flows: ``t = 0`` then log-spaced times up to ``t_end`` (the dynamics span
    decades, CF2), ``points_per_decade`` per decade from ``1e-2``. Runs: every
    ``r``-th step, ``r = max(1, steps // records)``, and the last step.
    """
    if family == "flow":
        lo = min(1e-2, horizon / 100.0)
        n = max(2, int(math.ceil(points_per_decade * math.log10(horizon / lo))) + 1)
        return np.concatenate([[0.0], np.geomspace(lo, horizon, n)])
    steps = int(horizon)
    every = max(1, steps // records)
    marks = np.arange(0, steps + 1, every, dtype=float)
    return marks if marks[-1] == steps else np.append(marks, float(steps))


def point_times(family: str, times: np.ndarray, horizon: float) -> np.ndarray:
    """The output times of one point whose horizon is ``horizon`` (<= the sweep's)."""
    if family == "run":
        return times
    own = times[times <= horizon]
    return own if own[-1] == horizon else np.append(own, horizon)

