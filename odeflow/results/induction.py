"""Result of the induction-head flows (``docs/induction.md``): :class:`InductionTrajectory`.

What ``odeflow.solve(InductionData, flow="population" | "copier" | "finite_l", ...)``
returns: the classifier weight ``a(t)``, the selector's subset weights
``p_S(t) = c_S^2 / sum c^2``, the copier logits ``w(t)`` and the loss, with the
solver's statistics and the run's metadata; saved and loaded as an ``.npz``
file like every odeflow result.
"""

from __future__ import annotations

import numpy as np

from odeflow.data.induction import InductionData
from odeflow.errors import ValidationError
from odeflow.numerics import log_magnitude, log_magnitude_mismatches
from odeflow.results.files import (
    SERIES_PREFIX,
    read_result_file,
    series_arrays,
    stored_data_model,
    stored_series,
    write_result_file,
)
from odeflow.results.solution import SolverOutput
from odeflow.tables import blocks

#: Format tag written into saved induction-head results.
INDUCTION_FORMAT = "odeflow-induction/1"
#: Arrays every induction result file holds (``copier_logits`` too unless the flow is
#: the exact-copier reduction).
INDUCTION_ARRAYS = ("t", "a", "c", "subset_weights", "loss")
#: ``log_c`` is written with this in place of ``-inf`` (a zero coefficient; the files hold
#: finite numbers only). A selector's ``ln|c|`` falls linearly in time at most, so no
#: solve reaches it.
ZERO_LOG_C = -float(np.finfo(float).max)


