"""The paper's experiments (Sec. 8, Figs. 4-6) beside the levels (``docs/reproduce.md``).

Each experiment trains with the paper's protocol
(:class:`odeflow.training.protocol.Protocol`), measures what the paper
measures (:mod:`odeflow.analysis.measures`) and puts beside every run the
prediction of the first-order flows at the mapped flow time of the warm-up map
``t_k = [k - mu (1 - mu^k) / (1 - mu)] / (1 - mu)``
(:meth:`Protocol.flow_time`), solved from the zero start with the same rates:

- Level E: ``odeflow.solve(..., flow="exact")`` (Eqns 3-4);
- Level R: ``odeflow.solve(..., flow="reduced")`` (Theorem 1);
- Level T: ``odeflow.solve(..., flow="finite_t")`` (``docs/fidelity.md``) at the
  protocol's sequence length ``T`` with :data:`LEVEL_T_SAMPLES` sampled
  sequences per class.

:data:`LEVELS` lists them (name -> flow and options). From a zero start (Figs. 4-5) the flows
start from the runs' initial state exactly. The Fig. 6 protocol starts from a
uniform random ``Y(0), Z(0)``; the flows are solved from the zero start there
unless ``same_start=True`` (``odeflow reproduce fig6 --same-start``): then Level
E and Level T start from each seed's ``Y(0), Z(0)`` (un-lumped decoder) and Level
R from its ``Z(0)``, at a cost (see :func:`experiment`). The tables say which.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from odeflow.analysis.measures import distinct_attention, distinct_entropy, recall_curve
from odeflow.data import DataModel
from odeflow.data.presets import SYN_MEDIUM_SIZES
from odeflow.errors import ValidationError
from odeflow.fields.optimizers import Adam, Momentum
from odeflow.solver import solve
from odeflow.training.common import check_seeds
from odeflow.training.discrete import optimizer_steps, training_start
from odeflow.training.protocol import Protocol, TrainingRun, train

#: Sampled sequences per class of Level T beside the runs (its error in N at
#: this size is measured in docs/fidelity.md).
LEVEL_T_SAMPLES = 64
#: Levels put beside the runs: name -> (flow, extra solve options). Level T
#: takes ``seq_len`` from the protocol (:func:`level_predictions`).
LEVELS = {"E": ("exact", {}), "R": ("reduced", {}),
          "T": ("finite_t", {"samples_per_class": LEVEL_T_SAMPLES, "seed": 0})}
#: Levels that carry a decoder and so start from a run's ``Y(0)`` too.
DECODER_LEVELS = ("exact", "finite_t")

#: Optimiser flows put beside the runs (``docs/optimisers.md``): name -> (flow, extra
#: solve options), the level the heavy-ball or Adam ODE wraps; Level T as in
#: :data:`LEVELS`, its right-hand side per class block (``storage="blocked"``: the
#: fastest from a random start, ``docs/benchmarks.md``).
OPTFLOWS = {"E": ("exact", {}),
            "T": ("finite_t", {"samples_per_class": LEVEL_T_SAMPLES, "seed": 0,
                               "storage": "blocked"})}
#: Tolerances and method of the optimiser-flow solves (per state; explicit: the flows
#: are not stiff in step time at the paper's rates, and a dense Jacobian of an
#: un-lumped Level T state would cost more than the solve).
OPTFLOW_RTOL, OPTFLOW_ATOL, OPTFLOW_METHOD = 1e-5, 1e-7, "RK45"

#: Fig. 4: syn-small, zero start, SGD with momentum 0.9, eta_Y = eta_Z = 1.
FIG4 = Protocol(optimizer="sgd", eta_y=1.0, eta_z=1.0, momentum=0.9, init="zero",
                batch_size=128, seq_len=128, steps=100)
#: Fig. 5: the same with Adam at two attention rates (the rates of the paper's
#: figure were lost in extraction; these are ours).
FIG5_ETA_Z = (0.1, 1.0)
#: Fig. 6 grid: attention rates and decoder/attention ratios.
FIG6_ETA_Z = (0.5, 1.0, 2.0, 3.0)
FIG6_RATIO = (1.0, 2.0, 5.0, 10.0)
FIG6 = FIG4.replace(init="uniform")
#: Thresholds of the recall curves (Appendix G, Figs. 11-12): around the uniform
#: level 1/10 of the ten distinct tokens of a class.
RECALL_THRESHOLDS = tuple(np.round(np.linspace(0.02, 0.30, 29), 3).tolist())


def level_predictions(data: DataModel, protocol: Protocol, steps, levels=None,
                      rtol: float = 1e-8, atol: float = 1e-10, y0=None, z0=None) -> dict:
    """Each level's trajectory at the flow times of ``steps``, with the run's rates.

    Returns ``{level name: Trajectory}``; the trajectories' ``t`` is
    ``protocol.flow_time(steps)``. ``z0`` (``(q, M)``) and ``y0`` (``(M, M)``)
    give the initial state (zero by default); Levels E and T take both, Level R
    only ``z0`` (its decoder state is the margin ``h`` from ``W(0) = 0``,
    Theorem 1). Level T runs at the protocol's ``seq_len`` unless its options
    say otherwise.
    """
    t = protocol.flow_time(steps)
    out = {}
    for name, (flow, options) in (LEVELS if levels is None else levels).items():
        start = {"z0": z0}
        if y0 is not None and flow in DECODER_LEVELS:
            start["y0"] = y0
        if flow == "finite_t":
            options = {"seq_len": protocol.seq_len, **options}
        out[name] = solve(data, flow=flow, eta_y=protocol.eta_y, eta_z=protocol.eta_z,
                          t_span=(0.0, float(t[-1])), t_eval=t, rtol=rtol, atol=atol,
                          progress=False, **start, **options)
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


def optimizer_flows(data: DataModel, protocol: Protocol, steps, levels=None, y0=None, z0=None,
                    rtol: float = OPTFLOW_RTOL, atol: float = OPTFLOW_ATOL,
                    method: str = OPTFLOW_METHOD, optimizer=None) -> dict:
    """The optimiser flow of ``protocol`` over each level, on the step axis.

    Returns ``{name: Trajectory}`` recorded at the steps ``steps`` (step time
    ``s = k``: no time map), with the run's rates, from ``y0``, ``z0`` (zero by
    default; the same forms as :func:`level_predictions`). ``levels`` maps names
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
        start = {"z0": z0} if y0 is None else {"z0": z0, "y0": y0}
        out[name] = solve(data, flow=flow, eta_y=protocol.eta_y, eta_z=protocol.eta_z,
                          optimizer=optimizer, t_span=(0.0, float(steps[-1])), t_eval=steps,
                          method=method, rtol=rtol, atol=atol, progress=False,
                          **start, **options)
    return out


