"""Level T's per-class gradient in float32 against float64: time and rounding (a lever for
issue 20's cost goal, measured and not taken; ``docs/benchmarks.md``).

The arithmetic of :meth:`odeflow.fields.FiniteTFlow.gradients` (one state, unit
weights) written out here once more with a ``dtype``, on syn-medium-5 and
syn-medium-10 from the uniform start of training seed 0 (``eta_Y = 2, eta_Z = 1``, 64
sequences a class, blocked storage): the largest difference to the field's own
gradient relative to its largest entry, and the time per gradient (min and median of 5
repeats of 20 calls, the three variants alternating in one process). The field keeps its
work arrays between calls and this script's copies do not, so "field" against
"float32" is the comparison to read (the script's own float64 also pays page faults).

Usage: ``OPENBLAS_NUM_THREADS=1 taskset -c 1 python benchmarks/studies/level_t_float32.py``.
"""

from __future__ import annotations

import time
from functools import partial

import numpy as np

import odeflow
from odeflow.fields import FiniteTFlow
from odeflow.fields.finite_t import class_blocks


def gradient(field, y, dtype, b):
    """``grad J_T`` at ``y`` with the per-class arithmetic in ``dtype`` (the sums into the
    field's columns and logits in float64); ``b`` the field's :func:`class_blocks`."""
    Y = y[None].astype(dtype)
    C, R = field.C, field.R
    ny = C * R
    Yc = np.take(Y[:, :ny].reshape(1, C, R), b.column, axis=1)
    F = b.log_probs.astype(dtype) + Y[:, ny:][:, b.logit][:, :, None, :]
    F -= F.max(axis=-1, keepdims=True)
    np.exp(F, out=F)
    F /= np.sqrt(np.einsum("pkns,pkns->pkn", F, F))[..., None]
    E = F @ Yc
    E -= E.max(axis=-1, keepdims=True)
    np.exp(E, out=E)
    E *= -1.0 / E.sum(-1)[..., None]
    E[:, np.arange(b.own.size), :, b.own] += 1.0
    G = E @ np.swapaxes(Yc, -1, -2)
    G -= F * np.einsum("pkns,pkns->pkn", F, G)[..., None]
    G *= F
    weight = b.weight.astype(dtype)
    dz = G.sum(axis=2) * weight
    dYc = (np.swapaxes(F, -1, -2) @ E) * weight[..., None]
    out = np.empty(y.size)
    dY = b.to_columns @ np.moveaxis(dYc.reshape(1, -1, R), 1, 0).reshape(-1, R).astype(float)
    out[:ny] = dY.reshape(ny)
    out[ny:] = b.to_logits @ dz.reshape(-1).astype(float)
    return out


def main() -> None:
    for preset in ("syn-medium-5", "syn-medium-10"):
        data = odeflow.DataModel.preset(preset)
        y0, z0 = odeflow.training_start(data, 0, "uniform")
        field = FiniteTFlow(data, 2.0, 1.0, start=(y0, z0), storage="blocked")
        y = field.initial_state()
        ref = field.gradient(y)
        b = class_blocks(field)
        scale = np.abs(ref).max()
        for dtype in (np.float64, np.float32):
            err = np.abs(gradient(field, y, dtype, b) - ref).max() / scale
            print(f"{preset}: {np.dtype(dtype).name} vs the field: {err:.1e} of the largest "
                  "entry")
        calls = {"field": partial(field.gradient, y),
                 "float64": partial(gradient, field, y, np.float64, b),
                 "float32": partial(gradient, field, y, np.float32, b)}
        times = {name: [] for name in calls}
        for _ in range(5):
            for name, call in calls.items():
                start = time.perf_counter()
                for _ in range(20):
                    call()
                times[name].append((time.perf_counter() - start) / 20 * 1e3)
        print(f"{preset}: ms per gradient: " + ", ".join(
            f"{name} min {min(v):.2f} / median {np.median(v):.2f}" for name, v in times.items()))


if __name__ == "__main__":
    main()
