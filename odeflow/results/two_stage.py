"""Result of the two-stage flows: :class:`TwoStageTrajectory`.

What ``odeflow.solve(TwoStageData, flow="population" | "finite_n", ...)`` returns
(odeflow's model of Gong et al. 2025, arXiv 2502.20681): the population accuracy
and loss per query type (P only, Q only, both), the blocks ``W_P(t)``, ``W_Q(t)``
of the key-query weights and their singular values, with the solver's
statistics and the run's metadata; saved and loaded as an ``.npz`` file.
"""

from __future__ import annotations

import numpy as np

from odeflow.data.checks import check_count
from odeflow.data.two_stage import TwoStageData
from odeflow.errors import ValidationError
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

#: Format tag written into saved two-stage results.
TWO_STAGE_FORMAT = "odeflow-two-stage/1"
#: The series over time every two-stage result holds (besides ``W_P``, ``W_Q``).
SERIES = ("accuracy_p_only", "accuracy_q_only", "accuracy_both", "loss", "loss_p_only",
          "loss_q_only", "loss_both")
#: Accuracies :meth:`TwoStageTrajectory.rank_truncation` returns.
ACCURACIES = ("accuracy_p_only", "accuracy_q_only", "accuracy_both")


def singular_values(blocks: np.ndarray) -> np.ndarray:
    """Singular values, descending, of each matrix of a stack (n, k, k) -> (n, k)."""
    return np.linalg.svd(np.asarray(blocks, dtype=float), compute_uv=False)


def truncate_blocks(W_P: np.ndarray, W_Q: np.ndarray, rank: int):
    """``diag(W_P, W_Q)`` with only its top ``rank`` singular values kept, as two blocks.

    The SVD of a block-diagonal matrix is the union of its blocks' SVDs, so the
    rank-``r`` truncation keeps each block's components whose singular values are
    among the ``r`` largest of both blocks (ties go to ``W_P``, then to the lower
    index), and stays block-diagonal.
    """
    svds = [np.linalg.svd(W) for W in (W_P, W_Q)]
    labels = [(-s, b, j) for b, (_, S, _) in enumerate(svds) for j, s in enumerate(S)]
    keep = sorted(labels)[:rank]
    out = []
    for b, (U, S, Vt) in enumerate(svds):
        idx = sorted(j for _, bb, j in keep if bb == b)
        out.append((U[:, idx] * S[idx]) @ Vt[idx] if idx else np.zeros_like(U))
    return out[0], out[1]


