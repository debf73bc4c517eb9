"""The population flow of the induction-head model, ``flow="population"`` (``docs/induction.md``).

``L -> infinity``: the key windows follow the chain's stationary law, so for a
query window ``z_q`` (the ``2H - 1`` tokens before the query) the classifier's
output is

    y_e(z_q) = sum_z mu(z) e^{a K(z, z_q)} pi(e|z) / sum_z mu(z) e^{a K(z, z_q)},
    K(z, z_q) = sum_S p_S prod_{h in S} <v^_h(z), v^_h(z_q)>,

with ``v_h(z) = sum_j softmax_j(w_h) e_{z_{h+j}}`` (soft copier), ``v^ = v /
||v||`` and ``p_S = c_S^2 / sum c^2``, and the loss is the expectation over the
query window, its next token and the prior (a fixed seeded sample of ``N_pi``
kernels; exact for a point mass): ``loss = -E_pi sum_{z_q} mu(z_q) sum_e
pi(e|z_q) log y_e(z_q)`` (``loss="nll"``) or, with ``y`` used as logits,
``E_pi sum_{z_q} mu(z_q) sum_e pi(e|z_q) (-y_e + log sum_e' e^{y_e'})``
(``loss="code"``, the authors' training code).

The gradient is analytic (:func:`window_loss` and
:meth:`PopulationFlow.loss_and_gradient`): the chain rule through the
classifier softmax over the key windows (a matrix product of the window laws
with ``e^{a K}``, shifted per query column in log space), the kernel ``K``,
``p_S``, the normalisation of ``v`` and ``softmax(w)``. One right-hand side is
two products of the ``W x W`` matrix ``e^{aK}`` (``W = d**(2H-1)``) with the window
laws, split by the next token's context (:class:`WindowLaws`: ``4 W**2 N_pi`` flops
plus ``4 W N_pi d**n``; the denominators are the numerators' sums), and
``O((#S + 2H) W**2)`` elementwise work on ``K`` and the Gram matrices: for large
``N_pi`` the cost grows like ``d**(4H-2) N_pi``
(``benchmarks/bench_induction.py``, ``docs/benchmarks.md``).

Numerics: the coefficients ``c_S`` of losing subsets decay exponentially and may
recover later: on ``ih-point`` the joint flow's ``c_{(1,2)}`` falls to ``e^-806``
(below the smallest double) before ``{1, 2}`` wins. The solver therefore carries
``ln|c_S|`` (:mod:`odeflow.fields.induction.base`, "Selector coordinates"), on which
the integrators agree on the time ``{1, 2}`` wins; in ``c`` itself the absolute
error control would set that time (``docs/induction.md``, "Figures").
"""

from __future__ import annotations

import numpy as np
from scipy.special import softmax

from odeflow.errors import ValidationError
from odeflow.fields.induction.base import InductionField


