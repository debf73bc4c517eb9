"""Keyword front door to the Sec. 6 system: :func:`solve_snap`."""

from __future__ import annotations

from odeflow.errors import renamed
from odeflow.fields.base import START_PARTS
from odeflow.solver.api import solve


def solve_snap(data=None, *, eta_y: float = 1.0, eta_z: float = 0.1, t_span=(0.0, 1e4),
               a=None, pi=None, vocab_size=None, zc0=None, beta=None, **solve_options):
    """Integrate the Sec. 6 system; ``odeflow.solve(data, flow="snap", ...)`` with keywords.

    Parameters
    ----------
    data : DataModel, optional
        Source of ``a, z_c(0), pi, M`` (see :func:`snap_parameters`); or give
        ``a``, ``pi``, ``vocab_size`` (and ``zc0``) directly.
    eta_y, eta_z : float
    t_span : (float, float)
    **solve_options
        ``t_eval``, ``method``, ``rtol``, ``atol``, ``start`` (``(None, z0)``; the
        old ``z0=`` warns), ``progress`` of :func:`odeflow.solve`.

    Returns
    -------
    SnapResult
    """
    solve_options = renamed(solve_options, START_PARTS)   # warns at our caller
    options = {k: v for k, v in (("a", a), ("pi", pi), ("vocab_size", vocab_size),
                                 ("zc0", zc0), ("beta", beta)) if v is not None}
    return solve(data, flow="snap", eta_y=eta_y, eta_z=eta_z, t_span=t_span,
                 **solve_options, **options)
