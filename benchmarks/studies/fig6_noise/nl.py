"""Nonlinear noisy heavy ball on Level T (no linearisation): R members from the
start, each step u' = mu u + D sum_i W_i g_i(theta), theta' = theta + u', with
  noise "resample": W = counts / B, counts ~ Multinomial(B, w) over the K*N
                    sequences of Level T's sample (= minibatch SGD on that sample);
  noise "gauss":    W = w + sqrt(w / B) zeta - w * sum(sqrt(w / B) zeta)  (Gaussian,
                    the same mean and covariance D Sigma D / B as the LNA uses).
Separates "is the noise model right" from "is the linearisation right".

Env NOISE_BLOCK=Y or Z keeps the minibatch noise in that block only (the other block
gets the exact Level T gradient); env LEVEL_T_N sets Level T's samples per class.

usage: python nl.py CELL NOISE [R] [seed] [B]
"""
import json
import os
import sys
import time

import numpy as np
from common import MU, OUT, ZReader, cell, level_t_field, weighted_gradients

name, noise = sys.argv[1], sys.argv[2]
R = int(sys.argv[3]) if len(sys.argv) > 3 else 40
seed = int(sys.argv[4]) if len(sys.argv) > 4 else 11
data, p = cell(name)
B = int(sys.argv[5]) if len(sys.argv) > 5 else p.batch_size
over = {"sample_size": int(os.environ["LEVEL_T_N"])} if "LEVEL_T_N" in os.environ else {}
block = os.environ.get("NOISE_BLOCK", "")
f = level_t_field(data, p, **over)
zr = ZReader(f)
n, D = f.size, f.rate_vector
K, N = data.num_classes, f.sample.sample_size
w = np.repeat((np.asarray(data.weights) / N)[:, None], N, axis=1)
rng = np.random.default_rng(seed)
CH = 16 if n > 20000 else 64
theta = np.repeat(f.initial_state()[None], R, axis=0)
u = np.zeros_like(theta)
Hs = [zr.H(theta)]
t0 = time.perf_counter()
for k in range(p.steps):
    if noise == "resample":
        W = rng.multinomial(B, w.ravel(), size=R).reshape(R, K, N) / B
    else:
        c = np.sqrt(w / B) * rng.standard_normal((R, K, N))
        W = w + c - w * c.sum(axis=(1, 2))[:, None, None]
    g = np.empty_like(theta)
    for i in range(0, R, CH):
        g[i:i + CH] = weighted_gradients(f, theta[i:i + CH], W[i:i + CH])
    if block:
        g0 = f.gradients(theta)
        sl = slice(0, f._ny) if block == "Z" else slice(f._ny, None)   # block without noise
        g[:, sl] = g0[:, sl]
    u = MU * u + D * g
    theta = theta + u
    Hs.append(zr.H(theta))
Hs = np.array(Hs)                                     # (101, R)
zf = zr.z(theta)
out = {"cell": name, "noise": noise, "noise_block": block or "all", "level_t": over, "R": R, "B": B, "seconds": time.perf_counter() - t0,
       "H_mean": float(Hs[-1].mean()), "H_sd": float(Hs[-1].std()),
       "H_sem": float(Hs[-1].std(ddof=1) / np.sqrt(R)),
       "H_at_mean_z": float(zr.data and __import__("odeflow.analysis.measures", fromlist=["x"])
                            .distinct_entropy(data, zf.mean(0))),
       "per_step": {"H_mean": Hs.mean(1).tolist(), "H_sd": Hs.std(1).tolist()}}
out["jensen_gap"] = out["H_mean"] - out["H_at_mean_z"]
json.dump(out, open(f"{OUT}/nl_{name}_{noise}_R{R}_B{B}" + (f"_only{block}" if block else "")
                + (f"_N{over['sample_size']}" if over else "") + ".json", "w"), indent=1)
print(json.dumps({k: v for k, v in out.items() if k != "per_step"}, indent=1))
