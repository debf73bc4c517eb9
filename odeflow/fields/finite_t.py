"""Level T: the gradient flow of the finite-sequence-length objective (spec section 8).

.. math::

    J_T(Y, Z) = \\sum_n \\pi_n \\frac1N \\sum_{s=1}^N
        \\log \\mathrm{softmax}(Y \\hat f(x_{n,s}))_n, \\qquad
    f(x)_l = \\frac{k_l e^{z_{m,l}}}{\\sum_{l'} k_{l'} e^{z_{m,l'}}},

the sample-average approximation of ``E_x[log softmax(Y f^(x))_n]`` over ``N``
seeded sequences of length ``T`` per class (:func:`odeflow.data.sample_counts`;
``k_l`` counts token ``l`` among the ``T - 1`` contextual tokens). Each sampled
sequence is a *sub-class*: "probabilities" ``k / (T - 1)``, weight
``pi_n / N``, and its class's next and query tokens. The Level E field (Lemma 1,
Eqns 3-4, 7) on that table of sub-classes is ``eta * grad J_T``; this module
hands the table to :class:`~odeflow.fields.exact.ExactFlow` and reuses its
right-hand side and analytic Jacobian unchanged.

State and lumping are Level E's: the decoder rows, the query tokens and the
active tokens do not change (a sample never leaves its class's support), so
the state size does not depend on ``N`` or ``T``. One right-hand side costs
``O(K N R L)``: linear in ``N`` and independent of ``T`` (``benchmarks/bench_finite_t.py``).
As ``T -> inf``, ``k / (T - 1) -> c_{.|n}`` and Level T tends to Level E.
"""

from __future__ import annotations

import numpy as np

from odeflow.data import sample_counts
from odeflow.fields.exact import ExactFlow
from odeflow.numerics import feature_vectors, lumped_objective


class FiniteTFlow(ExactFlow):
    """Level T vector field on Level E's lumped state ``(Y_lumped, Z_active)``.

    Parameters
    ----------
    data : DataModel
    eta_y, eta_z : float
        Learning rates of ``Y`` and ``Z``.
    z0 : optional
        Initial logits, as for Level E.
    seq_len : int, default 128
        ``T`` (the paper's experiments use 128): ``T - 1`` contextual tokens.
    samples_per_class : int, default 64
        ``N`` sequences per class.
    seed : int, default 0
        Seed of the sample (:func:`odeflow.data.sample_counts`).

    Attributes
    ----------
    sample : CountSample
        The sampled sequences; sub-class ``s`` of the table below is
        ``sample.class_index[s]``'s ``s``-th sequence.
    log_probs, pi, qidx, target, query_of_class
        Level E's class table, one row per sampled sequence.
    """

    name = "finite_t"

    def __init__(self, data, eta_y, eta_z, z0=None, seq_len=128, samples_per_class=64, seed=0):
        super().__init__(data, eta_y, eta_z, z0)
        self.sample = sample_counts(data, seq_len, samples_per_class, seed)
        cls = self.sample.class_index
        self.rows = cls
        self.log_probs = self.sample.active_log_probs()
        self.pi = self.sample.weights
        self.qidx = np.asarray(data.class_query_index)[cls]
        self.target = self.target[cls]
        self.query_of_class = self.query_of_class[:, cls]

    def objective(self, y: np.ndarray) -> float:
        """``J_T(Y, Z)`` of spec section 8 on the sample (maximised)."""
        Y, Z = self.split(y)
        F = feature_vectors(self.log_probs, Z[self.qidx])
        return float(lumped_objective(Y, F, self.pi, self.log_multiplicity, rows=self.rows))

    def parameters(self) -> dict:
        return {**super().parameters(), "seq_len": self.sample.seq_len,
                "samples_per_class": self.sample.samples_per_class, "seed": self.sample.seed}

    def trajectory(self, t, states, stats):
        from odeflow.results import FiniteTTrajectory

        base = super().trajectory(t, states, stats)
        return FiniteTTrajectory(base.data, base.t, base.z_active, base.z_base,
                                 decoder_lumped=base.decoder_lumped, stats=base.stats,
                                 meta=base.meta)