class WindowLaws:
    """The window laws of a data model arranged for :func:`window_loss`.

    The two products of a right-hand side, ``num = e^{aK}^T P`` and its
    transpose back, cost ``2 W**2 N_pi d`` flops each when ``P`` is used as a
    ``W x N_pi d`` matrix. When the next token's law depends only on the
    first ``m`` tokens of the window (its *context*: an ``n``-gram chain with
    ``n - 1 = m < 2H - 1``), ``P_k(z, e) = mu_k(z) pi_k(e | z_1..z_m)`` and each
    product splits into one over the ``W / d**m`` windows of a context
    (``2 W**2 N_pi`` flops, without ``d``) and one over the ``d**m`` contexts
    (``2 W N_pi d**(m+1)`` flops): about ``d`` times fewer.

    Parameters
    ----------
    laws : ndarray, shape (N_pi, W, d)
        ``P_k(z, e)``: each kernel's stationary law of a window and its next token.
    context : int, optional
        ``m``: the next token's law given the window depends only on its first ``m``
        tokens (offsets ``1..m``; ``n - 1`` for an ``n``-gram chain). Checked
        against ``laws``; None, or ``d**m >= W``: no factorisation.

    Attributes
    ----------
    joint : ndarray, shape (N_pi, d, W), or (W, N_pi, d) without a context
        ``P`` in the layout of ``num``.
    marginal : ndarray, shape (N_pi, W), or (W, N_pi) without a context
        ``mu_k(z)`` in the same layout without the token axis.
    token_axis : int
        The axis of ``e`` in :attr:`joint` (1, or 2 without a context).
    contexts : int
        ``C = d**m`` (``W`` without a factorisation).
    conditional : ndarray, shape (N_pi, C, d), or None
        ``pi_k(e | context)`` (uniform on a context of probability 0).

    Raises
    ------
    ValidationError
        (field ``laws``) when ``P`` is not ``mu pi`` for the given ``context``.
    """

    def __init__(self, laws: np.ndarray, context: int | None = None):
        laws = np.asarray(laws, dtype=float)
        self.count, self.windows, self.vocab = laws.shape
        N, W, d = laws.shape
        marginal = laws.sum(axis=2)                                  # (N, W)
        C = W if context is None else d ** int(context)
        self.factored = C < W
        if self.factored:
            R = W // C
            self.contexts = C
            mass = marginal.reshape(N, C, R).sum(axis=2)             # (N, C)
            cond = laws.reshape(N, C, R, d).sum(axis=2)
            cond = np.divide(cond, mass[..., None], out=np.full_like(cond, 1.0 / d),
                             where=mass[..., None] > 0)                  # (N, C, d)
            err = np.max(np.abs(laws - marginal[..., None] * np.repeat(cond, R, axis=1)))
            if not err <= 1e-12:
                raise ValidationError("laws", f"the next token's law is not a function of "
                                      f"the first {context} window tokens (error {err:.3g})")
            self.conditional = cond
            self._conditional_t = np.ascontiguousarray(cond.transpose(0, 2, 1))  # (N, d, C)
            # mu grouped by context: (C, N, R) for the forward product, (C, R, N) back
            by_context = marginal.reshape(N, C, R)
            self._mu_forward = np.ascontiguousarray(by_context.transpose(1, 0, 2))
            self._mu_back = np.ascontiguousarray(by_context.transpose(1, 2, 0))
            # (N, d, W): the token axis outside the windows keeps the loops over W long
            self.joint = np.ascontiguousarray(laws.transpose(0, 2, 1))
            self.marginal = marginal                                 # (N, W)
            self.token_axis = 1
            self._per_context = np.empty((C, N, W))
            self._back_context = np.empty((C, N, W))
        else:
            self.contexts = W
            self.conditional = None
            self._matrix = np.ascontiguousarray(laws.transpose(1, 0, 2).reshape(W, N * d))
            self.joint = self._matrix.reshape(W, N, d)               # (W, N, d)
            self.marginal = np.ascontiguousarray(marginal.T)         # (W, N)
            self.token_axis = 2
        self.positive = self.joint > 0
        self.seen = self.marginal > 0
        self.joint_mean = self.joint / N                 # P / N_pi: the sample mean's weights
        self.marginal_mean = self.marginal / N
        self.ratio = np.zeros(self.marginal.shape)       # 0 where mu = 0, never written
        self.zero = np.flatnonzero(~self.positive)      # entries with P = 0 (usually none)
        # work arrays reused by every call (fresh arrays of this size cost page faults);
        # zero where P = 0, never written
        self.num = np.empty(self.joint.shape)
        self.den = np.empty(self.marginal.shape)
        self.work = np.zeros(self.joint.shape)
        self.back = np.zeros(self.joint.shape)
        self.weights = np.empty((W, W))
        self.pulled = np.empty((W, W))

    def push(self, weights: np.ndarray):
        """``num = sum_z weights[z, z_q] P_k(z, e)`` and ``den = sum_e num``, in the
        layouts of :attr:`joint` and :attr:`marginal` (work arrays, overwritten by the
        next call)."""
        if not self.factored:
            N, W, d = self.count, self.windows, self.vocab
            np.matmul(weights.T, self._matrix, out=self.num.reshape(W, N * d))
            np.add.reduce(self.num, axis=2, out=self.den)
            return self.num, self.den
        C = self.contexts
        # sum over the windows of each context, then over the contexts with pi
        part = np.matmul(self._mu_forward, weights.reshape(C, -1, self.windows),
                         out=self._per_context)                      # (C, N, z_q)
        np.add.reduce(part, axis=0, out=self.den)                    # pi sums to 1 over e
        np.matmul(self._conditional_t, part.transpose(1, 0, 2), out=self.num)  # (N, d, z_q)
        return self.num, self.den

    def pull(self, back: np.ndarray) -> np.ndarray:
        """``sum_{k, e} P_k(z, e) back[z_q, k, e]`` (``back`` in the layout of
        :attr:`joint`), shape (W, W) (a work array)."""
        if not self.factored:
            N, W, d = self.count, self.windows, self.vocab
            return np.matmul(self._matrix, back.reshape(W, N * d).T, out=self.pulled)
        C, W = self.contexts, self.windows
        per_context = self._back_context                             # (C, N, z_q)
        np.matmul(self.conditional, back, out=per_context.transpose(1, 0, 2))
        np.matmul(self._mu_back, per_context, out=self.pulled.reshape(C, -1, W))
        return self.pulled


