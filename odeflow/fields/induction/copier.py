"""The exact-copier reduction, ``flow="copier"`` (``docs/induction.md``, "Levels").

As ``w+ -> infinity`` each head copies exactly its own offset, ``v^_h = e_{x_{l-h}}``,
and the kernel between a key window and the query window becomes
``K(z, z_q) = sum_S p_S 1[z_S = z_{q,S}]``: only the tokens at offsets
``1..H`` matter, so the windows have ``H`` tokens (``W = d**H``). State
``(c (#S,), a)``; the loss and its analytic gradient are those of the
population flow (:func:`~odeflow.fields.induction.population.window_loss`)
with these fixed match indicators in place of the soft copier's Gram matrices.
"""

from __future__ import annotations

import numpy as np

from odeflow.fields.induction.base import InductionField
from odeflow.fields.induction.population import (
    WindowLaws,
    coefficient_gradient,
    subset_gradient,
    subset_products,
    window_loss,
)


class CopierFlow(InductionField):
    """``flow="copier"``: gradient flow of ``(c, a)`` with the exact copier.

    Parameters as :class:`~odeflow.fields.induction.base.InductionField`
    (``loss``, ``rates`` over the groups ``c`` and ``a``, ``start`` of length
    ``#S + 1``).
    """

    name = "copier"
    groups = ("c", "a")
    #: As the population flow's: LSODA, the flow being stiff only in places
    #: (``docs/benchmarks.md``).
    preferred_method = "LSODA"

    def __init__(self, data, loss: str = "nll", rates=None, start=None, start_log_c=None):
        super().__init__(data, loss=loss, rates=rates, start=start, start_log_c=start_log_c)
        H, d = self.heads, int(data.vocab_size)
        self.windows = WindowLaws(data.window_joint(H), context=int(data.n_gram) - 1)
        W = self.windows.windows
        digits = np.arange(W)[:, None] // d ** np.arange(H - 1, -1, -1)[None, :] % d
        # matches[h-1, z, z_q] = 1[z_h = z_{q,h}]
        self.matches = (digits.T[:, :, None] == digits.T[:, None, :]).astype(float)
        self.products = subset_products(self.matches, self.subsets)

    def loss_and_gradient(self, y: np.ndarray, gradient: bool = True, value: bool = True):
        parts = self.split(y)
        c, a = parts["c"], parts["a"]
        p = c * c / np.dot(c, c)
        kernel = np.tensordot(p, self.products, axes=1)
        value, d_kernel, d_a = window_loss(self.windows, kernel, a, self.loss_name, gradient,
                                           value)
        if not gradient:
            return value, None
        d_p = subset_gradient(d_kernel, self.products)
        return value, self.pack(coefficient_gradient(c, d_p), None, d_a)
