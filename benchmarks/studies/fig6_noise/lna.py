"""Linear-noise (LNA) covariance along the discrete heavy ball on Level T, by a
linearised ensemble (an unbiased Monte Carlo estimate of C_k), and the
second-order mean correction.

State x = (theta, u), u = eta v (ascent form of the trainer's v <- mu v + g,
theta <- theta - eta v). One heavy-ball step:
    u' = mu u + F(theta) + xi,   theta' = theta + u',   F = D grad J_T, D = diag(rates)
with minibatch noise xi = D (grad J_batch - grad J_T), Cov xi = D Sigma D / B,
    Sigma = sum_i w_i (g_i - gbar)(g_i - gbar)^T,  w_i = pi_k / N,
over the K*N sequences i of Level T's fixed sample (the trainer draws a class by pi
and then a sequence; here the sequence is drawn from Level T's N per class).
Jacobian of the step on (theta, u):  J = [[I + A, mu I], [A, mu I]],  A = dF/dtheta.
Noise enters theta and u identically: Q = [[S, S], [S, S]], S = D Sigma D / B.

C_{k+1} = J_k C_k J_k^T + Q_k is never formed (2n up to 101,400). Instead R_lin
deviations delta_r = (a_r, b_r) follow delta' = J_k delta + xi_r with xi_r ~ N(0, Q_k)
drawn exactly as D sum_i sqrt(w_i / B) zeta_i (g_i - gbar), zeta ~ N(0, 1):
E[delta delta^T] = C_k exactly (sample estimate). A a_r by central differences,
F''[a_r, a_r] from the same two evaluations.

mode "lna": mean = deterministic discrete heavy ball (m_{k+1} = step(m_k)).
mode "mc2": m_{k+1} = step(m_k) + 0.5 E_r F''(theta_k)[a_r, a_r] (in u and theta),
            deviations linearised about this corrected mean (Gaussian closure at
            second order: mean + covariance).
Predicted mean entropy: H(m_k) + 0.5 E_r H''(m_k)[a_r, a_r] (Z block; FD), and the
nonlinear readout E_r H(m_k + a_r).

usage: python lna.py CELL MODE [R_lin] [seed]
"""
import json
import os
import sys
import time

import numpy as np
from common import MU, OUT, ZReader, cell, d2H, level_t_field, linearised, weighted_gradients

# NOISE_DRAW=orth (the follow-up in cheap/): orthogonal draws across the R members
DRAW = os.environ.get("NOISE_DRAW", "gauss")
PREFIX = "orth" if DRAW == "orth" else "lna"
name, mode = sys.argv[1], sys.argv[2]
R = int(sys.argv[3]) if len(sys.argv) > 3 else 128
seed = int(sys.argv[4]) if len(sys.argv) > 4 else 7
data, p = cell(name)
B = p.batch_size
f = level_t_field(data, p)
zr = ZReader(f)
n = f.size
D = f.rate_vector
K, N = data.num_classes, f.sample.sample_size
w = np.repeat((np.asarray(data.weights) / N)[:, None], N, axis=1)        # (K, N)
rng = np.random.default_rng(seed)
grad = f.gradients
CH = 16 if n > 20000 else 64


theta, u = f.initial_state().copy(), np.zeros(n)
a, b = np.zeros((R, n)), np.zeros((R, n))
# mode "lna" also carries the O(1/B) mean correction by linear response (perturbation
# theory one order past the LNA): m2' = J m2 + (0.5 E F''[a, a]) in (theta, u)
th2, u2 = np.zeros(n), np.zeros(n)
rec = {k: [] for k in ("H_mean_state", "jensen_2nd", "H_pred", "H_nonlin", "corr_norm",
                       "var_z_mean", "H_nonlin_sd", "H_pert", "H_pert_lin")}