class InductionTrajectory(SolverOutput):
    """Time series of an induction-head flow.

    Attributes
    ----------
    t : ndarray, shape (n,)
    a : ndarray, shape (n,)
        Classifier weight ``a(t)``.
    subsets : list of tuple
        The selector's subsets of heads (``odeflow.data.induction.subsets(H, D)``).
    subset_weights : ndarray, shape (n, #S)
        ``p_S(t) = c_S^2 / sum_S' c_S'^2`` (rows sum to 1).
    copier_logits : ndarray, shape (n, H, H), or None
        ``w(t)``; ``w[:, h-1, j]`` is head ``h``'s logit on offset ``h + j``.
        None for the exact-copier reduction (``flow="copier"``: ``w+ -> infinity``).
    c : ndarray, shape (n, #S)
        Selector coefficients ``c_S(t)``.
    loss : ndarray, shape (n,)
        The population loss (``meta["loss"]``: ``"nll"`` or ``"code"``).
    log_c : ndarray, shape (n, #S)
        ``ln|c_S(t)|`` (``-inf`` for a zero coefficient): the solver's coordinates,
        exact where ``c_S`` is below the range of doubles (0 in :attr:`c`); saved
        with the file (a file without it, written before it existed, loads with
        ``ln|c|``). The constructor's ``log_c`` (default ``ln|c|``).
    y : ndarray, shape (size, n)
        After :func:`odeflow.solve`: the solver's raw states, ``ln|c|`` in the ``c``
        slots (0 in the slot of a zero coefficient, whose ``log_c`` is ``-inf``); the
        parameters are :meth:`parameters`. Not written to files.
    stats : dict
        Solver statistics (method, nfev, njev, wall_time, ...).
    meta : dict
        ``flow``, ``loss``, ``schedule``, ``t_span``, tolerances, provenance, ...
    data : InductionData or None
        The data model solved (stored with the file as its dict form).
    """

    def __init__(self, t, a, subsets, subset_weights, copier_logits, c, loss, stats=None,
                 meta=None, data=None, log_c=None):
        self.t = np.asarray(t, dtype=float)
        self.a = np.asarray(a, dtype=float)
        self.subsets = [tuple(int(h) for h in s) for s in subsets]
        self.subset_weights = np.asarray(subset_weights, dtype=float)
        self.copier_logits = None if copier_logits is None else np.asarray(copier_logits,
                                                                           dtype=float)
        self.c = np.asarray(c, dtype=float)
        self.log_c = log_magnitude(self.c) if log_c is None else np.asarray(log_c, float)
        self.loss = np.asarray(loss, dtype=float)
        self.stats = dict(stats or {})
        self.meta = dict(meta or {})
        self.data = data

    def parameters(self, index: int = -1) -> np.ndarray:
        """The flat parameters ``theta = (c, w, a)`` at output ``index`` (the levels'
        layout; ``w`` left out for the exact-copier reduction): e.g. the ``start`` of
        another solve, with ``start_log_c=traj.log_c[index]``."""
        parts = [self.c[index]]
        if self.copier_logits is not None:
            parts.append(self.copier_logits[index].ravel())
        parts.append([self.a[index]])
        return np.concatenate(parts)

    def __repr__(self) -> str:
        top, p = self.top_subset()
        return (f"InductionTrajectory(flow={self.flow!r}, n={self.t.size}, t=[{self.t[0]:g}, "
                f"{self.t[-1]:g}], a={self.a[-1]:.4g}, top subset {top} p={p:.4f})")

    @property
    def flow(self) -> str:
        """The flow solved (``"population"`` or ``"copier"``)."""
        return str(self.meta.get("flow", ""))

    def top_subset(self, index: int = -1) -> tuple[tuple, float]:
        """``(S, p_S)`` of the heaviest subset at output ``index`` (the last by default)."""
        k = int(np.argmax(self.subset_weights[index]))
        return self.subsets[k], float(self.subset_weights[index, k])

    # ------------------------------------------------------------------ table
    def table_rows(self, rows: int = 8) -> tuple[list[str], list[list]]:
        """``(header, rows)`` at about ``rows`` log-spaced times (``t = 0`` first):
        ``t``, loss, ``a``, the top subset and its ``p_S``. What ``odeflow run`` prints."""
        idx = log_spaced_indices(self.t, rows)
        header = ["t", "loss", "a", "top subset", "p_S"]
        out = []
        for i in idx:
            top, p = self.top_subset(i)
            out.append([float(self.t[i]), float(self.loss[i]), float(self.a[i]),
                        "{" + ", ".join(map(str, top)) + "}", p])
        return header, out

    def summary_table(self, rows: int = 8, width: int | None = None) -> str:
        """:meth:`table_rows` as aligned text (what ``odeflow run`` prints; ``width`` as in
        :func:`odeflow.tables.blocks`)."""
        header, body = self.table_rows(rows)
        cells = [[f"{t:.4g}", f"{loss:.6f}", f"{a:.6g}", top, f"{p:.6f}"]
                 for t, loss, a, top, p in body]
        return "\n".join(blocks(header, cells, keys=1, width=width))

    # ------------------------------------------------------------------ files
    def save(self, path, field: str = "path"):
        """Write ``.npz`` (series + JSON metadata): :func:`.files.write_result_file`."""
        arrays = {"t": self.t, "a": self.a, "c": self.c, "subset_weights": self.subset_weights,
                  "loss": self.loss}
        if self.copier_logits is not None:
            arrays["copier_logits"] = self.copier_logits
        arrays["log_c"] = np.where(np.isneginf(self.log_c), ZERO_LOG_C, self.log_c)
        arrays.update(series_arrays(self.series))
        return write_result_file(path, INDUCTION_FORMAT, self, arrays,
                                 {} if self.data is None else self.data.to_dict(), field,
                                 subsets=[list(s) for s in self.subsets])

    @classmethod
    def load(cls, path) -> InductionTrajectory:
        """Read a file written by :meth:`save`, checked as a format.

        Raises
        ------
        ValidationError
            (field ``path``) for anything that is not an intact odeflow
            induction result: not an ``.npz``, another format, missing or extra
            arrays, inconsistent shapes, non-finite values, times not
            increasing, a stored data model or subset list that is invalid.
        """
        arrays, metadata = read_result_file(path, INDUCTION_FORMAT)
        where = f"{str(path)!r}"
        expected = set(INDUCTION_ARRAYS) | ({"copier_logits", "log_c"} & set(arrays)) | \
            {k for k in arrays if k.startswith(SERIES_PREFIX)}
        if set(arrays) != expected:
            raise ValidationError("path", f"{where}: arrays {sorted(arrays)}; an odeflow "
                                  f"induction result holds {sorted(expected)}")
        data = None
        if metadata["data"]:
            data = stored_data_model(InductionData, metadata["data"], where,
                                     (ValidationError, RecursionError))
        raw = metadata.get("subsets")
        try:
            subsets = [tuple(int(h) for h in s) for s in raw]
        except (TypeError, ValueError):
            raise ValidationError("path", f"{where}: the stored subsets are damaged") from None
        if data is not None and subsets != data.subsets:
            raise ValidationError("path", f"{where}: the stored subsets {subsets} differ from "
                                  f"the data model's {data.subsets}")
        t = arrays["t"]
        n, k = t.shape[0] if t.ndim == 1 else -1, len(subsets)
        shapes = {"t": (n,), "a": (n,), "loss": (n,), "c": (n, k), "subset_weights": (n, k)}
        if "log_c" in arrays:
            shapes["log_c"] = (n, k)
        if "copier_logits" in arrays:
            H = data.heads if data is not None else arrays["copier_logits"].shape[-1]
            shapes["copier_logits"] = (n, H, H)
        series = stored_series(arrays, n, where)
        for name, shape in shapes.items():
            if n < 1 or arrays[name].shape != shape:
                raise ValidationError("path", f"{where}: array {name!r} has shape "
                                      f"{arrays[name].shape}; expected {shape}")
        if np.any(np.diff(t) <= 0):
            raise ValidationError("path", f"{where}: the times 't' are not increasing")
        log_c = None
        if "log_c" in arrays:
            log_c = np.where(arrays["log_c"] == ZERO_LOG_C, -np.inf, arrays["log_c"])
            if log_magnitude_mismatches(log_c, arrays["c"]).size:
                raise ValidationError("path", f"{where}: 'log_c' is not ln|c| of 'c'; the "
                                      "file is damaged")
        out = cls(t, arrays["a"], subsets, arrays["subset_weights"],
                  arrays.get("copier_logits"), arrays["c"], arrays["loss"],
                  stats=metadata["stats"], meta=metadata["meta"], data=data, log_c=log_c)
        out.series = series
        return out


def log_spaced_indices(t: np.ndarray, rows: int) -> np.ndarray:
    """Indices of ``t[0]`` and of about ``rows - 1`` log-spaced times after it (unique)."""
    if rows <= 1 or t.size <= 1:
        return np.arange(min(max(int(rows), 0), t.size))
    targets = np.geomspace(max(t[1], 1e-12), t[-1], min(int(rows), t.size) - 1)
    return np.unique(np.concatenate([[0], np.searchsorted(t, targets).clip(0, t.size - 1)]))
