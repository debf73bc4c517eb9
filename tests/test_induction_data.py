"""InductionData (spec section 10): validation, TOML, presets, Markov laws vs enumeration."""

import itertools

import numpy as np
import pytest

import odeflow
from odeflow.data.induction import (
    MAX_KERNELS,
    POINT_KERNEL,
    InductionData,
    markov,
    subsets,
)
from odeflow.errors import ValidationError


def test_subsets_follow_the_contract():
    assert subsets(3, 2) == [(), (1,), (2,), (3,), (1, 2), (1, 3), (2, 3)]
    assert subsets(2, 2) == [(), (1,), (2,), (1, 2)]
    assert InductionData.preset("ih-paper").num_parameters == 17


def test_flat_exports():
    assert odeflow.InductionData is InductionData
    assert "InductionData" in odeflow.__all__
    assert odeflow.data.InductionData is InductionData


@pytest.mark.parametrize("kwargs, field", [
    ({"kernel": [[0.5, 0.5]] * 3 + [[-0.1, 1.1]]}, "kernel[3]"),       # negative
    ({"kernel": [[0.5, 0.5]] * 3 + [[0.5, 0.5 + 1e-8]]}, "kernel[3]"), # row sum off 1
    ({"kernel": [[0.5, 0.5]] * 3}, "kernel"),                          # wrong shape
    ({"kernel": [[0.5, 0.5]] * 3 + [[np.nan, 1.0]]}, "kernel[3]"),     # not finite
    ({"kernel": [["a", "b"]] * 4}, "kernel"),                          # not numbers
    ({"degree": 3}, "degree"),                                         # D > H
    ({"n_gram": 1}, "n_gram"),
    ({"vocab_size": 1}, "vocab_size"),
    ({"heads": 0}, "heads"),
    ({"prior": "dirichlet", "alpha": 0.0}, "alpha"),
    ({"prior": "dirichlet", "alpha": -1.0}, "alpha"),
    ({"prior": "dirichlet", "num_kernels": 0}, "num_kernels"),
    ({"prior": "dirichlet", "num_kernels": MAX_KERNELS + 1}, "num_kernels"),
    ({"prior": "dirichlet", "seed": -1}, "seed"),
    ({"prior": "gauss"}, "prior"),
    ({"w_plus": np.inf}, "w_plus"),
    ({"w_minus": np.nan}, "w_minus"),
    ({"a0": float("inf")}, "a0"),
    ({"c0": 0.0}, "c0"),
    ({"heads": 7, "degree": 2}, "heads"),                               # 2**13 windows
])
def test_bad_input_names_the_field(kwargs, field):
    args = {"vocab_size": 2, "n_gram": 3, "heads": 2, "degree": 2, "prior": "point",
            "kernel": POINT_KERNEL}
    args.update(kwargs)
    if args["prior"] == "dirichlet":
        args.pop("kernel")
    with pytest.raises(ValidationError) as info:
        InductionData(args.pop("vocab_size"), args.pop("n_gram"), args.pop("heads"),
                      args.pop("degree"), **args)
    assert info.value.field == field


def test_too_many_window_law_entries_are_refused():
    with pytest.raises(ValidationError) as info:
        InductionData(3, 3, 3, 2, num_kernels=30_000)     # 30000 * 3**5 * 3 entries
    assert info.value.field == "num_kernels"


def test_split_chain_has_no_stationary_law():
    # contexts 00 and 11 absorb: two stationary laws
    kernel = [[1.0, 0.0], [0.5, 0.5], [0.5, 0.5], [0.0, 1.0]]
    data = InductionData(2, 3, 2, 2, kernel)            # a kernel array is a point mass
    with pytest.raises(ValidationError, match="stationary") as info:
        data.window_laws()
    assert info.value.field == "kernel"


def test_toml_round_trip(tmp_path):
    for data in (InductionData.preset("ih-paper"), InductionData.preset("ih-point"),
                 InductionData(3, 2, 2, 1, alpha=0.5, num_kernels=5, seed=7, w_plus=2.0)):
        path = tmp_path / "m.toml"
        data.to_toml(path)
        back = InductionData.from_toml(path)
        assert back == data
        np.testing.assert_array_equal(back.kernels, data.kernels)


@pytest.mark.parametrize("text, field", [
    ('vocab_size = 2\nn_gram = 2\nheads = 1\ndegree = 1\nalhpa = 0.3\n', "alhpa"),
    ('vocab_size = 2\nn_gram = 2\nheads = 1\ndegree = 1\n[prior]\nalpha = -1\n', "prior.alpha"),
    ('vocab_size = 2\nn_gram = 2\nheads = 1\ndegree = 1\n[init]\nc0 = 0\n', "init.c0"),
    ('vocab_size = 2\nn_gram = 2\nheads = 1\n', "degree"),
    ('vocab_size = 2\nn_gram = 2\nheads = 1\ndegree = 1\n[prior]\nkind = "point"\n'
     'kernel = [[0.5, 0.6], [0.5, 0.5]]\n', "prior.kernel[0]"),
])
def test_toml_errors_name_the_field(text, field):
    with pytest.raises(ValidationError) as info:
        InductionData.from_toml_string(text)
    assert info.value.field == field