t0 = time.perf_counter()
for k in range(p.steps + 1):
    # read out at step k (before the step)
    H0 = float(zr.H(theta))
    j2 = 0.5 * d2H(zr, theta, a)
    Hn = zr.H(theta + a)
    rec["H_mean_state"].append(H0)
    rec["jensen_2nd"].append(float(j2.mean()))
    rec["H_pred"].append(H0 + float(j2.mean()))
    rec["H_nonlin"].append(float(Hn.mean()))
    rec["H_nonlin_sd"].append(float(Hn.std()))
    if mode == "lna":   # H(m + m2) + Jensen term; and the linear readout dH . m2
        rec["H_pert"].append(float(zr.H(theta + th2)) + float(j2.mean()))
        e = 1e-4 / max(np.abs(th2).max(), 1e-300)
        dH = (zr.H(theta + e * th2) - zr.H(theta - e * th2)) / (2 * e) if th2.any() else 0.0
        rec["H_pert_lin"].append(H0 + float(dH) + float(j2.mean()))
    rec["var_z_mean"].append(float((a[:, f._ny:] ** 2).mean()))
    if k == p.steps:
        rec["jensen_2nd_sem"] = float(j2.std(ddof=1) / np.sqrt(R))
        rec["H_nonlin_sem"] = float(Hn.std(ddof=1) / np.sqrt(R))
        break
    g0 = grad(theta[None])[0]
    Aa, d2F = linearised(grad, theta, a, g0, D, CH)
    # exact Gaussian minibatch noise with covariance D Sigma D / B
    if DRAW == "orth":
        # orthogonal (Haar) noise rows in sequence space, each of norm sqrt(K N): still
        # E sum_r zeta_r zeta_r^T / R = I (unbiased), lower variance of the injected Q estimate
        Zq, _ = np.linalg.qr(rng.standard_normal((K * N, R)))
        c = np.sqrt(w / B) * (Zq.T * np.sqrt(K * N)).reshape(R, K, N)
    else:
        c = np.sqrt(w / B) * rng.standard_normal((R, K, N))
    xi = np.empty((R, n))
    for i in range(0, R, CH):
        xi[i:i + CH] = weighted_gradients(f, theta[None], c[i:i + CH])
    xi -= c.sum(axis=(1, 2))[:, None] * g0
    xi *= D
    F0 = D * g0
    if mode == "lna":
        if th2.any():
            e = 1e-3 / np.abs(th2).max()
            gg = grad(np.stack([theta + e * th2, theta - e * th2]))
            A2 = D * (gg[0] - gg[1]) / (2 * e)
        else:
            A2 = np.zeros(n)
        u2 = MU * u2 + A2 + 0.5 * d2F.mean(axis=0)
        th2 = th2 + u2
    corr = 0.5 * d2F.mean(axis=0) if mode == "mc2" else 0.0
    rec["corr_norm"].append(float(np.abs(corr).max()) if mode == "mc2" else 0.0)
    u = MU * u + F0 + corr
    theta = theta + u
    b = MU * b + Aa + xi
    a = a + b
    if k % 20 == 0:
        print(f"step {k} H={H0:.4f} jensen2={j2.mean():.5f} Hnl={Hn.mean():.4f} "
              f"t={time.perf_counter() - t0:.0f}s", flush=True)
wall = time.perf_counter() - t0
out = {"cell": name, "mode": mode, "R_lin": R, "seed": seed, "n_params": n,
       "aug_state": 2 * n, "seconds": wall, "grad_evals_per_step": 1 + 2 * R + R,
       "H_mean_state": rec["H_mean_state"][-1], "jensen_2nd": rec["jensen_2nd"][-1],
       "jensen_2nd_sem": rec["jensen_2nd_sem"], "H_pred": rec["H_pred"][-1],
       "H_nonlin": rec["H_nonlin"][-1],
       "H_pert": rec["H_pert"][-1] if mode == "lna" else None,
       "H_pert_lin": rec["H_pert_lin"][-1] if mode == "lna" else None, "H_nonlin_sem": rec["H_nonlin_sem"],
       "H_nonlin_sd": rec["H_nonlin_sd"][-1], "per_step": rec}
json.dump(out, open(f"{OUT}/{PREFIX}_{name}_{mode}_R{R}_s{seed}.json", "w"), indent=1)
np.savez_compressed(f"{OUT}/{PREFIX}_{name}_{mode}_R{R}_s{seed}.npz",
                    z_mean=zr.z(theta), dz=zr.z(theta + a) - zr.z(theta))
print(json.dumps({k: v for k, v in out.items() if k != "per_step"}, indent=1))