def window_loss(laws: WindowLaws, kernel: np.ndarray, a: float, loss: str = "nll",
                gradient: bool = True, value: bool = True):
    """Population loss of a window kernel ``K`` and its gradient in ``K`` and ``a``.

    Parameters
    ----------
    laws : WindowLaws
    kernel : ndarray, shape (W, W)
        ``K[z, z_q]`` (key window first).
    a : float
        Classifier weight.
    loss : {"nll", "code"}
    gradient : bool
        Also return the derivatives.
    value : bool
        Compute the loss (the gradient does not need its logarithms); False returns
        None in its place.

    Returns
    -------
    value : float or None
        The loss averaged over the kernels of the sample.
    d_kernel : ndarray, shape (W, W), or None
        ``d loss / d K[z, z_q]``.
    d_a : float or None
        ``d loss / d a``.
    """
    N, e = laws.count, laws.token_axis
    weights = np.multiply(kernel, a, out=laws.weights)
    weights -= weights.max(axis=0, keepdims=True)               # log-space per query column
    np.exp(weights, out=weights)                                # (z, z_q), max 1 per column
    num, den = laws.push(weights)                               # cells of P: (.., z_q, ..)
    P, mu = laws.joint, laws.marginal
    safe_den = np.where(laws.seen, den, 1.0)
    out = None
    if loss == "nll":
        if value:
            logs = np.log(num, out=laws.work, where=laws.positive)  # 0 where P = 0
            out = float((-np.vdot(P, logs) + np.sum(mu * np.log(safe_den))) / N)
        if not gradient:
            return out, None, None
        # d/d num_e + d/d den = (mu / den - P / num_e) / N (0 where P = 0 or mu = 0)
        if laws.zero.size:
            back = np.divide(laws.joint_mean, num, out=laws.back, where=laws.positive)
            back.ravel()[laws.zero] = 0.0
        else:
            back = np.divide(laws.joint_mean, num, out=laws.back)
        ratio = np.divide(laws.marginal_mean, safe_den, out=laws.ratio, where=laws.seen)
        np.subtract(np.expand_dims(ratio, e), back, out=back)
    else:
        y = num / np.expand_dims(safe_den, e)   # a distribution: in [0, 1], exp is safe
        expo = np.exp(y)
        total = expo.sum(axis=e)
        if value:
            out = float((-np.sum(P * y) + np.sum(mu * np.log(total))) / N)
        if not gradient:
            return out, None, None
        d_y = (-P + np.expand_dims(mu, e) * (expo / np.expand_dims(total, e))) / N
        d_den = np.where(laws.seen, -np.sum(d_y * y, axis=e) / safe_den, 0.0)
        back = np.divide(d_y, np.expand_dims(safe_den, e), out=laws.back)
        back += np.expand_dims(d_den, e)
    # den = sum_e num_e, so d/d num_e absorbs d/d den: one product back, like the one forward
    d_logits = laws.pull(back)
    d_logits *= weights                                          # (z, z_q)
    d_a = float(np.vdot(d_logits, kernel))
    d_logits *= a
    return out, d_logits, d_a


def subset_products(grams: np.ndarray, subsets, out=None) -> np.ndarray:
    """``prod_{h in S} G_h`` for every subset (the empty product is 1): (#S, W, W)
    (written into ``out`` when given)."""
    if out is None:
        out = np.empty((len(subsets),) + grams.shape[1:])
    for i, s in enumerate(subsets):
        out[i] = 1.0
        for h in s:
            out[i] *= grams[h - 1]
    return out


def subset_gradient(d_kernel: np.ndarray, products: np.ndarray) -> np.ndarray:
    """``d loss / d p_S = <prod_S, d loss / d K>`` for ``K = sum_S p_S prod_S`` (the chain
    rule from the kernel to the subset weights), shape ``(#S,)``."""
    return products.reshape(products.shape[0], -1) @ d_kernel.ravel()


def coefficient_gradient(c: np.ndarray, d_p: np.ndarray) -> np.ndarray:
    """``d loss / d c`` from ``d loss / d p`` with ``p_S = c_S^2 / sum c^2``."""
    u = float(np.dot(c, c))
    p = c * c / u
    return 2.0 * c / u * (d_p - np.dot(p, d_p))


