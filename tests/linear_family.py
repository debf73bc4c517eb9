"""A model family of one's own: a two-layer linear network on Gaussian data.

The worked example of ``docs/families.md``. The network ``y = W2 W1 x`` (``W1``
hidden x d_in, ``W2`` d_out x hidden) learns a linear teacher ``y = A x`` from
``x ~ N(0, I)``; the expected squared error is the population loss
``L = 1/2 ||W2 W1 - A||_F^2`` (dimensionless), whose gradient flow is the model of
Saxe, McClelland and Ganguli (ICLR 2014). :class:`Linear2` declares the data type,
the flow, a check, a figure and a sweep task below; one call registers it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
from scipy.special import log_expit

from odeflow.analysis.check_registry import CheckFamily, CheckResult, relative_error
from odeflow.data import as_real_array, validate_positive
from odeflow.data.checks import check_count, check_seed
from odeflow.data.forms import TomlForm
from odeflow.errors import ValidationError
from odeflow.families import Family
from odeflow.fields.base import Field
from odeflow.io import atomic_write_npz
from odeflow.results.files import jsonable
from odeflow.results.solution import SolverOutput
from odeflow.solver import solve
from odeflow.sweeps import outputs
from odeflow.sweeps.models import edited_model
from odeflow.sweeps.tasks import SOLVE_PARAMETERS, Parameter, TaskKind


@dataclass(frozen=True)
class LinearData(TomlForm):
    """The teacher ``A`` (rows, d_out x d_in), the hidden width and the seeded start
    ``W ~ init_scale N(0, 1)``. TOML: ``teacher = [[...]]``, ``hidden``, ``[init]``
    with ``scale`` and ``seed``."""

    teacher: tuple
    hidden: int = 1
    init_scale: float = 0.1
    seed: int = 0
    toml_marker, toml_keys, family = "teacher", ("teacher", "hidden", "init"), "linear2"

    def __post_init__(self):
        A = as_real_array(self.teacher, "teacher")
        if A.ndim != 2 or A.size == 0 or not np.all(np.isfinite(A)):
            raise ValidationError("teacher", "must be a non-empty finite matrix (rows of A)")
        object.__setattr__(self, "teacher", tuple(map(tuple, A.tolist())))
        object.__setattr__(self, "hidden", check_count(self.hidden, "hidden"))
        object.__setattr__(self, "init_scale", validate_positive(self.init_scale, "init.scale"))
        object.__setattr__(self, "seed", check_seed(self.seed, "init.seed"))

    def initial_parameters(self) -> np.ndarray:
        """``(W1, W2)`` flat (row-major), entries ``init_scale N(0, 1)`` from ``seed``."""
        (m, d), k = np.shape(self.teacher), self.hidden
        return self.init_scale * np.random.default_rng(self.seed).standard_normal(k * (d + m))

    def to_dict(self) -> dict:
        return {"teacher": [list(row) for row in self.teacher], "hidden": self.hidden,
                "init": {"scale": self.init_scale, "seed": self.seed}}

    @classmethod
    def from_dict(cls, d) -> LinearData:
        init = d.get("init", {})
        if not isinstance(init, dict):
            raise ValidationError("init", "must be a table (scale, seed)")
        unknown = sorted(set(d) - set(cls.toml_keys)) + \
            [f"init.{key}" for key in sorted(set(init) - {"scale", "seed"})]
        if unknown or "teacher" not in d:
            raise ValidationError(unknown[0] if unknown else "teacher",
                                  "unknown key" if unknown else "is missing")
        return cls(d["teacher"], d.get("hidden", 1), init.get("scale", 0.1),
                   init.get("seed", 0))

    @classmethod
    def preset_table(cls) -> dict:
        return {"linear2-scalar": lambda: cls(((2.0,),)),
                "linear2-small": lambda: cls(((1.0, 0.5, 0.0), (0.0, 2.0, -1.0)), hidden=2)}


class LinearTrajectory(SolverOutput):
    """``W1(t)`` (n, k, d), ``W2(t)`` (n, m, k) and the loss ``L(t)`` at the times ``t``."""

    def __init__(self, t, W1, W2, loss, stats=None, meta=None, data=None):
        self.t, self.W1, self.W2, self.loss = t, W1, W2, loss
        self.stats, self.meta, self.series = dict(stats or {}), dict(meta or {}), {}
        self.data = data

    def save(self, path, field: str = "path"):
        """Write the series and the JSON of ``stats``, ``meta``, ``data`` as ``.npz``."""
        text = json.dumps(jsonable({"stats": self.stats, "meta": self.meta,
                                    "data": self.data.to_dict()}))
        return atomic_write_npz(path, {"t": self.t, "W1": self.W1, "W2": self.W2,
                                       "loss": self.loss, "metadata": np.array(text)}, field)

    def summary_table(self, rows: int = 8, width: int | None = None) -> str:
        """``t`` and ``L`` at about ``rows`` evenly spaced outputs (``odeflow run``; two
        columns always fit ``width``)."""
        index = np.unique(np.linspace(0, self.t.size - 1, rows).astype(int))
        return "\n".join(f"t = {self.t[i]:<10.4g} L = {self.loss[i]:.6g}" for i in index)


class LinearPopulation(Field):
    """The gradient flow ``theta' = -rate grad L(theta)``, ``theta = (W1, W2)`` flat.

    ``grad_W1 L = W2^T E``, ``grad_W2 L = E W1^T`` with ``E = W2 W1 - A``; ``start``
    is a flat ``theta`` (default: the data's seeded start).
    """

    name, has_jacobian = "population", True

    def __init__(self, data: LinearData, rate: float = 1.0, start=None):
        super().__init__()
        if not isinstance(data, LinearData):
            raise ValidationError("data", f"must be a LinearData, got {type(data).__name__}")
        self.data, self.rate, self.A = data, validate_positive(rate, "rate"), np.array(data.teacher)
        (self.m, self.d), self.k = self.A.shape, data.hidden
        theta = data.initial_parameters() if start is None else as_real_array(start, "start")
        if theta.shape != (self.size,) or not np.all(np.isfinite(theta)):
            raise ValidationError("start", f"must be {self.size} finite numbers (W1, W2 flat)")
        self.theta0 = theta

    @property
    def size(self) -> int:
        return self.k * (self.d + self.m)

    @property
    def rate_vector(self) -> np.ndarray:
        return np.full(self.size, self.rate)

    def split(self, y):
        """``(W1, W2)`` of flat states ``y`` (..., size)."""
        cut, lead = self.k * self.d, y.shape[:-1]
        return (y[..., :cut].reshape(*lead, self.k, self.d),
                y[..., cut:].reshape(*lead, self.m, self.k))

    def gradients(self, states) -> np.ndarray:
        """``-grad L`` of each row of ``states`` (P, size)."""
        W1, W2 = self.split(states)
        E = W2 @ W1 - self.A
        lead = states.shape[:-1]
        return -np.concatenate([(W2.swapaxes(-1, -2) @ E).reshape(*lead, -1),
                                (E @ W1.swapaxes(-1, -2)).reshape(*lead, -1)], axis=-1)

    def gradient(self, y):
        return self.gradients(y)

    def initial_state(self):
        return self.theta0.copy()

    def rhs(self, t, y):
        self.nfev += 1
        return self.rate * self.gradient(y)

    def jacobian(self, t, y):
        """``dF/dtheta``: the directional derivative of ``F`` along each unit vector."""
        self.njev += 1
        W1, W2 = self.split(y)
        D1, D2 = self.split(np.eye(self.size))
        E, dE = W2 @ W1 - self.A, D2 @ W1 + W2 @ D1
        d1 = D2.swapaxes(-1, -2) @ E + W2.T @ dE
        d2 = dE @ W1.T + E @ D1.swapaxes(-1, -2)
        return -self.rate * np.concatenate([d1.reshape(self.size, -1),
                                            d2.reshape(self.size, -1)], axis=1).T

    def loss(self, states) -> np.ndarray:
        """``L = 1/2 ||W2 W1 - A||_F^2`` of each state."""
        W1, W2 = self.split(states)
        return 0.5 * np.sum((W2 @ W1 - self.A) ** 2, axis=(-2, -1))

    def trajectory(self, t, states, stats):
        W1, W2 = self.split(states)
        return LinearTrajectory(t, W1, W2, self.loss(states), stats, self.parameters(),
                                self.data)

    def parameters(self) -> dict:
        return {"flow": self.name, "rate": self.rate}


def balanced_scalar(t, a: float, u0: float, rate: float = 1.0) -> np.ndarray:
    """``u = w1 w2`` of the scalar network from ``w1 = w2``, ``0 < u0 < a``: the logistic
    ``u' = 2 rate u (a - u)``, ``u = a expit(2 a rate t + ln(u0 / (a - u0)))``."""
    z = 2.0 * a * rate * np.asarray(t, float) + np.log(u0) - np.log(a - u0)
    return a * np.exp(log_expit(z))


def _check_logistic(settings, name: str) -> list:
    t, a, s = np.geomspace(1e-2, 10.0, 60), 2.0, 0.1
    traj = solve(LinearData(((a,),)), start=[s, s], t_span=(0.0, 10.0), t_eval=t,
                 method=settings.method, rtol=settings.rtol, atol=settings.atol, progress=False)
    err = relative_error(traj.W2[:, 0, 0] * traj.W1[:, 0, 0], balanced_scalar(t, a, s * s))
    return [CheckResult(name, "u(t) = w1 w2", "u' = 2u(a - u)", "d = 1, a = 2, w1 = w2 = 0.1",
                        err, settings.tolerance, note="t in [0.01, 10], u from 0.01 to a")]


CHECKS = CheckFamily("linear2", {"CF-LIN1": ("u(t) = w1 w2", "u' = 2u(a - u)")},
                     context=lambda settings: settings, run=_check_logistic, position=9,
                     grid="t in [0.01, 10] (60 log-spaced points)")


def _loss_outputs(result, times, sizes) -> dict:
    out = outputs.empty_outputs(sizes, LOSS_VARIABLES)
    cols, rows = outputs.grid_columns(times, result.t)
    out["loss"][cols] = result.loss[rows]
    outputs.put_stats(out, result.stats)
    return out


LOSS_VARIABLES = {"loss": (("time",), "float64"), **outputs.BOOKKEEPING_VARIABLES}
LOSS_OUTPUTS = outputs.OutputSet(
    "linear2", LOSS_VARIABLES,
    {"loss": {"long_name": "population loss 1/2 ||W2 W1 - A||_F^2"},
     **{k: outputs.ATTRS[k] for k in outputs.BOOKKEEPING}},
    lambda models, times: {"time": len(times)}, lambda models, sizes: {}, _loss_outputs)


def run_point(data, values, times):
    """One sweep point: the model with its dotted fields (``init.scale``) set, solved."""
    model = edited_model(data, {k: v for k, v in values.items() if "." in k})
    return solve(model, rate=values["rate"], t_span=(0.0, values["t_end"]), t_eval=times,
                 method=values["method"], rtol=values["rtol"], atol=values["atol"],
                 progress=False)


TASK_KINDS = (TaskKind("linear2_flow", "flow", run_point, (Parameter("rate", 1.0),
                                                           *SOLVE_PARAMETERS),
                       outputs=LOSS_OUTPUTS, model_family="linear2",
                       default_preset="linear2-small", model_fields=True),)


def plot_loss(*, data=None, t_end: float = 20.0, flow: str = "population"):
    """The loss ``L(t)`` on a log scale (``data``: a LinearData or a preset name)."""
    from matplotlib.figure import Figure

    if not isinstance(data, LinearData):
        data = LinearData.preset(data or "linear2-small")
    traj = solve(data, flow=flow, t_span=(0.0, t_end), progress=False)
    fig = Figure()
    ax = fig.subplots()
    ax.semilogy(traj.t, traj.loss)
    ax.set(xlabel="t (flow time)", ylabel="L", title="two-layer linear network")
    return fig


def linear_models():
    """A hypothesis strategy of valid :class:`LinearData`: teachers of 1-3 rows and columns
    with entries in ``[-2, 2]``, hidden width 1-3, ``init_scale`` in ``[0.01, 1]``, any seed
    (the family's hook, :data:`DATA_MODELS`)."""
    from hypothesis import strategies as st

    rows = st.lists(st.floats(-2.0, 2.0), min_size=1, max_size=3)
    teachers = rows.flatmap(lambda row: st.lists(
        st.lists(st.floats(-2.0, 2.0), min_size=len(row), max_size=len(row)),
        min_size=0, max_size=2).map(lambda more: [row, *more]))
    return st.builds(LinearData, teachers, st.integers(1, 3), st.floats(0.01, 1.0),
                     st.integers(0, 2**32 - 1))


#: The family's strategies (``Family.strategies`` names this module): name -> strategy.
DATA_MODELS = {"linear2": linear_models}


class Linear2(Family):
    """Two-layer linear network on Gaussian data with a linear teacher."""

    name = "linear2"
    title = "two-layer linear network y = W2 W1 x on Gaussian data (Saxe et al. 2014)"
    data_type = f"{__name__}:LinearData"
    flows = {"population": f"{__name__}:LinearPopulation"}
    default_flow = "population"
    solve_defaults = {"rate": 1.0}
    run_options = {"rate": (float, None, "learning rate eta of the gradient flow (1)")}
    preset_names = ("linear2-scalar", "linear2-small")
    checks, check_names = f"{__name__}:CHECKS", ("CF-LIN1",)
    figures = (("linear2-loss", f"{__name__}:plot_loss", "linear network: L(t)",
                ("data", "t_end", "flow")),)
    sweep_tasks = f"{__name__}:TASK_KINDS"
    exports = {"LinearData": f"{__name__}:LinearData"}
    strategies = __name__
    docs = "families.md"
