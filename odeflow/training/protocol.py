"""The paper's training protocol (Sec. 8, Figs. 4-6; ``docs/reproduce.md``).

The authors train the reparameterised 1-layer model with two optimisers, one
for the decoder ``Y`` (rate ``eta_Y``) and one for the attention logits ``Z``
(rate ``eta_Z``), on the mean cross-entropy of a fresh batch each step:

- SGD with momentum in the usual deep-learning form (PyTorch's ``SGD``, no
  dampening, no Nesterov): ``g <- g + lambda theta`` (weight decay
  ``lambda``, optional), ``v <- mu v + g``, ``theta <- theta - eta v``;
- Adam (PyTorch's ``Adam``): ``g <- g + lambda theta``,
  ``m <- b1 m + (1 - b1) g``, ``s <- b2 s + (1 - b2) g^2``,
  ``theta <- theta - eta (m / (1 - b1^k)) / (sqrt(s / (1 - b2^k)) + eps)``,
  ``(b1, b2) = (0.9, 0.999)``, ``eps = 1e-8``.

``g`` is the gradient of the loss (descent on the loss is ascent on ``J``).

Initialisation: ``zero`` (Fig. 4) or ``uniform``: both ``Y`` and ``Z`` drawn
entrywise from ``U[-1/sqrt(M), 1/sqrt(M)]`` (a bias-free ``M x M`` linear
layer's default; Fig. 6), from ``numpy.random.default_rng(seed)``: first
``Y`` (``M x M``, row-major), then ``Z``, then the batches.

State. From a zero start the non-next decoder rows stay equal and the columns
of tokens that never occur stay zero under every optimiser here (all updates
are elementwise in the gradient, which is equal on tied rows and zero on
unused columns), so the run keeps the lumped state of
:class:`odeflow.fields.ExactFlow` exactly. A uniform start breaks the symmetry
of the rows: the run then keeps the decoder *un-lumped*, all ``M`` output rows
over the active columns (the inactive columns of ``Y`` multiply a zero feature
and never change the loss). ``Z`` is kept on the rows of the query tokens in
use and the active columns; its other entries never enter the loss (with
weight decay they would shrink, which changes nothing; they are reported at
their initial values).

Batches: ``B`` sequences of length ``T`` each step, drawn as token counts
(:mod:`odeflow.training.counts`; a sequence enters the model only through
them), so a step costs ``O(B L)`` whatever ``T``.

Seeds: an ensemble advances every seed together, one array operation per
step for all of them; member ``i`` is identical to a run with seed ``seeds[i]``
alone (each draws from its own generator).
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import asdict, dataclass

import numpy as np
from threadpoolctl import threadpool_limits

from odeflow.data import DataModel, as_real_number, validate_positive
from odeflow.errors import ValidationError
from odeflow.fields.optimizers import Adam, GradientDescent, Momentum, Optimizer
from odeflow.training.api import check_optimizer, old_forms, record_marks, run_seeds
from odeflow.training.batch import (  # noqa: F401  (re-exported: the public API)
    LumpedLayout,
    UnlumpedLayout,
    decoder_in_token_order,
    decoder_row_order,
    unlump_decoder,
)
from odeflow.training.common import (
    StepProgress,
    check_count,
    check_fraction,
    diverged,
    warmup_steps,
    warmup_time,
)
from odeflow.training.counts import counts_loss_and_gradient, sample_counts
from odeflow.training.training_run import TrainingRun

#: Optimisers of :class:`Protocol`.
OPTIMIZERS = ("sgd", "adam")
#: Initialisations of :class:`Protocol`.
INITS = ("zero", "uniform")


def _check_nonnegative(value, field_name: str) -> float:
    x = as_real_number(value, field_name, "finite and >= 0")
    if not (math.isfinite(x) and x >= 0):
        raise ValidationError(field_name, f"must be finite and >= 0, got {value!r}")
    return x


@dataclass(frozen=True)
class Protocol:
    """Settings of one training run (the paper's Sec. 8); checked on construction.

    Parameters
    ----------
    optimizer : {"sgd", "adam"} or Optimizer
        The same kind of optimiser for ``Y`` and ``Z``, each with its own state
        and rate. An optimiser object names it too: ``odeflow.Momentum(mu)`` is
        ``"sgd"`` with ``momentum=mu``, ``GradientDescent()`` is ``"sgd"`` with
        ``momentum=0``, ``odeflow.Adam(betas, eps)`` is ``"adam"`` with those
        ``betas`` and ``eps`` (their other settings describe the flows, not the
        steps); the protocol then holds the string form.
    eta_y, eta_z : float
        Learning rates of the decoder and of the attention logits (``> 0``).
    momentum : float
        ``mu`` in ``[0, 1)`` for SGD (0.9 in the paper); unused by Adam.
    betas : (float, float)
        Adam's ``(b1, b2)``, each in ``[0, 1)``.
    eps : float
        Adam's ``eps > 0``.
    weight_decay : float
        ``lambda >= 0`` (coupled, PyTorch's form); 0 in the paper.
    init : {"zero", "uniform"}
        Initial ``Y`` and ``Z``.
    batch_size, seq_len, steps : int
        ``B >= 1`` sequences of length ``T >= 2`` per step, ``steps >= 1``.

    Raises
    ------
    ValidationError
        Naming the field, for any value outside the ranges above.
    """

    optimizer: str = "sgd"
    eta_y: float = 1.0
    eta_z: float = 1.0
    momentum: float = 0.9
    betas: tuple = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    init: str = "zero"
    batch_size: int = 128
    seq_len: int = 128
    steps: int = 100

    def __post_init__(self):
        set_ = object.__setattr__
        if isinstance(self.optimizer, Optimizer):
            for name, value in _protocol_fields(self.optimizer, self).items():
                set_(self, name, value)
        if self.optimizer not in OPTIMIZERS:
            raise ValidationError("optimizer", f"must be one of {list(OPTIMIZERS)}, "
                                  f"got {self.optimizer!r}")
        if self.init not in INITS:
            raise ValidationError("init", f"must be one of {list(INITS)}, got {self.init!r}")
        set_(self, "eta_y", validate_positive(self.eta_y, "eta_y"))
        set_(self, "eta_z", validate_positive(self.eta_z, "eta_z"))
        set_(self, "momentum", check_fraction(self.momentum, "momentum"))
        betas = self.betas
        if isinstance(betas, (str, bytes)) or not hasattr(betas, "__len__") or len(betas) != 2:
            raise ValidationError("betas", f"must be two numbers (b1, b2), got {betas!r}")
        set_(self, "betas", (check_fraction(betas[0], "betas[0]"),
                             check_fraction(betas[1], "betas[1]")))
        set_(self, "eps", validate_positive(self.eps, "eps"))
        set_(self, "weight_decay", _check_nonnegative(self.weight_decay, "weight_decay"))
        set_(self, "batch_size", check_count(self.batch_size, "batch_size"))
        set_(self, "seq_len", check_count(self.seq_len, "seq_len", minimum=2))
        set_(self, "steps", check_count(self.steps, "steps"))

    def replace(self, **changes) -> Protocol:
        """A copy with some fields changed (checked again)."""
        return Protocol(**{**asdict(self), **changes})

    def options(self) -> dict:
        """The keywords of :func:`train` that this protocol stands for:
        ``train(data, **protocol.options(), seeds=...)`` is its run."""
        return {"steps": self.steps, "eta_y": self.eta_y, "eta_z": self.eta_z,
                "optimizer": self.update_rule(), "start": self.init,
                "batch_size": self.batch_size, "seq_len": self.seq_len,
                "weight_decay": self.weight_decay}

    def to_dict(self) -> dict:
        d = asdict(self)
        d["betas"] = list(self.betas)
        return d

    @property
    def time_scale(self) -> float:
        """Large-step slope of :meth:`flow_time`: ``1 / (1 - mu)`` for SGD, 1 for Adam."""
        return 1.0 / (1.0 - self.momentum) if self.optimizer == "sgd" else 1.0

    @property
    def time_map(self) -> str:
        """Which map :meth:`flow_time` uses, in words (for CSVs, figures and docs)."""
        if self.optimizer != "sgd":
            return "t = k (Adam: no time map)"
        if self.momentum == 0.0:
            return "t = k"
        return (f"warm-up map t_k = [k - mu (1 - mu^k)/(1 - mu)]/(1 - mu), "
                f"mu = {self.momentum:g}")

    def flow_time(self, steps) -> np.ndarray:
        """Flow time of step ``k``: the warm-up map.

        ``t_k = [k - mu (1 - mu^k) / (1 - mu)] / (1 - mu)``
        (:func:`odeflow.training.common.warmup_time`): ``k`` steps of
        heavy-ball SGD from a zero velocity with rates ``eta`` move the
        parameters, in a constant gradient, as far as the first-order flow
        with the same rates does in time ``t_k`` (``t_1 = 1``, ``t_100 = 910``
        at ``mu = 0.9``); plain gradient steps are ``mu = 0`` (``t_k = k``).
        The map is exact only for a gradient that changes little over
        ``1 / (1 - mu)`` steps; the paper's runs violate that, which the
        optimiser flows (``docs/optimisers.md``) model instead. Adam has no such map:
        its bias-corrected first moment is an *average* of gradients and its
        step is normalised by the second moment, so it is not a rescaled
        gradient flow at all. We place Adam's step ``k`` at ``t = k``;
        comparisons of Adam runs with first-order flows are qualitative only.
        """
        if self.optimizer != "sgd":
            return np.asarray(steps, dtype=float).copy()
        return warmup_time(steps, self.momentum)

    def update_rule(self) -> Optimizer:
        """The optimiser whose ``step`` the run takes: plain gradient steps (SGD at
        ``momentum = 0``), :class:`~odeflow.fields.optimizers.Momentum` or
        :class:`~odeflow.fields.optimizers.Adam` with these settings."""
        if self.optimizer == "adam":
            return Adam(self.betas, self.eps, modified=False)
        return Momentum(self.momentum) if self.momentum else GradientDescent()

    def step_of(self, t) -> np.ndarray:
        """The inverse of :meth:`flow_time` (real steps; for plot axes)."""
        if self.optimizer != "sgd":
            return np.asarray(t, dtype=float).copy()
        return warmup_steps(t, self.momentum)


# ------------------------------------------------------------------ optimisers
def _protocol_fields(optimizer: Optimizer, protocol: Protocol) -> dict:
    """The fields ``optimizer``, ``momentum``, ``betas``, ``eps`` that an optimiser object
    stands for; a ValidationError names a field given with another value."""
    if isinstance(optimizer, Adam):
        fields = {"optimizer": "adam", "betas": optimizer.betas, "eps": optimizer.eps}
    elif isinstance(optimizer, (Momentum, GradientDescent)):
        fields = {"optimizer": "sgd", "momentum": getattr(optimizer, "mu", 0.0)}
    else:
        raise ValidationError("optimizer", f"must be 'sgd', 'adam', odeflow.Momentum or "
                              f"odeflow.Adam, got {type(optimizer).__name__}")
    defaults = {f.name: f.default for f in dataclasses.fields(Protocol)}
    for name, value in fields.items():
        given = getattr(protocol, name)
        if name != "optimizer" and not any(np.array_equal(np.asarray(given, dtype=object),
                                                          np.asarray(x, dtype=object))
                                           for x in (defaults[name], value)):
            raise ValidationError(name, f"is {given!r} but optimizer="
                                  f"{type(optimizer).__name__}(...) says {value!r}; give "
                                  "one of them")
    return fields


class _Optimizer:
    """One optimiser state for one parameter array (leading axis: the seeds), stepped by
    the shared :meth:`odeflow.fields.optimizers.Optimizer.step` (descent: ``rate = -eta``)."""

    def __init__(self, protocol: Protocol, eta: float, shape: tuple):
        self.eta, self.p = eta, protocol
        self.rule = protocol.update_rule()
        self.state = self.rule.init_state(shape)
        self.k = 0

    def step(self, theta: np.ndarray, grad: np.ndarray) -> None:
        """Update ``theta`` in place with the loss gradient ``grad``."""
        if self.p.weight_decay:
            grad = grad + self.p.weight_decay * theta
        self.k += 1
        self.rule.step(theta, grad, self.state, self.k, -self.eta)


# ------------------------------------------------------------------ layouts
def initial_state(data: DataModel, init: str, rng: np.random.Generator | None):
    """``(Y(0), Z(0))`` of one run as full ``M x M`` arrays.

    ``zero``: both zero (``rng`` unused). ``uniform``: ``Y`` then ``Z`` drawn
    entrywise from ``U[-1/sqrt(M), 1/sqrt(M)]`` with ``rng``.
    """
    M = data.vocab_size
    if init == "zero":
        return np.zeros((M, M)), np.zeros((M, M))
    if init != "uniform":
        raise ValidationError("init", f"must be one of {list(INITS)}, got {init!r}")
    bound = 1.0 / math.sqrt(M)
    Y = rng.uniform(-bound, bound, (M, M))
    Z = rng.uniform(-bound, bound, (M, M))
    return Y, Z


def _layout(data: DataModel, init: str, unlumped: bool | None) -> tuple:
    """``(layout, lumped)``: lumped for a zero start unless ``unlumped`` (module docstring)."""
    lumped = init == "zero" if unlumped is None else not unlumped
    if lumped and init != "zero":
        raise ValidationError("unlumped", "a random start needs the un-lumped decoder")
    return (LumpedLayout(data) if lumped else UnlumpedLayout(data)), lumped


def _starts(data: DataModel, init: str, layout, lumped: bool, rngs) -> tuple:
    """``(Y, Z, z_base)`` of every seed's start (:func:`initial_state` with its generator):
    ``Y`` in ``layout`` (zero when lumped), ``Z`` on the query rows and active columns,
    ``z_base`` the query rows over all tokens; the seed axis first."""
    S, active = len(rngs), data.active_tokens
    Y = np.empty((S, layout.R, layout.L))
    Z = np.empty((S, layout.q, layout.L))
    z_base = np.empty((S, layout.q, data.vocab_size))
    for i, rng in enumerate(rngs):
        Y_full, Z_full = initial_state(data, init, rng)
        Y[i] = 0.0 if lumped else Y_full[decoder_row_order(data)][:, active]  # 0: zero init
        z_base[i] = Z_full[data.query_tokens]
        Z[i] = z_base[i][:, active]
    return Y, Z, z_base


def _protocol_options(protocol, options: dict) -> dict:
    """the keywords of its options(): train(data, **protocol.options())"""
    if protocol is None:
        return {}
    if not isinstance(protocol, Protocol):
        raise ValidationError("protocol", f"must be a Protocol, got {type(protocol).__name__}")
    return protocol.options()


def _record_every(value, options: dict) -> dict:
    """'record' (record_every=None, the start and the end only, is record=())"""
    return {"record": () if value is None else value}


@old_forms(positional=("protocol", "seeds", "record_every", "progress", "unlumped"),
           translate={"protocol": _protocol_options, "record_every": _record_every})
def train(data: DataModel, *, steps: int = 100, seeds=1, start=None, optimizer=None,
          batch_size: int = 128, seq_len: int = 128, sample_size=None, seed: int = 0,
          record=None, progress: bool | None = None, eta_y: float = 1.0, eta_z: float = 1.0,
          weight_decay: float = 0.0, unlumped: bool | None = None) -> TrainingRun:
    """Train the 1-layer model with the paper's protocol (Sec. 8), every seed at once.

    The defaults are the paper's Fig. 4 settings: SGD with momentum 0.9,
    ``eta_Y = eta_Z = 1``, a zero start, batches of 128 sequences of length 128,
    100 steps. The keywords are those of every family's ``train`` (``docs/api.md``,
    "Training and runs beside the flow"); :meth:`Protocol.options` gives those of a
    :class:`Protocol`.

    Parameters
    ----------
    data : DataModel
    steps : int, default 100
    seeds : int or sequence of int, default 1
        The seeds, or how many (then ``seed .. seed + seeds - 1``); run ``i`` draws its
        start and batches from ``numpy.random.default_rng(seeds[i])``.
    start : {None, "zero", "uniform"}
        ``Y(0)`` and ``Z(0)``: zero (``None``), or each drawn from
        ``U[-1/sqrt(M), 1/sqrt(M)]`` by the run's generator (Fig. 6).
    optimizer : Optimizer, optional
        ``odeflow.Momentum(mu)`` (default ``Momentum(0.9)``, the paper's),
        ``GradientDescent()`` (plain SGD) or ``odeflow.Adam(betas, eps)``; anything
        else (a number, :class:`Protocol`'s ``"sgd"``/``"adam"``) is refused naming
        ``optimizer`` (:func:`odeflow.training.check_optimizer`).
    batch_size, seq_len : int
        ``B`` sequences of length ``T`` per step, drawn fresh each step.
    sample_size : None
        No fixed sample: given, it is refused (the batches are fresh).
    seed : int, default 0
        The first seed when ``seeds`` is a count.
    record : None, int or sequence of int
        Steps at which ``Z`` is recorded: every step (None), every ``n`` steps, or
        those steps; the start and the last step always.
    progress : bool, optional
        tqdm bar; by default only when stderr is a terminal.
    eta_y, eta_z : float
        Learning rates of the decoder and of the attention logits (Eqns 3-4).
    weight_decay : float
        ``lambda >= 0`` (coupled, PyTorch's form); 0 in the paper.
    unlumped : bool, optional
        Keep all ``M`` decoder rows even from a zero start (by default only
        for ``start="uniform"``, where it is needed); the lumped and un-lumped
        runs from a zero start are the same run (tests check it).

    Returns
    -------
    TrainingRun

    Raises
    ------
    ValidationError
        For invalid input, naming the field.
    SolveError
        When a step leaves the finite numbers.

    Notes
    -----
    Old forms (one release, warning :class:`~odeflow.errors.RenamedWarning`):
    ``train(data, protocol, seeds, record_every, progress, unlumped)``,
    ``protocol=`` (its :meth:`Protocol.options`) and ``record_every=`` (``record``).
    """
    if not isinstance(data, DataModel):
        raise ValidationError("data", f"must be a DataModel, got {type(data).__name__}")
    if sample_size is not None:
        raise ValidationError("sample_size", "Scan and Snap's training draws fresh batches "
                              "each step (no fixed sample); give batch_size")
    if start is not None and not (isinstance(start, str) and start in INITS):
        raise ValidationError("start", f"must be None or one of {list(INITS)} (the runs "
                              f"draw their starts from their seeds), got {start!r:.80}")
    protocol = Protocol(optimizer=Momentum(0.9) if optimizer is None else
                        check_optimizer(optimizer),
                        eta_y=eta_y, eta_z=eta_z, weight_decay=weight_decay,
                        init=start or "zero", batch_size=batch_size, seq_len=seq_len,
                        steps=steps)
    return _train(data, protocol, run_seeds(seeds, seed), record, progress, unlumped)


def _train(data: DataModel, protocol: Protocol, seeds: list, record, progress,
           unlumped) -> TrainingRun:
    """:func:`train` with its settings checked and held in ``protocol``."""
    p = protocol
    marks = record_marks(record, p.steps)
    layout, lumped = _layout(data, p.init, unlumped)
    S, rngs = len(seeds), [np.random.default_rng(s) for s in seeds]
    Y, Z, z_base = _starts(data, p.init, layout, lumped, rngs)
    decoder_initial = Y.copy()
    opt_y, opt_z = _Optimizer(p, p.eta_y, Y.shape), _Optimizer(p, p.eta_z, Z.shape)
    rec_Z = np.empty((marks.size, S, layout.q, layout.L))
    rec_Z[0] = Z
    loss = np.empty((S, p.steps + 1))
    bar = StepProgress(p.steps, progress, f"{p.optimizer} x{S}")
    start = time.perf_counter()
    r, k = 1, 0
    try:
        # the matrix products of a step are small: one BLAS thread is faster than
        # several (docs/validation.md, "Throughput")
        with threadpool_limits(1, user_api="blas"), \
                np.errstate(over="raise", invalid="raise", divide="raise"):
            for k in range(p.steps):
                batch = sample_counts(layout, rngs, p.batch_size, p.seq_len)
                loss[:, k], grad_Y, grad_Z = counts_loss_and_gradient(layout, Y, Z, batch)
                opt_y.step(Y, grad_Y)
                opt_z.step(Z, grad_Z)
                if k + 1 == marks[r]:
                    rec_Z[r] = Z
                    r += 1
                bar.update()
            last = sample_counts(layout, rngs, p.batch_size, p.seq_len)
            loss[:, p.steps], _, _ = counts_loss_and_gradient(layout, Y, Z, last,
                                                              gradient=False)
    except FloatingPointError as exc:
        raise diverged(p.optimizer, k, exc) from None
    finally:
        bar.close()
    wall = time.perf_counter() - start
    stats = {"method": p.optimizer, "steps": p.steps, "runs_together": S, "wall_time": wall,
             "run_steps_per_second": S * p.steps / wall if wall > 0 else float("inf")}
    return TrainingRun(data, p, seeds, marks, np.moveaxis(rec_Z, 0, 1), z_base, loss,
                       decoder_initial, Y.copy(), lumped, stats)
