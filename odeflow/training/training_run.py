"""The result of the paper's training protocol: :class:`TrainingRun` (Sec. 8).

An ensemble of runs over seeds, the seed axis first; its flow times are those of
the run's :class:`~odeflow.training.protocol.Protocol` (the warm-up map for SGD with
momentum, ``t = k`` for plain steps and Adam).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from odeflow.data import DataModel
from odeflow.results import Trajectory
from odeflow.training.batch import decoder_in_token_order


@dataclass
class TrainingRun:
    """An ensemble of training runs over seeds (arrays carry the seed axis first).

    Attributes
    ----------
    data : DataModel
    protocol : Protocol
    seeds : list of int
    steps : ndarray of int, shape (n,)
        Recorded steps ``k`` (0 and ``protocol.steps`` included).
    z_active : ndarray, shape (S, n, q, L)
        Attention logits of the query tokens in use over the active tokens.
    z_base : ndarray, shape (S, q, M)
        ``Z(0)`` over all tokens (inactive tokens keep these values).
    loss : ndarray, shape (S, steps + 1)
        Mean cross-entropy of the batch drawn at step ``k`` under the
        parameters before that step's update (``k < steps``); the last entry
        is the loss of one more fresh batch under the final parameters.
    decoder_initial, decoder_final : ndarray, shape (S, R, L)
        ``Y`` at the start and the end, lumped (``R = K + 1`` or ``K``) or
        un-lumped (``R = M``, rows in :func:`decoder_row_order`; see :attr:`lumped`).
    lumped : bool
        Whether the decoder was kept lumped (zero start).
    stats : dict
        Wall time and steps per second.
    """

    data: DataModel
    protocol: object
    seeds: list
    steps: np.ndarray
    z_active: np.ndarray
    z_base: np.ndarray
    loss: np.ndarray
    decoder_initial: np.ndarray
    decoder_final: np.ndarray
    lumped: bool
    stats: dict = field(default_factory=dict)

    def __len__(self) -> int:
        """The number of seeds."""
        return len(self.seeds)

    @property
    def t(self) -> np.ndarray:
        """Flow time of the recorded steps (:meth:`Protocol.flow_time`)."""
        return self.protocol.flow_time(self.steps)

    @property
    def loss_t(self) -> np.ndarray:
        """Flow time of every entry of :attr:`loss`."""
        return self.protocol.flow_time(np.arange(self.loss.shape[1]))

    def initial_decoder(self, i: int = 0) -> np.ndarray:
        """``Y(0)`` of member ``i``: all ``M`` rows in token order, active columns."""
        return decoder_in_token_order(self.data, self.decoder_initial[i], self.lumped)

    def final_decoder(self, i: int = 0) -> np.ndarray:
        """``Y`` after the last step, as :meth:`initial_decoder`."""
        return decoder_in_token_order(self.data, self.decoder_final[i], self.lumped)

    def initial_logits(self, i: int = 0) -> np.ndarray:
        """``Z(0)`` of member ``i`` on the query rows in use, shape ``(q, M)``."""
        return self.z_base[i]

    def trajectory(self, i: int = 0) -> Trajectory:
        """Member ``i`` as a :class:`Trajectory` of its logits on the flow-time axis."""
        return Trajectory(self.data, self.t, self.z_active[i], self.z_base[i],
                          stats=dict(self.stats),
                          meta={"flow": self.protocol.optimizer, "seed": self.seeds[i],
                                **self.protocol.to_dict()})
