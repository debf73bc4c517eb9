"""The parent study's helpers (``../common.py``) for the follow-up's scripts, with the
follow-up's own results folder (``$NOISE_CHEAP_OUT``; ``../study.py --out DIR`` sets it to
``DIR/cheap``)."""
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from common import (  # noqa: E402
    CELLS,
    FIG6_CSV,
    MU,
    ZReader,
    cell,
    chunked,
    d2H,
    fd_h,
    level_t_field,
    linearised,
    weighted_gradients,
)
from common import OUT as STUDY_OUT  # noqa: E402  (the parent study's results)

OUT = os.environ.get("NOISE_CHEAP_OUT",
                     str(Path.home() / "odeflow-studies" / "fig6_noise" / "cheap"))
os.makedirs(OUT, exist_ok=True)
__all__ = ["CELLS", "FIG6_CSV", "MU", "OUT", "STUDY_OUT", "ZReader", "cell", "chunked", "d2H", "fd_h",
           "level_t_field", "linearised", "noise_weights", "setup", "weighted_gradients"]


def setup(name, seed):
    """``(data, p, B, f, zr, n, D, K, N, pi, w, rng, grad, CH)`` of a cell: its Level T
    field from seed 0's start, the entropy reader, rates, class weights, the rng."""
    import numpy as np

    data, p = cell(name)
    f = level_t_field(data, p)
    n, K, N = f.size, data.num_classes, f.sample.sample_size
    pi = np.asarray(data.weights)
    w = np.repeat((pi / N)[:, None], N, axis=1)
    return (data, p, p.batch_size, f, ZReader(f), n, f.rate_vector, K, N, pi, w,
            np.random.default_rng(seed), f.gradients, 16 if n > 20000 else 64)


def noise_weights(noise, K, N, pi, w, B, p_, rng):
    """Sequence weights (rows, K, N) of the injected noise: the K class-mean directions
    (``class``), ``p_`` Gaussian draws (``gauss``), or both with the draws' class means
    removed (``classgauss``)."""
    import numpy as np

    rows = []
    if noise in ("class", "classgauss"):
        c = np.zeros((K, K, N))
        for k in range(K):
            c[k, k, :] = np.sqrt(pi[k] / B) / N
        rows.append(c)
    if noise == "gauss":
        rows.append(np.sqrt(w / (B * p_)) * rng.standard_normal((p_, K, N)))
    if noise == "classgauss":   # within-class part: zeta minus its class mean
        z = rng.standard_normal((p_, K, N))
        z -= z.mean(axis=2, keepdims=True)
        rows.append(np.sqrt(w / (B * p_)) * z * np.sqrt(N / (N - 1)))
    return np.concatenate(rows)
