"""The Scan and Snap family's sweep tasks: its flows and training runs (``docs/sweeps.md``).

Each flow of :class:`~odeflow.families.scan_snap.ScanSnap` is a task of the same
name (``exact``, ``reduced``, ``snap``, ``finite_t`` with its sample's
``seq_len``, ``sample_size`` (sequences per class) and ``seed``), over the learning rates
``eta_y``, ``eta_z``; the training runs are ``gradient_ascent`` (Lemma 5),
``sgd`` and ``adam`` (Sec. 8). The family's declaration names
:data:`TASK_KINDS` as its ``sweep_tasks``.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from odeflow.fields.optimizers import Momentum
from odeflow.results import Trajectory
from odeflow.solver import solve
from odeflow.sweeps.tasks import SOLVE_PARAMETERS, Parameter, TaskKind
from odeflow.training import Protocol, gradient_ascent, train, train_sgd

#: Parameters of every flow task (the arguments of :func:`odeflow.solve`).
FLOW_PARAMETERS = (Parameter("eta_y", 1.0), Parameter("eta_z", 0.1), *SOLVE_PARAMETERS)

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

def solve_flow(data, values: dict, times: np.ndarray, flow: str, options: tuple = ()):
    """Run one point of a flow task: :func:`odeflow.solve` on the output ``times``.

    ``options`` names the flow's own options among ``values`` (``seed`` too,
    for a flow that draws a sample).
    """
    options = {name: values[name] for name in options}
    return solve(data, flow=flow, eta_y=values["eta_y"], eta_z=values["eta_z"],
                 t_span=(0.0, values["t_end"]), t_eval=times, method=values["method"],
                 rtol=values["rtol"], atol=values["atol"], progress=False, **options)


def flow_task(flow: str, *extra: Parameter, seeded: bool = False,
              renamed: dict | None = None) -> TaskKind:
    """The task kind that solves ``flow`` (a Scan and Snap flow, :mod:`odeflow.families.scan_snap`).

    ``extra`` are the flow's own options (passed to its vector field);
    ``seeded`` flows also take ``seed`` (the sweep's ``seed`` dimension);
    ``renamed``: old parameter names -> new (:class:`~odeflow.sweeps.tasks.TaskKind`).
    """
    options = tuple(p.name for p in extra) + (("seed",) if seeded else ())
    return TaskKind(flow, "flow", partial(solve_flow, flow=flow, options=options),
                    FLOW_PARAMETERS + extra, stochastic=seeded, renamed=dict(renamed or {}))


def run_gradient_ascent(data, values: dict, times: np.ndarray):
    """One point of ``gradient_ascent``: Euler steps of Level E (Lemma 5), recorded at ``times``."""
    return gradient_ascent(data, values["eta_y"], values["eta_z"], values["steps"],
                           record=record_every(times), progress=False)


def run_sgd(data, values: dict, times: np.ndarray):
    """One point of ``sgd``: minibatch SGD on sampled finite-``T`` sequences (the sweep's
    ``momentum`` ``mu`` is the optimiser ``odeflow.Momentum(mu)``, 0 plain steps)."""
    mu = values["momentum"]
    traj = train_sgd(data, values["eta_y"], values["eta_z"], values["steps"],
                     values["batch_size"], values["seq_len"],
                     optimizer=Momentum(mu) if mu else None, seed=values["seed"],
                     record=record_every(times), progress=False)
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
    run = train(data, **adam_protocol(values).options(), seeds=[values["seed"]],
                record=record_every(times), progress=False)
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


#: The Scan and Snap task kinds (the family's ``sweep_tasks``).
TASK_KINDS = (flow_task("exact"), flow_task("reduced"), flow_task("snap"),
              flow_task("finite_t", Parameter("seq_len", 128, "count"),
                        Parameter("sample_size", 64, "count"), seeded=True,
                        renamed={"samples_per_class": "sample_size"}),
              TaskKind("gradient_ascent", "run", run_gradient_ascent, RUN_PARAMETERS),
              TaskKind("sgd", "run", run_sgd, RUN_PARAMETERS + SGD_PARAMETERS,
                       stochastic=True),
              TaskKind("adam", "run", run_adam, RUN_PARAMETERS + ADAM_PARAMETERS,
                       stochastic=True))


