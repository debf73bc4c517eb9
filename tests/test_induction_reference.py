"""The induction-head population loss against an independent brute-force computation.

Spec section 10: for every query window ``z_q`` (stationary probability
``mu(z_q)``), ``y_e(z_q) = sum_z mu(z) e^{a K(z, z_q)} pi(e|z) / sum_z mu(z) e^{a K(z, z_q)}``
with ``K(z, z_q) = sum_S p_S prod_{h in S} <v^_h(z), v^_h(z_q)>``; the loss is the
``mu``-average of ``-sum_e pi(e|z_q) log y_e`` ("nll") or of the cross-entropy of ``y``
used as logits ("code"), averaged over the kernels. Here every window is enumerated in
plain Python loops from a brute-force window law (tests/test_induction_data.py), with no
code of odeflow's fields or Markov module: the field's ``loss(theta)`` must agree to
round-off, for a point-mass kernel and for a small Dirichlet sample, both flows, both
losses, at random parameters.
"""

import itertools
import math

import numpy as np
import pytest

from odeflow.data.induction import InductionData
from odeflow.families import family_named
from tests.test_induction_data import brute_force_window_law


def brute_force_loss(data, c, w, a, loss, copier):
    d, H = data.vocab_size, data.heads
    W = 2 * H - 1
    subsets = list(itertools.chain.from_iterable(
        itertools.combinations(range(1, H + 1), k) for k in range(data.degree + 1)))
    p = {S: c[i] ** 2 / sum(x ** 2 for x in c) for i, S in enumerate(subsets)}

    def unit_value(z, h):
        if copier:
            v = [0.0] * d
            v[z[h - 1]] = 1.0
            return v
        m = max(w[h - 1])
        s = [math.exp(x - m) for x in w[h - 1]]
        s = [x / sum(s) for x in s]
        v = [0.0] * d
        for j in range(H):
            v[z[h + j - 1]] += s[j]
        norm = math.sqrt(sum(x * x for x in v))
        return [x / norm for x in v]

    def kernel_value(z, zq):
        total = 0.0
        for S in subsets:
            prod = 1.0
            for h in S:
                prod *= sum(x * y for x, y in zip(unit_value(z, h), unit_value(zq, h), strict=True))
            total += p[S] * prod
        return total

    total = 0.0
    for kernel in data.kernels:
        law = brute_force_window_law(np.asarray(kernel), data.n_gram, W)
        windows = list(itertools.product(range(d), repeat=W))
        mu = {z: float(law[z].sum()) for z in windows}
        pi = {z: [law[z][e] / mu[z] for e in range(d)] for z in windows if mu[z] > 0}
        for zq in windows:
            if mu[zq] == 0:
                continue
            num = [0.0] * d
            den = 0.0
            for z in windows:
                if mu[z] == 0:
                    continue
                weight = mu[z] * math.exp(a * kernel_value(z, zq))
                den += weight
                for e in range(d):
                    num[e] += weight * pi[z][e]
            y = [x / den for x in num]
            if loss == "nll":
                part = -sum(pi[zq][e] * math.log(y[e]) for e in range(d) if pi[zq][e] > 0)
            else:
                lse = math.log(sum(math.exp(x) for x in y))
                part = sum(pi[zq][e] * (lse - y[e]) for e in range(d))
            total += mu[zq] * part
    return total / len(data.kernels)


MODELS = {
    "point": lambda: InductionData.preset("ih-point"),
    "dirichlet": lambda: InductionData(2, 3, 3, 2, alpha=1.0, num_kernels=2, seed=5),
}


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("flow", ["population", "copier"])
@pytest.mark.parametrize("loss", ["nll", "code"])
def test_population_loss_equals_brute_force(model, flow, loss):
    data = MODELS[model]()
    field = family_named("induction").field_class(flow)(data, loss=loss)
    rng = np.random.default_rng(11)
    nS, H = len(data.subsets), data.heads
    for _ in range(2):
        c = rng.normal(size=nS)
        w = rng.normal(scale=1.5, size=(H, H))
        a = float(rng.uniform(0.5, 4.0))
        theta = np.concatenate([c, [a]]) if flow == "copier" else \
            np.concatenate([c, w.ravel(), [a]])
        assert theta.size == field.size
        expected = brute_force_loss(data, c, w, a, loss, copier=flow == "copier")
        assert field.loss(theta) == pytest.approx(expected, rel=1e-11, abs=1e-13)
