"""Dense LNA on a small cell (syn-medium-1: n = 1020, augmented 2040): the literal
recursion C_{k+1} = J_k C_k J_k^T + Q_k with J_k by central finite differences
(n directions), Q_k = [[S, S], [S, S]], S = D Sigma_k D / B from the K*N per-example
gradients; the O(1/B) mean correction m2_{k+1} = J_k m2_k + 0.5 tr(F'' C_thth)
(tr(F'' C) = sum_a lambda_a F''[v_a, v_a] over the eigenpairs of C_thth); Jensen term
0.5 tr(Hess_H C_zz) with Hess_H by finite differences. Checks the Monte Carlo
(linearised-ensemble) estimates of lna.py.

usage: python lna_dense.py [CELL]
"""
import json
import sys
import time

import numpy as np
from common import MU, OUT, ZReader, cell, chunked, level_t_field, weighted_gradients

name = sys.argv[1] if len(sys.argv) > 1 else "m1_ez1_r5"
data, p = cell(name)
f = level_t_field(data, p)
zr = ZReader(f)
n, D, B = f.size, f.rate_vector, p.batch_size
K, N = data.num_classes, f.sample.sample_size
w = np.repeat(np.asarray(data.weights) / N, N)
Wid = np.eye(K * N).reshape(K * N, K, N)
grad = f.gradients
ny, nz = f._ny, f.n_logits


def hess_H(theta, h=1e-4):
    """Hessian of H in the carried logits (nz x nz), central differences."""
    E = np.eye(nz) * h
    Hm = np.zeros((nz, nz))
    def at(dz):
        t = theta.copy()
        t[ny:] += dz
        return zr.H(t)
    for i in range(nz):
        for j in range(i, nz):
            v = at(E[i] + E[j]) - at(E[i] - E[j]) - at(-E[i] + E[j]) + at(-E[i] - E[j])
            Hm[i, j] = Hm[j, i] = v / (4 * h * h)
    return Hm


theta, u = f.initial_state().copy(), np.zeros(n)
C = np.zeros((2 * n, 2 * n))
th2, u2 = np.zeros(n), np.zeros(n)
t0 = time.perf_counter()
for k in range(p.steps):
    g0 = grad(theta[None])[0]
    # Jacobian A = D dg/dtheta by central differences, column by column
    h = 1e-5
    I = np.eye(n) * h
    A = ((chunked(grad, theta + I, chunk=128) - chunked(grad, theta - I, chunk=128)) / (2 * h)).T
    A *= D[:, None]
    J = np.block([[np.eye(n) + A, MU * np.eye(n)], [A, MU * np.eye(n)]])
    # per-example gradients -> Sigma
    G = weighted_gradients(f, theta[None], Wid)           # (K N, n)
    Gc = (G - w @ G) * np.sqrt(w / B)[:, None] * D        # rows: sqrt(w_i/B) D (g_i - gbar)
    S = Gc.T @ Gc
    # second-order mean forcing 0.5 tr(F'' C_thth)
    lam, V = np.linalg.eigh(C[:n, :n])
    keep = lam > lam.max() * 1e-12 if lam.max() > 0 else np.zeros(n, bool)
    force = np.zeros(n)
    if keep.any():
        Vk = V[:, keep].T                                  # (r, n)
        hh = 1e-3 / np.abs(Vk).max(axis=1, keepdims=True)
        gp = chunked(grad, theta + hh * Vk, chunk=128)
        gm = chunked(grad, theta - hh * Vk, chunk=128)
        force = 0.5 * (lam[keep][:, None] * D * (gp + gm - 2 * g0) / hh ** 2).sum(axis=0)
    # propagate
    x2 = np.concatenate([th2, u2])
    x2 = J @ x2 + np.concatenate([force, force])
    th2, u2 = x2[:n], x2[n:]
    C = J @ C @ J.T
    C[:n, :n] += S
    C[:n, n:] += S
    C[n:, :n] += S
    C[n:, n:] += S
    u = MU * u + D * g0
    theta = theta + u
    if k % 20 == 0:
        print(k, f"{time.perf_counter() - t0:.0f}s", flush=True)
Hh = hess_H(theta)
Czz = C[ny:n, ny:n]
jensen = 0.5 * float(np.sum(Hh * Czz))
out = {"cell": name, "n": n, "H_mean_state": float(zr.H(theta)), "jensen_2nd": jensen,
       "H_pred_lna": float(zr.H(theta)) + jensen,
       "H_pert": float(zr.H(theta + th2)) + jensen,
       "sd_H_linear": float(np.sqrt(np.maximum(0, 0))),
       "seconds": time.perf_counter() - t0}
# linear sd of H: grad_H^T C_zz grad_H
e = 1e-5
gH = np.array([(zr.H(theta + e * np.eye(n)[ny + i]) - zr.H(theta - e * np.eye(n)[ny + i])) / (2 * e)
               for i in range(nz)])
out["sd_H_linear"] = float(np.sqrt(gH @ Czz @ gH))
json.dump(out, open(f"{OUT}/lna_dense_{name}.json", "w"), indent=1)
print(json.dumps(out, indent=1))
