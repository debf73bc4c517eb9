"""Result of the Sec. 6 scalar system (Theorem 4, Eqns 13-14): :class:`SnapResult`.

What ``odeflow.solve(data, flow="snap", ...)`` and :func:`odeflow.solve_snap`
return: the series ``h, z_c, B, Gamma`` of the snap system, its solver
statistics and parameters; ``gamma`` (Eqn 9) and ``xi`` are derived from them.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import expit

from odeflow.data import DataModel
from odeflow.errors import ValidationError
from odeflow.results.files import read_result_file, stored_data_model, write_result_file
from odeflow.results.solution import SolverOutput
from odeflow.tables import blocks, log_spaced_rows

#: Format tag written into saved snap results.
SNAP_FORMAT = "odeflow-snap/1"
#: Arrays of a snap result file, in the order of :class:`SnapResult`'s arguments.
SNAP_ARRAYS = ("t", "margin", "common_logit", "B", "gamma_integral")


class SnapResult(SolverOutput):
    """Time series of the Sec. 6 system (what ``solve(..., flow="snap")`` returns).

    Attributes
    ----------
    t : ndarray, shape (n,)
    margin : ndarray, shape (n,)
        ``h(t)`` (Eqn 44).
    common_logit : ndarray, shape (n,)
        ``z_c(t)`` (Eqn 13).
    B : ndarray, shape (n,)
        ``B(t) = eta_Z pi int gamma xi ds`` (Eqns 14, 98), the same for every class.
    gamma_integral : ndarray, shape (n,)
        ``Gamma(t) = int_0^t gamma ds``, integrated as a state (Eqn 128).
    stats, meta : dict
        Solver statistics; parameters (``flow, eta_y, eta_z, a, pi,
        vocab_size, zc0`` and, from a data model, ``beta, common_token, rho0``).
    data : DataModel or None
        The data model the parameters came from, if any.
    """

    def __init__(self, t, margin, common_logit, B, gamma_integral,  # noqa: N803
                 stats=None, meta=None, data=None):
        self.t = np.asarray(t, dtype=float)
        self.margin = np.asarray(margin, dtype=float)
        self.common_logit = np.asarray(common_logit, dtype=float)
        self.B = np.asarray(B, dtype=float)
        self.gamma_integral = np.asarray(gamma_integral, dtype=float)
        self.stats = dict(stats or {})
        self.meta = dict(meta or {})
        self.data = data

    def __repr__(self) -> str:
        return (f"SnapResult(n={self.t.size}, t=[{self.t[0]:g}, {self.t[-1]:g}], "
                f"a={self.meta.get('a')!r})")

    @property
    def flow(self) -> str:
        return "snap"

    def summary_table(self, rows: int = 8, width: int | None = None) -> str:
        """``h``, ``gamma``, ``Gamma``, ``z_c`` and ``B`` of the Sec. 6 system at log-spaced
        times (what ``odeflow run`` prints; ``width`` as in :func:`odeflow.tables.blocks`)."""
        idx = log_spaced_rows(self.t, rows)
        cols = {"t": self.t, "h": self.margin, "gamma": self.gamma,
                "Gamma": self.gamma_integral, "z_c": self.common_logit, "B": self.B}
        body = [[f"{v[i]:.6g}" for v in cols.values()] for i in idx]
        return "\n".join(blocks(list(cols), body, keys=1, width=width))

    def save(self, path, field: str = "path"):
        """Write ``.npz`` (series + JSON metadata): :func:`.files.write_result_file` (``field``:
        ``"out"`` for the CLI flag)."""
        arrays = {"t": self.t, "margin": self.margin, "common_logit": self.common_logit,
                  "B": self.B, "gamma_integral": self.gamma_integral}
        return write_result_file(path, SNAP_FORMAT, self, arrays,
                                 None if self.data is None else self.data.to_dict(), field)

    @classmethod
    def load(cls, path) -> SnapResult:
        """Read a file written by :meth:`save`, checked as a format.

        Raises
        ------
        ValidationError
            (field ``path``) for anything that is not an intact odeflow snap
            result (see :meth:`odeflow.Trajectory.load`).
        """
        arrays, metadata = read_result_file(path, SNAP_FORMAT)
        where = f"{str(path)!r}"
        if set(arrays) != set(SNAP_ARRAYS):
            raise ValidationError("path", f"{where}: arrays {sorted(arrays)}; an odeflow snap "
                                  f"result holds {list(SNAP_ARRAYS)}")
        n = arrays["t"].shape
        for name in SNAP_ARRAYS:
            if arrays[name].ndim != 1 or arrays[name].shape != n or not n[0]:
                raise ValidationError("path", f"{where}: array {name!r} has shape "
                                      f"{arrays[name].shape}; expected {n} (one value per time)")
        data = metadata["data"]
        if data is not None:
            data = stored_data_model(DataModel, data, where)
        return cls(*(arrays[name] for name in SNAP_ARRAYS), stats=metadata["stats"],
                   meta=metadata["meta"], data=data)

    @property
    def gamma(self) -> np.ndarray:
        """``gamma = h (M-1) / (exp(h) + M - 1)`` (Eqn 9), written with ``exp(-h)``."""
        M = int(self.meta["vocab_size"])
        return self.margin * expit(math.log(M - 1) - self.margin)

    @property
    def xi(self) -> np.ndarray:
        """``xi = a exp(2 z_c)`` (Theorem 4)."""
        return float(self.meta["a"]) * np.exp(2.0 * self.common_logit)
