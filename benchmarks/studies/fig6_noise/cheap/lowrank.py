"""Rank-r square-root filter for the LNA covariance C of the heavy ball on Level T and the
O(1/B) mean correction m2' = J m2 + 0.5 tr(F'' C)  (same quantities as lna.py mode "lna",
column H_pert), with C = sum_j s_j s_j^T carried by r directions s_j = (a_j, b_j).

Each step (mean theta on the deterministic HB):
  * 2r gradients at theta +- h_j a_j give A a_j and F''[a_j, a_j]  (drift = 0.5 sum_j F''[a_j,a_j])
  * propagate s_j by the linearised step: b' = mu b + A a, a' = a + b'
  * new noise columns (xi, xi) with sum xi xi^T ~ Q_k = D Sigma D / B, from ONE gradients
    call with p weight sets at theta:
      noise=gauss : p Gaussian sketch columns sqrt(w_i/(B p)) zeta_i   (randomised range finder)
      noise=class : the K class-mean columns sqrt(pi_k/B) D(gbar_k - gbar) (between-class part
                    of Sigma only, deterministic)
      noise=classgauss: both (class columns + p Gaussian within-class columns)
  * re-compress [J S, Q^{1/2}] to its top-r SVD (Gram eigen of the (r+p) rows)
  * optional (hybrid.py, which runs this file with WITHIN_MEMBERS set): Rw = p Monte Carlo
    linearised members driven by the WITHIN-class noise only (zeta minus its class mean),
    not truncated; their drift/Jensen add to the rank-r ones (C = C_between,rank-r +
    C_within,MC).
usage: python lowrank.py CELL r noise [p] [seed];  python hybrid.py CELL r class Rw [seed]
"""
import json
import sys
import time

import numpy as np
from shared import MU, OUT, chunked, d2H, fd_h, linearised, noise_weights, setup

name, r, noise = sys.argv[1], int(sys.argv[2]), sys.argv[3]
p_ = int(sys.argv[4]) if len(sys.argv) > 4 else r
seed = int(sys.argv[5]) if len(sys.argv) > 5 else 0
# hybrid.py: p within-class Monte Carlo members beside the rank-r filter
Rw = p_ if globals().get("WITHIN_MEMBERS") else 0
data, p, B, f, zr, n, D, K, N, pi, w, rng, grad, CH = setup(name, seed)


theta, u = f.initial_state().copy(), np.zeros(n)
a, b = np.zeros((0, n)), np.zeros((0, n))
aw, bw = np.zeros((Rw, n)), np.zeros((Rw, n))
th2, u2 = np.zeros(n), np.zeros(n)
Hp, J2, ev = [], [], []
ngrad = 0
t0 = time.perf_counter()
for k in range(p.steps + 1):
    j2 = 0.5 * d2H(zr, theta, a).sum() if len(a) else 0.0
    j2 += 0.5 * d2H(zr, theta, aw).mean() if Rw else 0.0
    J2.append(float(j2)); Hp.append(float(zr.H(theta + th2)) + float(j2))
    if k == p.steps:
        break
    g0 = grad(theta[None])[0]; ngrad += 1
    drift = np.zeros(n)
    if len(a):
        h = fd_h(a)[:, None]
        gp = chunked(grad, theta + h * a, chunk=CH)
        gm = chunked(grad, theta - h * a, chunk=CH)
        ngrad += 2 * len(a)
        Aa = D * (gp - gm) / (2 * h)
        drift = 0.5 * (D * (gp + gm - 2 * g0) / h ** 2).sum(axis=0)
        b = MU * b + Aa
        a = a + b
    if Rw:
        Aw, d2Fw = linearised(grad, theta, aw, g0, D, CH)
        drift += 0.5 * d2Fw.sum(axis=0) / Rw
        ngrad += 2 * Rw
        z = rng.standard_normal((Rw, K, N)); z -= z.mean(axis=2, keepdims=True)
        cw = np.sqrt(w / B) * z * np.sqrt(N / (N - 1))
        xw = grad(theta[None], weights=cw) - cw.sum(axis=(1, 2))[:, None] * g0
        bw = MU * bw + Aw + D * xw
        aw = aw + bw
    if th2.any():
        e = 1e-3 / np.abs(th2).max()
        gg = grad(np.stack([theta + e * th2, theta - e * th2])); ngrad += 2
        A2 = D * (gg[0] - gg[1]) / (2 * e)
    else:
        A2 = np.zeros(n)
    u2 = MU * u2 + A2 + drift
    th2 = th2 + u2
    c = noise_weights(noise, K, N, pi, w, B, p_, rng)
    xi = grad(theta[None], weights=c) - c.sum(axis=(1, 2))[:, None] * g0
    xi *= D
    ngrad += 1   # one call, p weight sets (timed separately below)
    M = np.concatenate([np.concatenate([a, b], 1), np.concatenate([xi, xi], 1)])
    G = M @ M.T
    lam, V = np.linalg.eigh(G)
    idx = np.argsort(lam)[::-1][:r]
    ev.append(float(lam[idx].sum() / max(lam.sum(), 1e-300)))
    S = (V[:, idx].T @ M)
    a, b = S[:, :n].copy(), S[:, n:].copy()
    u = MU * u + D * g0
    theta = theta + u
wall = time.perf_counter() - t0
out = {"cell": name, "r": r, "noise": noise, "p": p_, "seed": seed, "seconds": wall,
       "grad_calls_per_step": ngrad / p.steps, "H_pert": Hp[-1], "jensen": J2[-1],
       "H_hb": float(zr.H(theta)), "kept_energy_mean": float(np.mean(ev)),
       "kept_energy_min": float(np.min(ev)), "H_pert_steps": Hp}
tag = f"{'hy' if Rw else 'lr'}_{name}_r{r}_{noise}_p{p_}_s{seed}"
json.dump(out, open(f"{OUT}/{tag}.json", "w"))
print(tag, json.dumps({k: v for k, v in out.items() if k != "H_pert_steps"}), flush=True)
