"""Scan and Snap's flows beside real training (``docs/reproduce.md``, ``docs/optimisers.md``).

:func:`experiment` trains with a protocol (:class:`odeflow.training.protocol.Protocol`)
on any :class:`~odeflow.data.DataModel`, measures the distinct-token entropy
(:mod:`odeflow.analysis.measures`) and puts beside every run the prediction of the
first-order flows at the mapped flow time of the warm-up map
``t_k = [k - mu (1 - mu^k) / (1 - mu)] / (1 - mu)``
(:meth:`Protocol.flow_time`), solved from the zero start with the same rates:

- Level E: ``odeflow.solve(..., flow="exact")`` (Eqns 3-4);
- Level R: ``odeflow.solve(..., flow="reduced")`` (Theorem 1);
- Level T: ``odeflow.solve(..., flow="finite_t")`` (``docs/fidelity.md``) at the
  protocol's sequence length ``T`` with :data:`LEVEL_T_SAMPLES` sampled
  sequences per class.

:data:`LEVELS` lists them (name -> flow and options). From a zero start the flows
start from the runs' initial state exactly. From a random start they are solved
from the zero start unless ``same_start=True``: then Level E and Level T start
from each seed's ``Y(0), Z(0)`` (un-lumped decoder) and Level R from its ``Z(0)``,
at a cost (see :func:`experiment`). Beside the runs also the optimiser flows
(:func:`optimizer_flows`, on the step axis) and the deterministic discrete
optimiser (:func:`discrete_twins`). The papers' figures built from these are
``odeflow reproduce fig4|fig5|fig6``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from odeflow.analysis.measures import distinct_attention, distinct_entropy
from odeflow.data import DataModel
from odeflow.errors import ValidationError, renamed_keywords
from odeflow.fields.base import START_PARTS, split_start
from odeflow.fields.optimizers import Adam, Momentum
from odeflow.solver import solve
from odeflow.training.discrete import optimizer_steps, training_start
from odeflow.training.protocol import Protocol, TrainingRun, train

#: Sampled sequences per class of Level T beside the runs (its error in N at
#: this size is measured in docs/fidelity.md).
LEVEL_T_SAMPLES = 64
#: Levels put beside the runs: name -> (flow, extra solve options). Level T
#: takes ``seq_len`` from the protocol (:func:`level_predictions`).
LEVELS = {"E": ("exact", {}), "R": ("reduced", {}),
          "T": ("finite_t", {"sample_size": LEVEL_T_SAMPLES, "seed": 0})}
#: Levels that carry a decoder and so start from a run's ``Y(0)`` too.
DECODER_LEVELS = ("exact", "finite_t")

#: Optimiser flows put beside the runs (``docs/optimisers.md``): name -> (flow, extra
#: solve options), the level the heavy-ball or Adam ODE wraps; Level T as in
#: :data:`LEVELS`, its right-hand side per class block (``storage="blocked"``: the
#: fastest from a random start, ``docs/benchmarks.md``).
OPTFLOWS = {"E": ("exact", {}),
            "T": ("finite_t", {"sample_size": LEVEL_T_SAMPLES, "seed": 0,
                               "storage": "blocked"})}
#: Tolerances and method of the optimiser-flow solves (per state; explicit: the flows
#: are not stiff in step time at the paper's rates, and a dense Jacobian of an
#: un-lumped Level T state would cost more than the solve).
OPTFLOW_RTOL, OPTFLOW_ATOL, OPTFLOW_METHOD = 1e-5, 1e-7, "RK45"
#: Thresholds of the recall curves (Appendix G, Figs. 11-12): around the uniform
#: level 1/10 of the ten distinct tokens of a class.
RECALL_THRESHOLDS = tuple(np.round(np.linspace(0.02, 0.30, 29), 3).tolist())


@renamed_keywords(START_PARTS)
def level_predictions(data: DataModel, protocol: Protocol, steps, levels=None,
                      rtol: float = 1e-8, atol: float = 1e-10, start=None) -> dict:
    """Each level's trajectory at the flow times of ``steps``, with the run's rates.

    Returns ``{level name: Trajectory}``; the trajectories' ``t`` is
    ``protocol.flow_time(steps)``. ``start = (y0, z0)``, ``y0`` of shape ``(M,
    M)`` and ``z0`` of shape ``(q, M)``, is the initial state (either None: zero;
    old keywords ``y0=``, ``z0=`` warn); Levels E and T take both, Level R only
    ``z0`` (its decoder state is the margin ``h`` from ``W(0) = 0``, Theorem 1).
    Level T runs at the protocol's ``seq_len`` unless its options say otherwise.
    """
    y0, z0 = split_start(start)
    t = protocol.flow_time(steps)
    out = {}
    for name, (flow, options) in (LEVELS if levels is None else levels).items():
        level_start = (y0 if flow in DECODER_LEVELS else None, z0)
        if flow == "finite_t":
            options = {"seq_len": protocol.seq_len, **options}
        out[name] = solve(data, flow=flow, eta_y=protocol.eta_y, eta_z=protocol.eta_z,
                          t_span=(0.0, float(t[-1])), t_eval=t, rtol=rtol, atol=atol,
                          progress=False, start=level_start, **options)
    return out


def optimizer_of(protocol: Protocol):
    """The optimiser flow of a protocol (``docs/optimisers.md``): heavy ball or Adam.

    SGD with momentum ``mu`` -> ``Momentum(mu)`` (the defaults of
    :mod:`odeflow.fields.optimizers`: the heavy-ball ODE with the matched rates
    from rest, step ``k`` read at step time ``k + 1/2``, chosen in
    ``docs/optimisers.md`` against the discrete heavy ball); Adam ->
    ``Adam(betas, eps, start="first_step")`` with its defaults: the recursion's
    own steps while some entry takes its first Adam step, and one more
    (``exact_steps="auto"``), then the ODE read half a step later (``offset=1/2``,
    the staggered reading that makes the recursion the ODE's midpoint rule, CF7
    item 6). From the paper's zero start the attention gradient is exactly zero at
    step 0, so the recursion leaves ``Z`` alone at step 1 and takes its first,
    sign-like attention step at step 2, which no ODE resolves; the ODE from the
    limits at ``s = 0`` put the entropy 0.01-0.1 nats away from the deterministic
    discrete Adam on Level T within one step. The choice is made against that
    recursion (``docs/optimisers.md``), not against the runs; nothing is fitted.
    Weight decay is not part of the optimiser flows (0 in the paper): refused.
    """
    if protocol.weight_decay:
        raise ValidationError("weight_decay", "the optimiser flows have no "
                              f"weight decay; got {protocol.weight_decay}")
    if protocol.optimizer == "sgd":
        return Momentum(protocol.momentum)
    return Adam(protocol.betas, protocol.eps, start="first_step")


@renamed_keywords(START_PARTS)
def optimizer_flows(data: DataModel, protocol: Protocol, steps, levels=None, start=None,
                    rtol: float = OPTFLOW_RTOL, atol: float = OPTFLOW_ATOL,
                    method: str = OPTFLOW_METHOD, optimizer=None) -> dict:
    """The optimiser flow of ``protocol`` over each level, on the step axis.

    Returns ``{name: Trajectory}`` recorded at the steps ``steps`` (step time
    ``s = k``: no time map), with the run's rates, from ``start = (y0, z0)`` (zero
    by default; the same forms as :func:`level_predictions`). ``levels`` maps names
    to ``(flow, options)`` (:data:`OPTFLOWS` by default; Level T runs at the
    protocol's ``seq_len``); ``rtol``, ``atol``, ``method`` those of the solves;
    ``optimizer`` in place of :func:`optimizer_of` the protocol's (e.g. another variant
    of its ODE, as ``docs/make_optimisers.py --grid`` compares).
    """
    steps = np.asarray(steps, dtype=float)
    optimizer = optimizer_of(protocol) if optimizer is None else optimizer
    out = {}
    for name, (flow, options) in (OPTFLOWS if levels is None else levels).items():
        if flow == "finite_t":
            options = {"seq_len": protocol.seq_len, **options}
        out[name] = solve(data, flow=flow, eta_y=protocol.eta_y, eta_z=protocol.eta_z,
                          optimizer=optimizer, t_span=(0.0, float(steps[-1])), t_eval=steps,
                          method=method, rtol=rtol, atol=atol, progress=False,
                          start=split_start(start), **options)
    return out


@renamed_keywords(START_PARTS)
def discrete_twins(data: DataModel, protocol: Protocol, steps, levels=None,
                   start=None) -> dict:
    """The deterministic discrete optimiser on each level, at ``steps``.

    :func:`odeflow.training.optimizer_steps`: the protocol's optimiser, unit steps,
    on the level's exact gradient (Level T: its fixed sample), from ``start = (y0,
    z0)``:
    the runs without minibatch noise. Its distance to the runs is their minibatch
    noise (and, for Level T, its finite sample); its distance to the optimiser flow
    is the flow's discreteness. Returns ``{name: Trajectory}`` on the step axis.
    """
    from odeflow.families import family_named

    steps = np.asarray(steps)
    out = {}
    for name, (flow, options) in (OPTFLOWS if levels is None else levels).items():
        if flow == "finite_t":
            options = {"seq_len": protocol.seq_len, **options}
        field_class = family_named("scan_snap").field_class(flow)
        field = field_class(data, protocol.eta_y, protocol.eta_z, start=start, **options)
        tr = optimizer_steps(field, optimizer_of(protocol), int(steps[-1]), progress=False)
        keep = np.searchsorted(tr.steps, steps)
        out[name] = (tr, keep)
    return out


def optflow_ensemble(data: DataModel, protocol: Protocol, seeds, steps, levels=None) -> tuple:
    """The optimiser flows from each seed's own start: an ensemble of deterministic twins.

    The starts are :func:`odeflow.training.training_start` (each seed's own draw);
    one :func:`optimizer_flows` solve per seed (Level T on its fixed sample, whose
    seed is the level's, not the runs'), not the seeds as one state
    (:func:`odeflow.solver.solve_ensemble`), whose error control needs ``rtol /
    sqrt(S)`` and whose output is ``S`` times larger (``docs/benchmarks.md``).

    Returns ``(entropy, seconds)``: ``{name: ndarray (S, n)}``, the distinct-token
    entropy of each seed's flow at ``steps``, and ``{name: wall seconds}``.
    """
    def member(name, spec, start):
        return optimizer_flows(data, protocol, steps, {name: spec}, start=start)[name].z_active

    return _per_start_entropy(data, protocol, seeds, levels, member)


def _per_start_entropy(data: DataModel, protocol: Protocol, seeds, levels, member) -> tuple:
    """``({name: ndarray (S, n)}, {name: wall seconds})``: the distinct-token entropy of
    ``member(name, spec, start)`` (its ``z_active`` at the recorded steps) from each seed's
    own start, per level of ``levels`` (:data:`OPTFLOWS` by default), timed per level."""
    entropy, seconds = {}, {}
    starts = [training_start(data, s, protocol.init) for s in seeds]
    for name, spec in (OPTFLOWS if levels is None else levels).items():
        began = time.perf_counter()
        entropy[name] = np.array([distinct_entropy(data, member(name, spec, start))
                                  for start in starts])
        seconds[name] = time.perf_counter() - began
    return entropy, seconds


def discrete_ensemble(data: DataModel, protocol: Protocol, seeds, steps, levels=None) -> tuple:
    """The deterministic discrete optimiser from each seed's own start (:func:`discrete_twins`
    per start of :func:`optflow_ensemble`): the runs without minibatch noise, the process the
    optimiser flows approximate.

    Returns ``(entropy, seconds)``: ``{name: ndarray (S, n)}``, the distinct-token entropy
    of each seed's recursion at ``steps``, and ``{name: wall seconds}``.
    """
    steps = np.asarray(steps)

    def member(name, spec, start):
        twin, keep = discrete_twins(data, protocol, steps, {name: spec}, start=start)[name]
        return twin.z_active[keep]

    return _per_start_entropy(data, protocol, seeds, levels, member)


@dataclass
class Experiment:
    """One training ensemble with its measures and the levels beside it.

    Attributes
    ----------
    data : DataModel
    run : TrainingRun
    entropy : ndarray, shape (S, n)
        Distinct-token entropy of each seed at each recorded step.
    levels : dict of str -> Trajectory
        Level E, Level R, ... at the same flow times.
    level_entropy : dict of str -> ndarray, shape (n,)
    seconds : dict
        Wall time of the training and of the flows.
    optflow_loss : dict of str -> ndarray, shape (n,)
        Population loss of each optimiser flow at the recorded
        steps, from the runs' start (zero starts only).
    optflow_entropy : dict of str -> ndarray, shape (n,)
        Its distinct-token entropy (from a random start: the mean over the seeds'
        own starts).
    optflow_members : dict of str -> ndarray, shape (S, n_o)
        From a random start: each seed's flow's entropy (the ensemble) at
        :attr:`optflow_steps`.
    optflow_steps : ndarray, shape (n_o,)
        The steps of ``optflow_members`` and of a random start's
        ``optflow_entropy`` (the runs' recorded steps unless
        :func:`experiment` was given fewer).
    discrete_loss, discrete_entropy : dict of str -> ndarray, shape (n,)
        The same for the deterministic discrete optimiser on each level
        (:func:`discrete_twins`; zero starts only).
    """

    data: DataModel
    run: TrainingRun
    entropy: np.ndarray
    levels: dict
    level_entropy: dict
    seconds: dict = field(default_factory=dict)
    optflow_loss: dict = field(default_factory=dict)
    optflow_entropy: dict = field(default_factory=dict)
    optflow_members: dict = field(default_factory=dict)
    discrete_loss: dict = field(default_factory=dict)
    discrete_entropy: dict = field(default_factory=dict)
    optflow_steps: np.ndarray | None = None

    @property
    def t(self) -> np.ndarray:
        return self.run.t

    def level_loss(self, name: str) -> np.ndarray:
        """Population cross-entropy ``-J(t)`` of a level (Eqn 2) at the recorded times."""
        return -self.levels[name].objective


def experiment(data: DataModel, protocol: Protocol, seeds=10, levels=None,
               progress: bool | None = None, same_start: bool = False,
               optflows=None, optflow_steps=None) -> Experiment:
    """Train ``seeds`` runs with ``protocol`` and solve the levels beside them.

    From a zero start the levels start where the runs do. From a random start
    they are solved from zero unless ``same_start``: then once per seed from
    that seed's ``Y(0), Z(0)`` (Level R: ``Z(0)`` only), and ``level_entropy``
    is the mean over the seeds (``levels`` holds the first seed's trajectories).
    A random-start Level E keeps all ``M`` decoder rows, which makes its solves
    long, so this is off by default.
    ``optflow_steps`` (a random start only): the steps at which the optimiser-flow
    ensemble is recorded, default the runs' recorded steps; Fig. 6 reads only the
    last one (``odeflow reproduce fig6``), and recording every step of the un-lumped state
    costs a large part of a member's solve (``docs/benchmarks.md``).
    """
    start = time.perf_counter()
    run = train(data, **protocol.options(), seeds=seeds, progress=progress)
    trained = time.perf_counter()
    if same_start and protocol.init != "zero":
        per_seed = []
        for i in range(len(run.seeds)):
            y0 = np.zeros((data.vocab_size, data.vocab_size))
            y0[:, data.active_tokens] = run.initial_decoder(i)
            per_seed.append(level_predictions(data, protocol, run.steps, levels,
                                              start=(y0, run.initial_logits(i))))
        flows = per_seed[0]
        level_entropy = {k: np.mean([distinct_entropy(data, f[k].z_active) for f in per_seed],
                                    axis=0) for k in flows}
    else:
        flows = level_predictions(data, protocol, run.steps, levels)
        level_entropy = {k: distinct_entropy(data, tr.z_active) for k, tr in flows.items()}
    solved = time.perf_counter()
    exp = Experiment(data, run, distinct_entropy(data, run.z_active), flows, level_entropy,
                     {"train": trained - start, "flows": solved - trained,
                      "same_start": bool(same_start or protocol.init == "zero")})
    if optflows is None or optflows:
        add_optimizer_flows(exp, optflows, optflow_steps)
    return exp


def add_optimizer_flows(exp: Experiment, levels=None, steps=None) -> None:
    """Put the optimiser flows (``docs/optimisers.md``) beside ``exp``'s runs, on the step axis.

    From a zero start one flow per level (``optflow_loss``, ``optflow_entropy``);
    from a random start an ensemble from every seed's own start
    (``optflow_members``; ``optflow_entropy`` its mean) at ``steps`` (default: the
    runs' recorded steps; ``exp.optflow_steps``). Wall times go into
    ``exp.seconds`` as ``optflow_<name>``.
    """
    data, run = exp.data, exp.run
    levels = OPTFLOWS if levels in (None, True) else levels
    if run.protocol.init == "zero":
        for name, spec in levels.items():
            began = time.perf_counter()
            tr = optimizer_flows(data, run.protocol, run.steps, {name: spec})[name]
            exp.optflow_loss[name] = -tr.objective
            exp.optflow_entropy[name] = distinct_entropy(data, tr.z_active)
            exp.seconds[f"optflow_{name}"] = time.perf_counter() - began
            twin, keep = discrete_twins(data, run.protocol, run.steps, {name: spec})[name]
            exp.discrete_loss[name] = -twin.objective[keep]
            exp.discrete_entropy[name] = distinct_entropy(data, twin.z_active[keep])
        return
    steps = run.steps if steps is None else np.asarray(steps)
    if steps.ndim != 1 or steps.size == 0 or np.any(np.diff(steps) <= 0) \
            or not np.all(np.isin(steps, run.steps)):
        raise ValidationError("optflow_steps", "must be increasing steps the runs recorded "
                              f"(of {run.steps[0]}..{run.steps[-1]}), got {steps!r:.80}")
    exp.optflow_steps = steps
    members, seconds = optflow_ensemble(data, run.protocol, run.seeds, steps, levels)
    for name, H in members.items():
        exp.optflow_members[name] = H
        exp.optflow_entropy[name] = H.mean(axis=0)
        exp.seconds[f"optflow_{name}"] = seconds[name]


def distinct_maps(exp: Experiment) -> np.ndarray:
    """Final distinct-token attention of every seed, shape ``(S, K, L)`` (Figs. 4-5)."""
    return distinct_attention(exp.data, exp.run.z_active[:, -1])