class PopulationFlow(InductionField):
    """``flow="population"``: gradient flow of the ``L -> infinity`` loss.

    State ``theta = (c (#S,), w (H*H,), a)``. Parameters as
    :class:`~odeflow.fields.induction.base.InductionField` (``loss``, ``rates``,
    ``start``).
    """

    name = "population"
    groups = ("c", "w", "a")
    #: Integrator of ``method="auto"``: with the selector in log coordinates the flow is
    #: stiff only in places, and LSODA switches between its Adams mode and BDF there
    #: (``docs/benchmarks.md``, "The integrator of ``method="auto"``: LSODA").
    preferred_method = "LSODA"

    def __init__(self, data, loss: str = "nll", rates=None, start=None, start_log_c=None):
        super().__init__(data, loss=loss, rates=rates, start=start, start_log_c=start_log_c)
        H, d = self.heads, int(data.vocab_size)
        self.windows = WindowLaws(data.window_laws(), context=int(data.n_gram) - 1)
        W = self.windows.windows
        digits = np.arange(W)[:, None] // d ** np.arange(2 * H - 2, -1, -1)[None, :] % d
        # onehot[h-1, j, z, :] = e_{z_{h+j}}: the token head h reads at its j-th offset
        # work arrays reused by every call (see WindowLaws)
        # basis[i] = prod_{h in S_i} G_h: 1 for the empty set, G_h in the slot of {h}
        index = {s: i for i, s in enumerate(self.subsets)}
        self._basis = np.empty((len(self.subsets), W, W))
        for i, s in enumerate(self.subsets):
            if not s:
                self._basis[i] = 1.0
        self._singles = [(h - 1, index[(h,)]) for h in range(1, H + 1) if (h,) in index]
        # prod_S = prod_{S without its last head} G_last (smaller subsets come first)
        self._composites = [(i, index[s[:-1]], index[s[-1:]]) for i, s in
                            enumerate(self.subsets) if len(s) >= 2]
        # d prod_S / d G_h = prod_{S \ h}, also a subset of the list (it holds every size <= D)
        self._drops = [(h - 1, i, index[tuple(g for g in s if g != h)])
                       for i, s in enumerate(self.subsets) for h in s]
        self._sym = np.empty((W, W))
        self._d_grams = np.empty((H, W, W))
        self._d_vhat = np.empty((H, W, d))
        self.onehot = np.zeros((H, H, W, d))
        for h in range(H):
            for j in range(H):
                self.onehot[h, j, np.arange(W), digits[:, h + j]] = 1.0

    def features(self, w: np.ndarray):
        """``(softmax(w) (H, H), v (H, W, d), ||v|| (H, W, 1), v^ (H, W, d))``."""
        s = softmax(w, axis=1)
        v = np.einsum("hj,hjzd->hzd", s, self.onehot, optimize=True)
        norm = np.linalg.norm(v, axis=2, keepdims=True)
        return s, v, norm, v / norm

    def loss_and_gradient(self, y: np.ndarray, gradient: bool = True, value: bool = True):
        parts = self.split(y)
        c, w, a = parts["c"], parts["w"], parts["a"]
        p = c * c / np.dot(c, c)
        s, _, norm, vhat = self.features(w)
        basis = self._basis
        for h, i in self._singles:                                   # G_h = v^_h v^_h^T
            np.matmul(vhat[h], vhat[h].T, out=basis[i])
        for i, j, k in self._composites:
            np.multiply(basis[j], basis[k], out=basis[i])
        flat = basis.reshape(len(self.subsets), -1)
        kernel = (p @ flat).reshape(basis.shape[1:])                 # sum_S p_S prod_S
        value, d_kernel, d_a = window_loss(self.windows, kernel, a, self.loss_name, gradient,
                                           value)
        if not gradient:
            return value, None
        # G_h = v^_h v^_h^T: d/d v^_h = (dG_h + dG_h^T) v^_h, and with every product of
        # Gram matrices symmetric, dG_h + dG_h^T is d/dG_h taken with dK + dK^T
        sym = np.add(d_kernel, d_kernel.T, out=self._sym)
        d_p = 0.5 * (flat @ sym.ravel())      # <prod_S, dK> = <prod_S, (dK + dK^T) / 2>
        chain = np.zeros((self.heads, len(self.subsets)))           # d K / d G_h = chain_h . basis
        for h, i, j in self._drops:
            chain[h, j] += p[i]
        d_grams = np.matmul(chain, flat, out=self._d_grams.reshape(self.heads, -1))
        d_grams = d_grams.reshape(self._d_grams.shape)
        d_grams *= sym
        d_vhat = np.matmul(d_grams, vhat, out=self._d_vhat)
        d_v = (d_vhat - vhat * np.sum(vhat * d_vhat, axis=2, keepdims=True)) / norm
        d_s = np.einsum("hzd,hjzd->hj", d_v, self.onehot, optimize=True)
        d_w = s * (d_s - np.sum(s * d_s, axis=1, keepdims=True))
        return value, self.pack(coefficient_gradient(c, d_p), d_w, d_a)