def discrete_twins(data: DataModel, protocol: Protocol, steps, levels=None, y0=None,
                   z0=None) -> dict:
    """The deterministic discrete optimiser on each level, at ``steps``.

    :func:`odeflow.training.optimizer_steps`: the protocol's optimiser, unit steps,
    on the level's exact gradient (Level T: its fixed sample), from ``y0``, ``z0``:
    the runs without minibatch noise. Its distance to the runs is their minibatch
    noise (and, for Level T, its finite sample); its distance to the optimiser flow
    is the flow's discreteness. Returns ``{name: Trajectory}`` on the step axis.
    """
    from odeflow.fields import SCAN_SNAP

    steps = np.asarray(steps)
    out = {}
    for name, (flow, options) in (OPTFLOWS if levels is None else levels).items():
        if flow == "finite_t":
            options = {"seq_len": protocol.seq_len, **options}
        field = SCAN_SNAP.field_class(flow)(data, protocol.eta_y, protocol.eta_z, z0=z0,
                                            y0=y0, **options)
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
    def member(name, spec, y0, z0):
        return optimizer_flows(data, protocol, steps, {name: spec}, y0=y0, z0=z0)[name].z_active

    return _per_start_entropy(data, protocol, seeds, levels, member)


def _per_start_entropy(data: DataModel, protocol: Protocol, seeds, levels, member) -> tuple:
    """``({name: ndarray (S, n)}, {name: wall seconds})``: the distinct-token entropy of
    ``member(name, spec, y0, z0)`` (its ``z_active`` at the recorded steps) from each seed's
    own start, per level of ``levels`` (:data:`OPTFLOWS` by default), timed per level."""
    entropy, seconds = {}, {}
    starts = [training_start(data, s, protocol.init) for s in seeds]
    for name, spec in (OPTFLOWS if levels is None else levels).items():
        began = time.perf_counter()
        entropy[name] = np.array([distinct_entropy(data, member(name, spec, y0, z0))
                                  for y0, z0 in starts])
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

    def member(name, spec, y0, z0):
        twin, keep = discrete_twins(data, protocol, steps, {name: spec}, y0=y0, z0=z0)[name]
        return twin.z_active[keep]

    return _per_start_entropy(data, protocol, seeds, levels, member)


