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
builds that table (:func:`sample_table`, a
:class:`~odeflow.fields.classes.ClassTable`) and hands it to
:class:`~odeflow.fields.exact.ExactFlow`, whose right-hand side, analytic
Jacobian and objective it reuses unchanged.

State and lumping are Level E's: the decoder rows and the query tokens do not
change and a sample never leaves its class's support, so the state size does
not grow with ``N`` or ``T``. One right-hand side costs ``O(K N R s)``
(``s`` the support size): linear in ``N`` and independent of ``T``
(``benchmarks/bench_finite_t.py``).
As ``T -> inf``, ``k / (T - 1) -> c_{.|n}`` and Level T tends to Level E.
"""

from __future__ import annotations

import numpy as np

from odeflow.data import CountSample, DataModel, sample_counts
from odeflow.fields.classes import ClassTable
from odeflow.fields.exact import ExactFlow


def sample_table(data: DataModel, sample: CountSample) -> ClassTable:
    """The table of sub-classes of a sample: one entry per sampled sequence.

    Entry ``(k, s)`` has class ``k``'s next and query tokens, weight
    ``pi_k / N``, and support the tokens with ``k_l > 0`` with
    log-probabilities ``log(k_l / (T - 1))`` (spec section 8).
    """
    N, T = sample.samples_per_class, sample.seq_len
    next_token, query_token, supports, log_probs = [], [], [], []
    for cls, counts in zip(data.classes, sample.counts, strict=True):
        for row in counts:
            present = row > 0
            next_token.append(cls.next_token)
            query_token.append(cls.query_token)
            supports.append(cls.support[present])
            log_probs.append(np.log(row[present]) - np.log(T - 1))
    weight = np.repeat(np.asarray(data.weights, dtype=float) / N, N)
    return ClassTable.from_entries(data.vocab_size, next_token, query_token, weight, supports,
                                   log_probs, next_tokens=data.next_tokens)


class FiniteTFlow(ExactFlow):
    """Level T vector field: Level E on the table of sampled sub-classes.

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
    y0 : array_like of shape (M, M), optional
        Initial decoder, as for Level E (kept un-lumped when it breaks the
        symmetry of the non-next rows, e.g. the paper's uniform start).
    storage : {"auto", "dense", "sparse"}, default "auto"
        Storage of the sampled supports, as for Level E (the same numbers
        either way). ``"auto"`` keeps tables above ``K N x C = 20,000`` sparse;
        with an un-lumped decoder (``M`` rows, a random start) dense storage
        can be the faster one well above that size
        (``benchmarks/bench_reproduce.py`` measures both).

    Attributes
    ----------
    sample : CountSample
        The sampled sequences; entry ``k N + s`` of :attr:`table` is class
        ``k``'s ``s``-th sequence.
    table : ClassTable
        The sub-classes (:func:`sample_table`).
    """

    name = "finite_t"

    def __init__(self, data, eta_y, eta_z, z0=None, seq_len=128, samples_per_class=64, seed=0,
                 y0=None, storage="auto"):
        if not isinstance(data, DataModel):
            super().__init__(data, eta_y, eta_z, z0)  # raises the usual ValidationError
        sample = sample_counts(data, seq_len, samples_per_class, seed)
        super().__init__(data, eta_y, eta_z, z0, y0=y0, table=sample_table(data, sample),
                         storage=storage)
        self.sample = sample

    def parameters(self) -> dict:
        return {**super().parameters(), "seq_len": self.sample.seq_len,
                "samples_per_class": self.sample.samples_per_class, "seed": self.sample.seed}

    def trajectory(self, t, states, stats):
        from odeflow.results import FiniteTTrajectory

        base = super().trajectory(t, states, stats)
        return FiniteTTrajectory(base.data, base.t, base.z_carried, base.z_base,
                                 decoder_lumped=base.decoder_lumped, stats=base.stats,
                                 meta=base.meta, logit_index=(base.logit_query,
                                                              base.logit_token),
                                 decoder_layout=base.decoder_layout,
                                 decoder_base=base.decoder_base)
