"""Closed-form solutions of the reduced (Level R) dynamics.

Vectorised numpy / :mod:`scipy.special` evaluations of the closed forms of
Tian, Wang, Chen and Du, "Scan and Snap" (NeurIPS 2023, arXiv:2305.16380),
as derived and checked with sympy in the top-level ``derivations`` package
(``python -m derivations``):

===========================  ===================================  =====================
function                     quantity                             paper
===========================  ===================================  =====================
:func:`decoder_margin`       logit margin ``h(t)``                Lemma 6, Eqns 44-45
:func:`speed_control`        ``gamma(t)``                         Eqn 9, Theorem 1
:func:`speed_control_early`  ``gamma`` for ``t << t_0``           Lemma 9, Theorem 1(b)
:func:`speed_control_late`   ``gamma`` for ``t >> t_0``           Lemma 9, Theorem 1(b)
:func:`transition_time`      crossover ``t_0`` (``e^h = M - 1``)  Lemma 9, Theorem 1(b)
:func:`gamma_integral`       ``Gamma(t) = int_0^t gamma``         Eqn 128
:func:`relative_gain`        ``r_{l/l'|n}``                       Theorem 3, Eqn 11
:func:`dominant_bounds`      bounds on ``1 + chi_l0``             Eqn 12
:func:`snap_common_logit`    common-token logit ``z_c(t)``        Thm 4, Eqns 13, 124
:func:`snap_B`               ``B_n(t)``                           Thm 4, Eqns 14, 129
===========================  ===================================  =====================

All functions broadcast their arguments, return a numpy float (0-d input) or
array, stay finite for ``t`` up to ``1e12`` and ``M`` up to ``1e6`` (and far
beyond), and are accurate to about ``1e-13`` relative.  Invalid arguments
raise :class:`odeflow.ValidationError` (a :class:`ValueError`) naming the
argument and the offending value.

Their arguments and results are checked by
:mod:`odeflow.analysis.closed_forms_args`; CF1-CF3 are defined in
:mod:`odeflow.analysis.closed_forms_margin`, CF4-CF6 in
:mod:`odeflow.analysis.closed_forms_attention`; this module is their index.
"""

from odeflow.analysis.closed_forms_attention import (
    dominant_bounds,
    relative_gain,
    snap_B,
    snap_common_logit,
)
from odeflow.analysis.closed_forms_margin import (
    decoder_margin,
    gamma_integral,
    speed_control,
    speed_control_early,
    speed_control_late,
    transition_time,
)

__all__ = ["decoder_margin", "speed_control", "speed_control_early", "speed_control_late",
           "transition_time", "gamma_integral", "relative_gain", "dominant_bounds",
           "snap_common_logit", "snap_B"]
