"""Strategies of the two-stage family: :class:`~odeflow.data.two_stage.TwoStageData`
objects (:func:`two_stage_models`); :data:`DATA_MODELS` is the family's hook
(``Family.strategies``)."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from odeflow.data.two_stage import TwoStageData


def _directions(size: int):
    """Nonzero direction vectors of length ``size`` (the data model normalises them)."""
    entries = st.floats(min_value=-2.0, max_value=2.0, allow_nan=False)
    return hnp.arrays(float, size, elements=entries).filter(
        lambda v: float(v @ v) > 1e-3).map(lambda v: tuple(v.tolist()))


@st.composite
def two_stage_models(draw, *, max_block: int = 3, gamma=(0.1, 5.0), max_rho: float = 0.5,
                     q_kinds=("margin", "cluster"), losses=("logistic", "squared")):
    """Valid two-stage data models: block sizes, directions, margins and mixture.

    Parameters
    ----------
    max_block : int, default 3
        Largest ``d_P`` and ``d_Q`` (each drawn in ``1..max_block``).
    gamma : (float, float), default (0.1, 5)
        Range of the margins ``gamma_P``, ``gamma_Q`` (units of the noise's standard
        deviation).
    max_rho : float, default 0.5
        Largest probability ``rho`` of a P-only (and of a Q-only) example.
    q_kinds, losses : sequence of str
        The laws of the Q block and the losses to draw from.

    Returns
    -------
    SearchStrategy[TwoStageData]
        Directions either the default ``(1, ..., 1)/sqrt(d)`` (None) or drawn.
    """
    d_p = draw(st.integers(1, max_block))
    d_q = draw(st.integers(1, max_block))
    margin = st.floats(min_value=gamma[0], max_value=gamma[1], allow_nan=False)
    return TwoStageData(
        d_p=d_p, d_q=d_q,
        w_p=draw(st.none() | _directions(d_p)), w_q=draw(st.none() | _directions(d_q)),
        gamma_p=draw(margin), gamma_q=draw(margin),
        rho=draw(st.floats(min_value=0.0, max_value=max_rho, allow_nan=False)),
        sigma0=draw(st.floats(min_value=1e-3, max_value=0.5, allow_nan=False)),
        loss=draw(st.sampled_from(losses)), q_kind=draw(st.sampled_from(q_kinds)),
        zeta=draw(st.floats(min_value=0.5, max_value=4.0, allow_nan=False)))


#: The family's hook (``Family.data_models``): family name -> strategy factory.
DATA_MODELS = {"two_stage": two_stage_models}
