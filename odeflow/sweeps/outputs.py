"""The named outputs of a sweep point, and how one result becomes them.

These are the outputs of the Scan and Snap tasks (``induction_flow`` has its
own, :mod:`odeflow.sweeps.induction`). Every point yields the same variables
(padded with NaN where a task does not define one, e.g. ``J`` for the Sec. 6
system, or where a smaller preset has fewer classes or tokens), so they stack
into labelled arrays:

==============  ==================  ====================================================
variable        dims (per point)    meaning
==============  ==================  ====================================================
``logits``      class, token        ``z_{psi(n), l}`` at the end (each class's query row)
``entropy``     time                distinct-token attention entropy (paper Fig. 6)
``J``           time                the objective of Eqn 2 (where a decoder is recorded;
                                    ``adam``: the first and last step)
``B``           class, time         ``B_n(t)`` of Eqn 98 (reduced and snap flows)
``t0``          class               crossover time where ``exp(h) = M - 1`` (CF2)
``nfev``        -                   right-hand-side evaluations (steps for a run)
``njev``        -                   Jacobian evaluations (flows; -1 for a run)
``nlu``         -                   LU decompositions (flows; -1 for a run)
``status``      -                   ``solve_ivp`` status (0: reached the end; -1: failed)
``wall_time``   -                   seconds of the solve or training run (NaN: not timed)
``error``       -                   ``""`` or the point's error, ``"SolveError: ..."``
``computed``    -                   how many times the point was computed and stored
==============  ==================  ====================================================

``wall_time`` is the one output that differs from run to run (:data:`VARYING`);
every other output is the same bit for bit on every backend. A store written
before ``njev``, ``nlu`` and ``wall_time`` existed gets them (fill values for
its points) when it is resumed (:func:`odeflow.sweeps.run.add_missing_outputs`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from odeflow.analysis.diagnostics import transition_time
from odeflow.analysis.measures import distinct_entropy
from odeflow.errors import ValidationError
from odeflow.results import Trajectory

#: The per-point bookkeeping every task's outputs end with (``computed`` last), with
#: their dims and dtypes.
BOOKKEEPING_VARIABLES = {
    "nfev": ((), "int64"),
    "njev": ((), "int64"),
    "nlu": ((), "int64"),
    "status": ((), "int64"),
    "wall_time": ((), "float64"),
    "error": ((), "str"),
    "computed": ((), "int64"),
}

#: Per-point dims and dtype of each variable (``time``, ``class``, ``token`` are shared).
VARIABLES = {
    "logits": (("class", "token"), "float64"),
    "entropy": (("time",), "float64"),
    "J": (("time",), "float64"),
    "B": (("class", "time"), "float64"),
    "t0": (("class",), "float64"),
    **BOOKKEEPING_VARIABLES,
}

#: Outputs that differ from run to run of the same point (timings).
VARYING = ("wall_time",)

#: Outputs that stores written by earlier versions of odeflow lack; a resumed sweep adds
#: them (:func:`odeflow.sweeps.run.add_missing_outputs`). Any other missing output is damage.
ADDED_LATER = ("njev", "nlu", "wall_time")

#: Values of a point that has not been computed (and of an output a task does not define).
FILL = {"float64": np.nan, "int64": -1, "str": ""}

#: Descriptions written as variable attributes.
ATTRS = {
    "logits": {"long_name": "final attention logits z_{psi(n), l}(t_end) of each class's "
                            "query token (Eqns 3-4)"},
    "entropy": {"long_name": "attention entropy on the distinct tokens, mean over classes",
                "units": "nats",
                "description": "c_n(l) ~ c_{l|n} exp(z_{m,l}) over G_DT(n), normalised; "
                               "entropy averaged over classes (Scan and Snap, Fig. 6)"},
    "J": {"long_name": "objective J(t) of Eqn 2 (NaN where no decoder is recorded)"},
    "B": {"long_name": "B_n(t) = eta_Z pi_n int gamma xi_n ds (Eqn 98)",
          "description": "recorded by the reduced and snap flows; NaN for the others"},
    "t0": {"long_name": "crossover time t_0 where exp(h_n) = M - 1 (CF2)",
           "description": "NaN when the margin has not reached ln(M - 1) by the horizon"},
    "nfev": {"long_name": "right-hand-side evaluations (solve_ivp nfev; steps for runs)"},
    "njev": {"long_name": "Jacobian evaluations (solve_ivp njev; -1 for runs)"},
    "nlu": {"long_name": "LU decompositions (solve_ivp nlu; -1 for runs)"},
    "status": {"long_name": "solve_ivp status: 0 reached the end; -1 the point failed"},
    "wall_time": {"long_name": "wall time of the point's solve or training run",
                  "units": "s", "description": "varies from run to run; NaN when not timed"},
    "error": {"long_name": "error of a failed point ('' when it succeeded)"},
    "computed": {"long_name": "times this point was computed and stored (0: pending)"},
}


def empty_outputs(sizes: dict, variables: dict = VARIABLES) -> dict:
    """Fill-valued outputs of one point; ``sizes`` maps each per-point dim of
    ``variables`` (Scan and Snap: ``class``, ``token``, ``time``) to its size."""
    out = {}
    for name, (dims, dtype) in variables.items():
        shape = tuple(sizes[d] for d in dims)
        if dtype == "str":
            out[name] = ""
        else:
            out[name] = np.full(shape, FILL[dtype], dtype=dtype)
    out["computed"] = np.int64(1)
    return out


def point_outputs(result, times: np.ndarray, sizes: dict) -> dict:
    """The named outputs of one solve or training run on the shared ``times``.

    ``result`` is a :class:`~odeflow.results.Trajectory` or a
    :class:`~odeflow.results.SnapResult`; its times must be a subset of
    ``times`` (plus, for a flow, its own horizon, used for the final logits).
    """
    out = empty_outputs(sizes)
    cols, rows = grid_columns(times, result.t)

    def put(name, series):
        out[name][..., cols] = np.asarray(series)[..., rows]

    put_stats(out, result.stats)
    try:
        t0 = np.asarray(transition_time(result), dtype=float)
    except ValidationError:  # the margin has not reached ln(M - 1) by the horizon
        t0 = np.nan
    if isinstance(result, Trajectory):
        data = result.data
        K = data.num_classes
        out["t0"][:K] = t0
        for k, m in enumerate(data.query_tokens[data.class_query_index]):
            out["logits"][k, :data.vocab_size] = result.logits(int(m))[-1]
        try:
            put("entropy", distinct_entropy(data, result.z_active))
        except ValidationError:  # no class has distinct tokens: no entropy to report
            pass
        if result.decoder_lumped is not None:
            put("J", result.objective)
        elif "J" in result.series:  # a run that knows J only at some steps (adam)
            put("J", result.series["J"])
        if "B" in result.series:
            out["B"][:K, cols] = result.series["B"][rows].T
    else:  # SnapResult: one B and one t_0 shared by every class
        K = result.data.num_classes
        out["t0"][:K] = t0
        out["B"][:K, cols] = result.B[rows][None, :]
    return out


def failed_outputs(exc: BaseException, sizes: dict, variables: dict = VARIABLES) -> dict:
    """Outputs of a point that raised ``exc``: fill values, status -1 and the error."""
    out = empty_outputs(sizes, variables)
    stats = getattr(exc, "stats", {}) or {}
    if not isinstance(stats, dict):
        stats = {}
    put_stats(out, stats)
    out["status"] = np.int64(-1)
    out["nfev"] = np.int64(stats.get("nfev", -1))  # as far as the solve got; no steps count
    out["error"] = f"{type(exc).__name__}: {exc}"
    return out


def grid_columns(times: np.ndarray, t) -> tuple:
    """``(cols, rows)``: the columns of the shared ``times`` that a result's times ``t``
    fall on, and the mask of those of its rows (its other times are off the grid)."""
    where = np.searchsorted(times, t).clip(0, times.size - 1)
    rows = times[where] == t
    return where[rows], rows


def put_stats(out: dict, stats: dict) -> None:
    """The bookkeeping of ``stats`` into ``out``: ``nfev`` (a training run's ``steps``),
    ``njev``, ``nlu``, ``status``, ``wall_time`` (-1, 0 and NaN where absent)."""
    out["nfev"] = np.int64(stats.get("nfev", stats.get("steps", -1)))
    for name in ("njev", "nlu"):
        out[name] = np.int64(stats.get(name, -1))
    out["status"] = np.int64(stats.get("status", 0))
    out["wall_time"] = np.float64(stats.get("wall_time", np.nan))


#: Outputs every task's set holds: the solver's bookkeeping of one point.
BOOKKEEPING = tuple(BOOKKEEPING_VARIABLES)


@dataclass(frozen=True)
class OutputSet:
    """The outputs of one kind of task: variables, their sizes and coordinates, and how a
    result becomes them.

    Parameters
    ----------
    name : str
    variables : mapping
        Output name -> ``(per-point dims, dtype)``; every set holds
        :data:`BOOKKEEPING` (``computed`` last).
    attrs : mapping
        Output name -> variable attributes.
    sizes : callable
        ``sizes(models, times) -> {dim: size}`` over every per-point dim (``time``
        included); ``models`` are the sweep's data models. A ValidationError it
        raises names the field (data models that cannot share one store).
    coords : callable
        ``coords(models, sizes) -> {dim: values}`` of every per-point dim but ``time``.
    outputs : callable
        ``outputs(result, times, sizes) -> dict``: the named outputs of one result.
    added_later : tuple of str
        Outputs that stores written by earlier versions lack (given fill values on resume).
    """

    name: str
    variables: dict
    attrs: dict
    sizes: Callable
    coords: Callable
    outputs: Callable
    added_later: tuple = field(default=())

    def failed(self, exc: BaseException, sizes: dict) -> dict:
        """Outputs of a point that raised ``exc`` (:func:`failed_outputs`)."""
        return failed_outputs(exc, sizes, self.variables)


def scan_snap_sizes(models, times) -> dict:
    """Sizes of the Scan and Snap outputs: the largest ``class`` and ``token`` counts."""
    return {"class": max(d.num_classes for d in models),
            "token": max(d.vocab_size for d in models), "time": len(times)}


def numbered_coords(models, sizes: dict) -> dict:
    """``0, 1, ...`` along every per-point dim but ``time`` (``class``, ``token``)."""
    return {dim: np.arange(n) for dim, n in sizes.items() if dim != "time"}


#: The outputs of the Scan and Snap tasks (flows and training runs).
SCAN_SNAP = OutputSet("scan_snap", VARIABLES, ATTRS, scan_snap_sizes, numbered_coords,
                      point_outputs, ADDED_LATER)
