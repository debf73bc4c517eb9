"""One-step check of the minibatch-noise covariance: the trainer's batch gradients at the
start (fresh sequences from the true distribution, B = 128) vs Sigma_T / B from Level T's
fixed sample (N = 64 per class). Compares the Z-block and Y-block total variances."""
import sys

import numpy as np
from common import START_SEED, cell, level_t_field, weighted_gradients

from odeflow.training.counts import counts_loss_and_gradient, sample_counts
from odeflow.training.protocol import UnlumpedLayout, decoder_row_order, initial_state

name = sys.argv[1]
data, p = cell(name)
f = level_t_field(data, p)
B, K, N = p.batch_size, data.num_classes, f.sample.sample_size
lay = UnlumpedLayout(data)
Yf, Zf = initial_state(data, "uniform", np.random.default_rng(START_SEED))
Y = Yf[decoder_row_order(data)][:, data.active_tokens][None]
Z = Zf[data.query_tokens][:, data.active_tokens][None]
rngs = [np.random.default_rng(1000 + i) for i in range(1)]
gz, gy = [], []
for r in range(2000):
    batch = sample_counts(lay, rngs, B, p.seq_len)
    _, gY, gZ = counts_loss_and_gradient(lay, Y, Z, batch)
    gz.append(gZ[0].ravel())
    gy.append(gY[0].ravel())
gz, gy = np.array(gz), np.array(gy)
vz_run, vy_run = gz.var(0).sum(), gy.var(0).sum()
# Level T: per-example gradients, exact Sigma_T / B
theta = f.initial_state()
W = np.zeros((K * N, K, N))
W.reshape(K * N, K * N)[np.arange(K * N), np.arange(K * N)] = 1
G = weighted_gradients(f, theta[None], W)                  # (K*N, n) per-example gradients
w = np.repeat(np.asarray(data.weights) / N, N)
gbar = w @ G
V = (w[:, None] * (G - gbar) ** 2).sum(0) / B
vz_T, vy_T = V[f._ny:].sum(), V[:f._ny].sum()
print(name, f"Z-block total var: trainer {vz_run:.4e}  Level-T Sigma/B {vz_T:.4e}  ratio {vz_run/vz_T:.3f}")
print(name, f"Y-block total var: trainer {vy_run:.4e}  Level-T Sigma/B {vy_T:.4e}  ratio {vy_run/vy_T:.3f}")
print("mean grad Z norm trainer", np.linalg.norm(gz.mean(0)), "Level T", np.linalg.norm(gbar[f._ny:]))
