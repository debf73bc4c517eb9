"""Ensembles of SGD runs over seeds and their mean (``docs/validation.md``).

SGD noise averages out over seeds; what the mean keeps is the finite-``T``
bias and the discretisation error, the two gaps to Level E that shrink as
``T`` grows and the step shrinks (see ``docs/validation.md``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from odeflow.fields.base import START_PARTS
from odeflow.numerics import normalised_features
from odeflow.results import Trajectory
from odeflow.training.api import SGD_OLD_FORMS, old_forms
from odeflow.training.common import check_seeds
from odeflow.training.sgd import check_sgd_arguments, run_sgd


@dataclass
class SGDEnsemble:
    """SGD runs that differ only in their seed, recorded at the same steps.

    Attributes
    ----------
    trajectories : list of Trajectory
        One per seed.
    t : ndarray, shape (n,)
        Recorded times (step numbers).
    mean_logits_active : ndarray, shape (n, q, L)
        Mean over seeds of ``z`` on the query tokens in use and active tokens.
    mean_attention_active : ndarray, shape (n, K, L)
        Mean over seeds of ``f_n`` (Eqn 5) over the active tokens.
    """

    trajectories: list
    t: np.ndarray
    mean_logits_active: np.ndarray
    mean_attention_active: np.ndarray

    @property
    def data(self):
        return self.trajectories[0].data

    @property
    def seeds(self) -> list[int]:
        return [int(tr.meta["seed"]) for tr in self.trajectories]

    def logits(self, query_token: int) -> np.ndarray:
        """Mean ``z_m(t)`` over all ``M`` tokens, shape (n, M)."""
        return self.mean_trajectory().logits(query_token)

    def attention(self, next_token: int) -> np.ndarray:
        """Mean ``f_n(t)`` over seeds, shape (n, M)."""
        i = self.data.class_index(next_token)
        out = np.zeros((self.t.size, self.data.vocab_size))
        out[:, self.data.active_tokens] = self.mean_attention_active[:, i]
        return out

    def mean_trajectory(self) -> Trajectory:
        """A :class:`Trajectory` of the mean logits and mean lumped decoder."""
        first = self.trajectories[0]
        decoder = np.mean([tr.decoder_lumped for tr in self.trajectories], axis=0)
        return Trajectory(self.data, self.t, self.mean_logits_active, first.z_base,
                          decoder_lumped=decoder, stats=first.stats,
                          meta={**first.meta, "flow": "sgd_mean", "seed": None,
                                "seeds": self.seeds})


@old_forms(**{**SGD_OLD_FORMS, "renames": {**SGD_OLD_FORMS["renames"], **START_PARTS}})
def sgd_ensemble(data, eta_y: float, eta_z: float, steps: int, batch_size: int, seq_len: int,
                 seeds=8, optimizer=None, record=None, progress: bool | None = None,
                 start=None) -> SGDEnsemble:
    """Run :func:`odeflow.training.train_sgd` once per seed and average.

    Parameters
    ----------
    data, eta_y, eta_z, steps, batch_size, seq_len, optimizer, record, progress, start
        As for :func:`~odeflow.training.train_sgd`.
    seeds : int or sequence of int, default 8
        The seeds, or how many (then ``0 .. seeds - 1``). Member ``i`` equals
        ``train_sgd(..., seed=seeds[i])``; the runs advance together in one set
        of array operations.

    Returns
    -------
    SGDEnsemble

    Notes
    -----
    Old keywords (one release, warning :class:`~odeflow.errors.RenamedWarning`), as
    for :func:`~odeflow.training.train_sgd`: ``momentum=``, ``record_every=``, ``z0=``.
    """
    settings = check_sgd_arguments(data, eta_y, eta_z, steps, batch_size, seq_len, optimizer)
    seeds = check_seeds(seeds)
    trajectories = run_sgd(data, settings, seeds, record=record, start=start,
                           progress=progress)
    Z = np.stack([tr.z_active for tr in trajectories])               # (S, n, q, L)
    f, _ = normalised_features(data.active_log_probs, Z[:, :, data.class_query_index, :])
    return SGDEnsemble(trajectories, trajectories[0].t, Z.mean(axis=0), f.mean(axis=0))