def test_presets():
    paper = InductionData.preset("ih-paper")
    assert (paper.vocab_size, paper.n_gram, paper.heads, paper.degree) == (3, 3, 3, 2)
    assert paper.prior == "dirichlet" and paper.alpha == 0.1
    assert (paper.w_plus, paper.w_minus, paper.c0, paper.a0) == (3.0, 0.1, 0.01, 0.01)
    assert paper.kernels.shape == (paper.num_kernels, 9, 3)
    np.testing.assert_allclose(paper.kernels.sum(-1), 1.0, atol=1e-12)
    # seeded: the same sample twice, another seed another sample; the stream is documented
    np.testing.assert_array_equal(paper.kernels, InductionData.preset("ih-paper").kernels)
    np.testing.assert_array_equal(
        paper.kernels[:3],
        np.random.default_rng(paper.seed).dirichlet([0.1] * 3, size=(3, 9)))
    other = InductionData(3, 3, 3, 2, alpha=0.1, seed=1)
    assert not np.allclose(other.kernels, paper.kernels)
    pt = InductionData.preset("ih-point")
    assert pt.prior == "point" and pt.kernels.shape == (1, 4, 2)
    assert pt.subsets == [(), (1,), (2,), (1, 2)]
    np.testing.assert_array_equal(pt.initial_copier_logits, [[3.0, 0.1], [3.0, 0.1]])
    with pytest.raises(ValidationError) as info:
        InductionData.preset("ih-nope")
    assert info.value.field == "preset"


def brute_force_window_law(kernel, n, m, burn=2000):
    """P(x_{l-1..l-m}, x_l) by enumerating every path of the chain from a uniform start,
    after ``burn`` steps of the exact context distribution (independent of markov.py)."""
    d = kernel.shape[1]
    ctx = {c: 1.0 / d ** (n - 1) for c in itertools.product(range(d), repeat=n - 1)}
    for _ in range(burn):
        new = dict.fromkeys(ctx, 0.0)
        for c, p in ctx.items():        # c = (x_{-1}, ..., x_{-(n-1)})
            r = sum(x * d ** (n - 2 - i) for i, x in enumerate(c))
            for e in range(d):
                new[(e,) + c[:-1]] += p * kernel[r, e]
        ctx = new
    law = np.zeros((d,) * m + (d,))
    steps = max(m + 1 - (n - 1), 0)
    for c, p in ctx.items():
        for tail in itertools.product(range(d), repeat=steps):
            seq = list(reversed(c))     # oldest first
            prob = p
            for e in tail:
                recent = seq[-(n - 1):][::-1]
                r = sum(x * d ** (n - 2 - i) for i, x in enumerate(recent))
                prob *= kernel[r, e]
                seq.append(e)
            window = seq[-(m + 1):]     # oldest .. newest; newest is e
            idx = tuple(window[-2::-1]) + (window[-1],)
            law[idx] += prob
    return law


@pytest.mark.parametrize("window", [1, 3, 4])
def test_point_mass_window_law_equals_enumeration(window):
    data = InductionData.preset("ih-point")
    exact = brute_force_window_law(data.kernels[0], 3, window)
    joint = data.window_joint(window)
    np.testing.assert_allclose(joint[0], exact.reshape(-1, 2), atol=1e-12)
    np.testing.assert_allclose(markov.window_law(joint)[0], exact.sum(-1).ravel(), atol=1e-12)
    # pi_S and mu(z_S) of S = {2} and S = {1, 3} (when in the window)
    for S in [(2,), (1, 3), ()]:
        if S and max(S) > window:
            continue
        drop = tuple(m - 1 for m in range(1, window + 1) if m not in S)
        sub = exact.sum(axis=drop).reshape(-1, 2)
        np.testing.assert_allclose(markov.subset_marginal(joint, S)[0], sub.sum(-1), atol=1e-12)
        np.testing.assert_allclose(markov.subset_conditional(joint, S)[0],
                                   sub / sub.sum(-1, keepdims=True), atol=1e-12)


def test_stationary_law_is_stationary_for_a_dirichlet_sample():
    data = InductionData(3, 3, 3, 2, alpha=0.1, num_kernels=4, seed=3)
    laws = data.window_laws()
    assert laws.shape == (4, 243, 3)
    np.testing.assert_allclose(laws.sum(axis=(1, 2)), 1.0, atol=1e-12)
    # shifting the window by one token keeps the law: offsets 1..4 with e equal
    # offsets 2..5 with offset 1 as the next token
    for law in laws:
        j = law.reshape((3,) * 6)
        newer = j.sum(axis=4)
        older = np.moveaxis(j.sum(axis=5), 0, -1)
        np.testing.assert_allclose(newer, older, atol=1e-13)
    # the next-token conditional on a full parent window is the kernel row
    pi = markov.next_token_conditional(laws)
    tokens = markov.window_tokens(3, 5)
    rows = tokens[:, 0] * 3 + tokens[:, 1]
    np.testing.assert_allclose(pi, data.kernels[:, rows, :], atol=1e-9)
