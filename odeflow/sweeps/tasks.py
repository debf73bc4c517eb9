"""The task kinds a sweep can run, by name: one solve or one training run per point.

A task kind is a :class:`TaskKind` in :data:`TASKS`: its name, its family
(``"flow"``: time is the flow time ``t``, the horizon is ``t_end``; ``"run"``:
time is the step count, the horizon is ``steps``), the function that runs one
point and the parameters it takes, each with a default and a check. Each model
family declares its kinds (:mod:`odeflow.families`, the ``sweep_tasks``
target: :mod:`odeflow.sweeps.scan_snap`, :mod:`odeflow.sweeps.induction`);
:func:`tasks` gathers them. A kind of one's own is one call, e.g. a training
run (a function ``(data, values, times) -> Trajectory``)::

    register(TaskKind("my_run", "run", run_my_run, scan_snap.RUN_PARAMETERS, stochastic=True))

Only names travel to the workers (the worker looks the kind up here), so no
user code is pickled.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from odeflow.data import DEFAULT_PRESET, validate_finite, validate_positive
from odeflow.errors import RenamedWarning, ValidationError, renamed
from odeflow.solver import METHODS
from odeflow.sweeps.outputs import SCAN_SNAP, OutputSet
from odeflow.training.common import check_count, check_fraction, check_seed


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
    renamed : dict
        Old parameter names -> the new ones (``docs/api.md``, "One name per concept"):
        a grid or settings key, or a stored sweep's parameter, of an old name is read
        as the new one (:func:`new_parameter_names`).
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
    renamed: dict = field(default_factory=dict)

    @property
    def horizon(self) -> str:
        """The parameter that sets the end of the time axis."""
        return "t_end" if self.family == "flow" else "steps"

    def parameter(self, name: str) -> Parameter | None:
        return next((p for p in self.parameters if p.name == name), None)


def new_parameter_names(kinds, names: dict, where: str, warn: bool = True) -> dict:
    """``names`` (a grid, settings or a stored sweep's parameters) with each old
    parameter name of the task ``kinds`` (their ``renamed``) replaced by the new one.

    With ``warn``, each old name warns :class:`~odeflow.errors.RenamedWarning`
    (``'length' is now 'seq_len'``); a stored sweep's are read silently. An old
    name given with its new one is refused, naming ``where.<old>``.
    """
    renames = {old: new for kind in kinds for old, new in kind.renamed.items()}
    try:
        if warn:
            return renamed(names, renames, stacklevel=5, own_calls=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RenamedWarning)
            return renamed(names, renames)
    except ValidationError as err:
        raise ValidationError(f"{where}.{err.field}", err.reason) from None


#: Parameters of every flow task of every family (the arguments of :func:`odeflow.solve`
#: beside the family's own).
SOLVE_PARAMETERS = (Parameter("t_end", 1e4), Parameter("method", "auto", "method"),
                    Parameter("rtol", 1e-8), Parameter("atol", 1e-10))

#: Task kinds added with :func:`register` by name (:func:`tasks` adds the families' own).
TASKS: dict[str, TaskKind] = {}


def register(kind: TaskKind) -> TaskKind:
    """Add ``kind`` to :data:`TASKS` (a later entry of the same name replaces it)."""
    if kind.family not in ("flow", "run"):
        raise ValidationError("family", f"must be 'flow' or 'run', got {kind.family!r}")
    TASKS[kind.name] = kind
    return kind


def tasks() -> dict[str, TaskKind]:
    """The task kinds by name: every model family's (:mod:`odeflow.families`, the
    ``sweep_tasks`` target) and those added with :func:`register` (which win)."""
    from odeflow.families import families

    own = {kind.name: kind for family in families().values() for kind in family.task_kinds()}
    return {**own, **TASKS}


def task_kind(name, field: str = "task") -> TaskKind:
    """The registered kind called ``name``, or a :class:`ValidationError` naming ``field``."""
    table = tasks()
    if not isinstance(name, str) or name not in table:
        raise ValidationError(field, f"unknown task {name!r}; choose one of {sorted(table)}")
    return table[name]


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

