"""Shared pieces of the noise study (nothing here edits odeflow).

Cells, the fixed start (seed 0's draw), the Level T field used by the Fig. 6
comparison (OPTFLOWS["T"]: N = 64 sequences per class, sample seed 0, blocked
storage), a per-sequence-weighted version of FiniteTFlow.gradients (for the
per-example gradient covariance), and helpers to read z_active / entropy from
a flat Level T state.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from odeflow.analysis.measures import distinct_entropy
from odeflow.data import DataModel
from odeflow.experiments.paper import FIG6, OPTFLOWS
from odeflow.fields.finite_t import FiniteTFlow
from odeflow.training.discrete import training_start

#: Where the study writes and reads its results (``study.py --out``; outside the repository).
OUT = os.environ.get("NOISE_STUDY_OUT",
                     str(Path.home() / "odeflow-studies" / "fig6_noise"))
os.makedirs(OUT, exist_ok=True)
#: The Fig. 6 table the study projects onto (odeflow reproduce fig6).
FIG6_CSV = Path(__file__).resolve().parents[3] / "docs/reproduce/fig6.csv"

CELLS = {
    "m5_ez2_r10": ("syn-medium-5", 2.0, 10.0),
    "m10_ez1_r10": ("syn-medium-10", 1.0, 10.0),
    "m10_ez3_r10": ("syn-medium-10", 3.0, 10.0),
    "m3_ez3_r10": ("syn-medium-3", 3.0, 10.0),
    "m1_ez1_r5": ("syn-medium-1", 1.0, 5.0),      # a cell within one sd (control)
}
START_SEED = 0
MU = 0.9


def cell(name):
    preset, ez, ratio = CELLS[name]
    data = DataModel.preset(preset)
    p = FIG6.replace(eta_z=ez, eta_y=ez * ratio, steps=100)
    return data, p


def level_t_field(data, p, start_seed=START_SEED, **over):
    """The Level T field of the Fig. 6 optimiser-flow comparison, from one seed's start."""
    y0, z0 = training_start(data, start_seed, p.init)
    flow, options = OPTFLOWS["T"]
    options = {"seq_len": p.seq_len, **options, **over}
    return FiniteTFlow(data, p.eta_y, p.eta_z, start=(y0, z0), **options)


def weighted_gradients(field, states, W):
    """sum_i W_i g_i(theta): per-sequence weighted gradient of log softmax(Y f^_i)_{n_i}
    (``FiniteTFlow.gradients`` with ``weights``; W = pi_k / N everywhere is the gradient)."""
    return field.gradients(states, weights=W)


def chunked(fn, states, *extra, chunk=16):
    out = np.empty_like(states)
    for i in range(0, states.shape[0], chunk):
        out[i:i + chunk] = fn(states[i:i + chunk], *(e[i:i + chunk] for e in extra))
    return out


class ZReader:
    """Flat Level T parameters -> z_active (..., q, L) and the distinct-token entropy."""

    def __init__(self, field):
        self.field = field
        tr = field.trajectory(np.zeros(1), field.initial_state()[None], {})
        self.base = np.array(tr.z_active[0])                    # (q, L) at the start
        data = field.data
        self.q = field.logit_query
        self.l = np.searchsorted(data.active_tokens, field.logit_token)
        assert np.all(data.active_tokens[self.l] == field.logit_token)
        self.ny = field._ny
        self.data = data

    def z(self, theta):
        theta = np.asarray(theta)
        lead = theta.shape[:-1]
        out = np.broadcast_to(self.base, lead + self.base.shape).copy()
        out[..., self.q, self.l] = theta[..., self.ny:]
        return out

    def H(self, theta):
        return distinct_entropy(self.data, self.z(theta))


def fd_h(a):
    """Finite-difference step per row of ``a``: 1e-3 over its largest entry (0 for a zero row)."""
    s = np.abs(a).max(axis=1)
    return np.where(s > 0, 1e-3 / np.where(s > 0, s, 1.0), 0.0)


def d2H(zr, theta, a):
    """Second directional derivative of the entropy ``zr.H`` at ``theta`` along each row of
    ``a`` (central differences; 0 for a zero row)."""
    h = fd_h(a)[:, None]
    hp, hm, h0 = zr.H(theta + h * a), zr.H(theta - h * a), zr.H(theta)
    hh = h[:, 0]
    return np.where(hh > 0, (hp + hm - 2 * h0) / np.where(hh > 0, hh, 1.0) ** 2, 0.0)


def linearised(grad, theta, a, g0, D, chunk):
    """``(A a_r, F''[a_r, a_r])`` for each row ``a_r`` of ``a`` (``F = D grad``, ``A = dF``)
    by central differences of ``grad`` at ``theta +- h_r a_r``; zero rows give 0."""
    h = fd_h(a)[:, None]
    live = h[:, 0] > 0
    Aa = np.zeros(a.shape)
    d2F = np.zeros(a.shape)
    if live.any():
        hl = h[live]
        gp = chunked(grad, theta + hl * a[live], chunk=chunk)
        gm = chunked(grad, theta - hl * a[live], chunk=chunk)
        Aa[live] = D * (gp - gm) / (2 * hl)
        d2F[live] = D * (gp + gm - 2 * g0) / hl ** 2
    return Aa, d2F