class TwoStageTrajectory(SolverOutput):
    """Time series of a two-stage flow.

    Attributes
    ----------
    t : ndarray, shape (n,)
    accuracy_p_only, accuracy_q_only, accuracy_both : ndarray, shape (n,)
        Population accuracy ``P(y_q f(x_q) > 0)`` on each query type.
    loss, loss_p_only, loss_q_only, loss_both : ndarray, shape (n,)
        Population loss: the mixture over kinds, and per query type.
    W_P : ndarray, shape (n, d_p, d_p)
    W_Q : ndarray, shape (n, d_q, d_q)
    singular_values_p, singular_values_q : ndarray, shapes (n, d_p), (n, d_q)
        Descending.
    stats : dict
        Solver statistics.
    meta : dict
        ``flow``, ``t_span``, tolerances, provenance, ...
    data : TwoStageData or None
    scorer : callable or None
        ``scorer(data, W_P, W_Q) -> dict`` of the accuracies and losses (the field
        that built the result passes the population scorer); used by
        :meth:`rank_truncation`. Not saved.
    """

    def __init__(self, t, W_P, W_Q, series: dict, stats=None, meta=None, data=None,
                 scorer=None):
        self.t = np.asarray(t, dtype=float)
        self.W_P = np.asarray(W_P, dtype=float)
        self.W_Q = np.asarray(W_Q, dtype=float)
        missing = [k for k in SERIES if k not in series]
        if missing:
            raise ValidationError("series", f"missing {missing}")
        for key in SERIES:
            setattr(self, key, np.asarray(series[key], dtype=float))
        self.singular_values_p = singular_values(self.W_P)
        self.singular_values_q = singular_values(self.W_Q)
        self.stats = dict(stats or {})
        self.meta = dict(meta or {})
        self.data = data
        self.scorer = scorer

    @property
    def flow(self) -> str:
        """The flow solved (``"population"`` or ``"finite_n"``)."""
        return str(self.meta.get("flow", ""))

    def parameters(self, index: int = -1) -> np.ndarray:
        """The flat state ``(W_P, W_Q)`` (row-major) at output ``index``."""
        return np.concatenate([self.W_P[index].ravel(), self.W_Q[index].ravel()])

    def largest_block(self) -> np.ndarray:
        """Per time, ``"P"`` or ``"Q"``: the block holding the largest singular value of ``W``."""
        return np.where(self.singular_values_p[:, 0] >= self.singular_values_q[:, 0], "P", "Q")

    def rank_truncation(self, i: int, ranks=None, scorer=None) -> dict:
        """Accuracy per query type with only the top ``r`` singular values of ``W`` kept.

        Parameters
        ----------
        i : int
            Time index.
        ranks : iterable of int, optional
            Numbers of singular values kept, each in ``1..d`` (default all of them).
        scorer : callable, optional
            ``scorer(data, W_P, W_Q) -> dict``; default :attr:`scorer`.

        Returns
        -------
        dict
            ``rank_kept`` (ndarray of int) and ``accuracy_p_only``,
            ``accuracy_q_only``, ``accuracy_both`` (ndarrays, one per rank).
        """
        scorer = scorer or self.scorer
        if scorer is None or self.data is None:
            raise ValidationError("scorer", "rank truncation needs the data model and a "
                                  "scorer (odeflow.fields.two_stage.scoring.score)")
        n = self.t.size
        i = check_count(i, "i", -n, n - 1) % n
        d = self.W_P.shape[1] + self.W_Q.shape[1]
        ranks = list(range(1, d + 1)) if ranks is None else [check_count(r, "ranks", 1, d)
                                                             for r in ranks]
        out = {"rank_kept": np.array(ranks, dtype=int), **{k: np.empty(len(ranks))
                                                           for k in ACCURACIES}}
        for j, r in enumerate(ranks):
            scores = scorer(self.data, *truncate_blocks(self.W_P[i], self.W_Q[i], r))
            for k in ACCURACIES:
                out[k][j] = scores[k]
        return out

    def table_rows(self, rows: int = 8) -> tuple[list[str], list[list]]:
        """``(header, rows)`` at about ``rows`` log-spaced times (``t = 0`` first): ``t``,
        the loss, the accuracy on each query type and each block's top singular value."""
        t = self.t
        if rows <= 1 or t.size <= 1:
            idx = np.arange(min(max(int(rows), 0), t.size))
        else:
            targets = np.geomspace(max(t[1], 1e-12), t[-1], min(int(rows), t.size) - 1)
            idx = np.unique(np.concatenate([[0], np.searchsorted(t, targets).clip(0, t.size - 1)]))
        header = ["t", "loss", "acc P only", "acc Q only", "acc both", "top s_P", "top s_Q"]
        body = [[float(t[i]), float(self.loss[i]), float(self.accuracy_p_only[i]),
                 float(self.accuracy_q_only[i]), float(self.accuracy_both[i]),
                 float(self.singular_values_p[i, 0]), float(self.singular_values_q[i, 0])]
                for i in idx]
        return header, body

    def summary_table(self, rows: int = 8, width: int | None = None) -> str:
        """:meth:`table_rows` as aligned text (what ``odeflow run`` prints; ``width`` as in
        :func:`odeflow.tables.blocks`)."""
        header, body = self.table_rows(rows)
        cells = [[f"{row[0]:.4g}"] + [f"{v:.6f}" for v in row[1:]] for row in body]
        return "\n".join(blocks(header, cells, keys=1, width=width))

    def __repr__(self) -> str:
        return (f"TwoStageTrajectory(flow={self.flow!r}, n={self.t.size}, t=[{self.t[0]:g}, "
                f"{self.t[-1]:g}], acc P/Q/both = {self.accuracy_p_only[-1]:.4f}/"
                f"{self.accuracy_q_only[-1]:.4f}/{self.accuracy_both[-1]:.4f})")

    # ------------------------------------------------------------------ files
    def save(self, path, field: str = "path"):
        """Write ``.npz`` (series + JSON metadata): :func:`.files.write_result_file`."""
        arrays = {"t": self.t, "W_P": self.W_P, "W_Q": self.W_Q,
                  **{k: getattr(self, k) for k in SERIES}, **series_arrays(self.series)}
        return write_result_file(path, TWO_STAGE_FORMAT, self, arrays,
                                 {} if self.data is None else self.data.to_dict(), field)

    @classmethod
    def load(cls, path, scorer=None) -> TwoStageTrajectory:
        """Read a file written by :meth:`save`, checked as a format.

        Raises
        ------
        ValidationError
            (field ``path``) for a file that is not an intact two-stage result:
            another format, missing or extra arrays, inconsistent shapes,
            non-finite values, times not increasing, an invalid stored data model.
        """
        arrays, metadata = read_result_file(path, TWO_STAGE_FORMAT)
        where = f"{str(path)!r}"
        expected = {"t", "W_P", "W_Q", *SERIES, *(k for k in arrays if k.startswith(SERIES_PREFIX))}
        if set(arrays) != expected:
            raise ValidationError("path", f"{where}: arrays {sorted(arrays)}; an odeflow "
                                  f"two-stage result holds {sorted(expected)}")
        data = None
        if metadata["data"]:
            data = stored_data_model(TwoStageData, metadata["data"], where,
                                     (ValidationError, TypeError))
        t = arrays["t"]
        n = t.shape[0] if t.ndim == 1 else -1
        shapes = {k: (n,) for k in SERIES}
        for name in ("W_P", "W_Q"):
            k = arrays[name].shape[-1] if arrays[name].ndim == 3 else -1
            shapes[name] = (n, k, k)
        for name, shape in shapes.items():
            if n < 1 or arrays[name].shape != shape or min(shape) < 1:
                raise ValidationError("path", f"{where}: array {name!r} has shape "
                                      f"{arrays[name].shape}; expected {shape}")
        if np.any(np.diff(t) <= 0):
            raise ValidationError("path", f"{where}: the times 't' are not increasing")
        out = cls(t, arrays["W_P"], arrays["W_Q"], {k: arrays[k] for k in SERIES},
                  stats=metadata["stats"], meta=metadata["meta"], data=data, scorer=scorer)
        out.series = stored_series(arrays, n, where)
        return out


__all__ = ["ACCURACIES", "SERIES", "TWO_STAGE_FORMAT", "TwoStageTrajectory", "singular_values",
           "truncate_blocks"]