def fig6_discrete_rows(seeds=10, steps: int = 100, sizes=SYN_MEDIUM_SIZES, eta_zs=FIG6_ETA_Z,
                       ratios=FIG6_RATIO, levels=None) -> list[dict]:
    """The Fig. 6 grid for the deterministic discrete heavy ball (:func:`discrete_ensemble`,
    Level T by default) from the runs' starts (seeds ``0 .. seeds - 1``, the runs' own):
    one row per cell, ``preset, eta_z, ratio, eta_y, seeds, steps``, and per level
    ``discrete_<level>_mean``, ``discrete_<level>_std`` (over the seeds, at ``steps``) and
    ``discrete_<level>_seconds``. No training: the runs' columns are in ``fig6.csv``."""
    levels = {"T": OPTFLOWS["T"]} if levels is None else levels
    rows = []
    for name, data, eta_z, ratio, p in fig6_cells(steps, sizes, eta_zs, ratios):
        H, seconds = discrete_ensemble(data, p, range(seeds), [0, steps], levels)
        row = {"preset": name, "eta_z": eta_z, "ratio": ratio, "eta_y": p.eta_y,
               "seeds": seeds, "steps": steps}
        for level, values in H.items():
            row[f"discrete_{level}_mean"] = float(values[:, -1].mean())
            row[f"discrete_{level}_std"] = float(values[:, -1].std())
            row[f"discrete_{level}_seconds"] = seconds[level]
        rows.append(row)
    return rows


def fig6_cells(steps: int = 100, sizes=SYN_MEDIUM_SIZES, eta_zs=FIG6_ETA_Z, ratios=FIG6_RATIO):
    """The cells of the Fig. 6 grid in order: ``(preset name, DataModel, eta_Z,
    eta_Y/eta_Z, Protocol)`` for ``syn-medium-N x eta_Z x eta_Y/eta_Z`` (the :data:`FIG6`
    protocol at those rates)."""
    for size in sizes:
        name = f"syn-medium-{size}"
        data = DataModel.preset(name)
        for eta_z in eta_zs:
            for ratio in ratios:
                yield (name, data, eta_z, ratio,
                       FIG6.replace(eta_z=eta_z, eta_y=eta_z * ratio, steps=steps))


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
    last one (:func:`fig6_rows`), and recording every step of the un-lumped state
    costs a large part of a member's solve (``docs/benchmarks.md``).
    """
    start = time.perf_counter()
    run = train(data, protocol, seeds=seeds, progress=progress)
    trained = time.perf_counter()
    if same_start and protocol.init != "zero":
        per_seed = []
        for i in range(len(run.seeds)):
            y0 = np.zeros((data.vocab_size, data.vocab_size))
            y0[:, data.active_tokens] = run.initial_decoder(i)
            per_seed.append(level_predictions(data, protocol, run.steps, levels, y0=y0,
                                              z0=run.initial_logits(i)))
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


def fig4(seeds=10, steps: int = 100, progress: bool | None = None) -> Experiment:
    """Fig. 4: syn-small, zero start, SGD (momentum 0.9), ``eta_Y = eta_Z = 1``."""
    return experiment(DataModel.preset("syn-small"), FIG4.replace(steps=steps), seeds,
                      progress=progress)


def fig5(seeds=10, steps: int = 100, progress: bool | None = None) -> list[Experiment]:
    """Fig. 5: the Fig. 4 setting with Adam, one experiment per attention rate."""
    data = DataModel.preset("syn-small")
    return [experiment(data, FIG4.replace(optimizer="adam", eta_z=ez, steps=steps), seeds,
                       progress=progress) for ez in FIG5_ETA_Z]


def fig6_rows(seeds=10, steps: int = 100, sizes=SYN_MEDIUM_SIZES, eta_zs=FIG6_ETA_Z,
              ratios=FIG6_RATIO, progress: bool | None = None,
              same_start: bool = False, optflows=None) -> list[dict]:
    """Fig. 6: final distinct-token entropy over ``syn-medium-N x eta_Z x eta_Y/eta_Z``.

    One row per cell: ``preset, M, eta_z, ratio, eta_y``, the runs' mean and
    standard deviation over seeds (``sgd_mean, sgd_std``), the entropy at the
    start (``initial_mean``), each level's entropy at the mapped flow time
    (``level_E``, ``level_R``, ...; from the zero start, or the mean over the
    seeds' starts with ``same_start``; column ``levels_from``), ``recall``: the
    runs' mean recall at :data:`RECALL_THRESHOLDS` after the last step, the
    optimiser-flow ensemble from the seeds' own starts at the last step
    (``optflow_T_mean``, ``optflow_T_std``, ``optflow_E_mean``, ``optflow_E_std``;
    ``docs/optimisers.md``), wall times (``train_seconds``, ``flow_seconds``,
    ``optflow_<level>_seconds``) and ``time_map`` (the map of ``flow_time``).
    """
    rows = []
    for name, data, eta_z, ratio, p in fig6_cells(steps, sizes, eta_zs, ratios):
        exp = experiment(data, p, seeds, progress=progress, same_start=same_start,
                         optflows=optflows, optflow_steps=[0, steps])
        final = exp.entropy[:, -1]
        row = {"preset": name, "M": data.vocab_size, "eta_z": eta_z, "ratio": ratio,
               "eta_y": p.eta_y, "steps": steps, "flow_time": float(exp.t[-1]),
               "seeds": len(exp.run.seeds), "levels_from": "run start" if
               exp.seconds["same_start"] else "zero",
               "sgd_mean": float(final.mean()),
               "sgd_std": float(final.std()),
               "initial_mean": float(exp.entropy[:, 0].mean())}
        for level, H in exp.level_entropy.items():
            row[f"level_{level}"] = float(H[-1])
        for level, H in exp.optflow_members.items():
            row[f"optflow_{level}_mean"] = float(H[:, -1].mean())
            row[f"optflow_{level}_std"] = float(H[:, -1].std())
        recall = recall_curve(data, exp.run.z_active[:, -1], RECALL_THRESHOLDS)
        row["recall"] = recall.mean(axis=0).tolist()
        row["train_seconds"] = exp.seconds["train"]
        row["flow_seconds"] = exp.seconds["flows"]
        for level in exp.optflow_members:
            row[f"optflow_{level}_seconds"] = exp.seconds[f"optflow_{level}"]
        row["time_map"] = p.time_map     # of flow_time and the level_* columns
        rows.append(row)
    return rows


def trend_summary(rows: list[dict], column: str) -> list[dict]:
    """Per preset: does ``column`` fall with ``eta_Z`` (each ratio) and rise with the ratio?

    Returns one dict per preset with the fraction of adjacent pairs that move
    in the predicted direction along ``eta_Z`` (``falls_with_eta_z``) and
    along ``eta_Y/eta_Z`` (``rises_with_ratio``), and whether every pair does.
    """
    out = []
    for preset in dict.fromkeys(r["preset"] for r in rows):
        cells = [r for r in rows if r["preset"] == preset]
        eta_zs = sorted({r["eta_z"] for r in cells})
        ratios = sorted({r["ratio"] for r in cells})
        grid = np.array([[next(r[column] for r in cells
                               if r["eta_z"] == ez and r["ratio"] == q) for q in ratios]
                         for ez in eta_zs])                          # (eta_z, ratio)
        down_z = np.diff(grid, axis=0) < 0
        up_r = np.diff(grid, axis=1) > 0
        out.append({"preset": preset, "column": column,
                    "falls_with_eta_z": float(down_z.mean()) if down_z.size else float("nan"),
                    "rises_with_ratio": float(up_r.mean()) if up_r.size else float("nan"),
                    "all_fall_with_eta_z": bool(down_z.all()),
                    "all_rise_with_ratio": bool(up_r.all())})
    return out


def distinct_maps(exp: Experiment) -> np.ndarray:
    """Final distinct-token attention of every seed, shape ``(S, K, L)`` (Figs. 4-5)."""
    return distinct_attention(exp.data, exp.run.z_active[:, -1])


# ------------------------------------------------------------------ goals
#: Fig. 6 goal: the optimiser-flow ensemble within this many seed standard
#: deviations of the runs' mean entropy (per cell), in at least FIG6_GOAL_CELLS cells.
FIG6_GOAL_SD = 1.0
FIG6_GOAL_CELLS = 58
#: Fig. 4 goal: the optimiser flow's loss within this relative distance of the runs'
#: mean batch loss at every step of FIG4_GOAL_STEPS.
FIG4_GOAL_REL = 0.25
FIG4_GOAL_STEPS = tuple(range(2, 51, 2))
#: Fig. 5 goal: the Adam flow's entropy within this many seed standard deviations
#: of the Adam runs' mean at every recorded step, for every attention rate.
FIG5_GOAL_SD = 2.0


def _sd_distance(pred: float, mean: float, sd: float) -> float:
    """``|pred - mean| / sd``; 0 when both differences are zero (e.g. a shared zero start),
    ``inf`` when ``sd = 0`` and they differ."""
    diff = abs(pred - mean)
    if sd > 0:
        return diff / sd
    return 0.0 if diff <= 1e-12 * max(1.0, abs(mean)) else float("inf")


def fig6_goal(rows: list[dict], column: str = "optflow_T_mean",
              within: float = FIG6_GOAL_SD) -> dict:
    """How many Fig. 6 cells a prediction ``column`` puts within ``within`` seed sd.

    ``rows`` are the cells of ``fig6.csv`` (``sgd_mean``, ``sgd_std`` and
    ``column``). Returns ``{"cells", "hits", "misses", "distance"}``: ``misses``
    lists the cells outside (``preset, eta_z, ratio, eta_y``, the runs' mean and
    sd, the prediction, ``distance = |prediction - mean| / sd``), ``distance``
    every cell's in row order.
    """
    distance, misses = [], []
    for r in rows:
        d = _sd_distance(float(r[column]), float(r["sgd_mean"]), float(r["sgd_std"]))
        distance.append(d)
        if not d <= within:
            misses.append({"preset": r["preset"], "M": int(r["M"]), "eta_z": float(r["eta_z"]),
                           "ratio": float(r["ratio"]), "eta_y": float(r["eta_y"]),
                           "sgd_mean": float(r["sgd_mean"]), "sgd_std": float(r["sgd_std"]),
                           "prediction": float(r[column]), "distance": d})
    return {"column": column, "within": within, "cells": len(rows),
            "hits": len(rows) - len(misses), "misses": misses, "distance": distance}


def fig4_goal(rows: list[dict], column: str = "optflow_T_loss",
              steps=FIG4_GOAL_STEPS) -> dict:
    """The ratio of a predicted loss ``column`` to the runs' mean batch loss, per step.

    ``rows`` are ``fig4.csv`` (``step``, ``loss_mean`` and ``column``). Returns
    ``{"steps", "ratio", "worst_step", "worst_ratio", "worst_rel"}`` with
    ``worst_rel = max |ratio - 1|`` over ``steps`` (steps beyond the table are
    left out and listed in ``"missing"``).
    """
    by_step = {int(float(r["step"])): r for r in rows}
    present = [k for k in steps if k in by_step]
    ratio = [float(by_step[k][column]) / float(by_step[k]["loss_mean"]) for k in present]
    rel = [abs(x - 1.0) for x in ratio]
    i = int(np.argmax(rel)) if rel else None
    return {"column": column, "steps": present, "ratio": ratio,
            "missing": [k for k in steps if k not in by_step],
            "worst_step": present[i] if rel else None,
            "worst_ratio": ratio[i] if rel else float("nan"),
            "worst_rel": rel[i] if rel else float("nan")}


def fig5_goal(rows: list[dict], column: str = "optflow_T_entropy") -> dict:
    """Worst ``|prediction - mean| / sd`` of the entropy over the recorded steps, per rate.

    ``rows`` are ``fig5.csv`` (``eta_z``, ``step``, ``entropy_mean``,
    ``entropy_std`` and ``column``). Returns ``{eta_z: {"worst", "worst_step",
    "diff", "sd"}}``; a step where the runs' sd is zero counts 0 when the
    prediction equals their mean (the shared zero start) and ``inf`` otherwise.
    """
    out = {}
    for ez in dict.fromkeys(float(r["eta_z"]) for r in rows):
        sub = [r for r in rows if float(r["eta_z"]) == ez]
        d = [_sd_distance(float(r[column]), float(r["entropy_mean"]), float(r["entropy_std"]))
             for r in sub]
        i = int(np.argmax(d))
        out[ez] = {"worst": d[i], "worst_step": int(float(sub[i]["step"])),
                   "diff": float(sub[i][column]) - float(sub[i]["entropy_mean"]),
                   "sd": float(sub[i]["entropy_std"]), "distance": d}
    return out


#: Batch sizes of :func:`miss_study` (the paper's is 128).
MISS_STUDY_BATCHES = (1024,)


def miss_study(rows: list[dict], seeds=10, batches=MISS_STUDY_BATCHES,
               column: str = "optflow_T_mean", within: float = FIG6_GOAL_SD,
               progress: bool | None = None) -> list[dict]:
    """What separates the runs from the optimiser flow in the Fig. 6 cells it misses.

    For each cell of ``rows`` (``fig6.csv``) where ``column`` is more than
    ``within`` seed sd from the runs (:func:`fig6_goal`): the same protocol
    trained again at larger batches (``batch_<B>_mean``, ``batch_<B>_std``,
    ``batch_<B>_seconds``; the same seeds, so the same starts, and the same unit
    steps: only the minibatch noise shrinks, like ``1/sqrt(B)``), and the
    deterministic discrete heavy ball on Level T from the same starts
    (``discrete_T_mean``, ``discrete_T_std``; :func:`discrete_twins`: no minibatch
    noise at all). When the runs move onto the flow as the batch grows, the flow's
    miss is the runs' minibatch noise, not the flow's discreteness or the level.
    Nothing is fitted. Returns one dict per missed cell.
    """
    out = []
    for miss in fig6_goal(rows, column, within)["misses"]:
        data = DataModel.preset(miss["preset"])
        steps = int(next(r["steps"] for r in rows if r["preset"] == miss["preset"]))
        p = FIG6.replace(eta_z=miss["eta_z"], eta_y=miss["eta_y"], steps=steps)
        row = {k: miss[k] for k in ("preset", "M", "eta_z", "ratio", "eta_y", "sgd_mean",
                                    "sgd_std")}
        row[column] = miss["prediction"]
        for B in batches:
            began = time.perf_counter()
            run = train(data, p.replace(batch_size=int(B)), seeds=seeds, record_every=steps,
                        progress=progress)
            H = distinct_entropy(data, run.z_active)[:, -1]
            row[f"batch_{B}_mean"], row[f"batch_{B}_std"] = float(H.mean()), float(H.std())
            row[f"batch_{B}_seconds"] = time.perf_counter() - began
        levels = {"T": OPTFLOWS["T"]}
        H = []
        for s in check_seeds(seeds):
            y0, z0 = training_start(data, s)
            twin, keep = discrete_twins(data, p, [steps], levels, y0=y0, z0=z0)["T"]
            H.append(distinct_entropy(data, twin.z_active[keep])[-1])
        row["discrete_T_mean"], row["discrete_T_std"] = float(np.mean(H)), float(np.std(H))
        out.append(row)
    return out
