"""Helpers shared by the sweep tests: compare two sweep datasets number for number."""

from __future__ import annotations

import numpy as np

from odeflow.sweep.outputs import VARYING


def assert_same_numbers(a, b, skip=VARYING):
    """Every data variable of ``a`` and ``b`` equal bit for bit (NaN where the other has NaN;
    strings as ``str``), except ``skip`` (default: the timings, which differ run to run),
    and the same coordinates."""
    assert set(a.data_vars) == set(b.data_vars)
    for name in a.data_vars:
        if name in skip:
            continue
        x, y = a[name].values, b[name].values
        if x.dtype.kind == "f":
            assert np.array_equal(x, y, equal_nan=True), name
        else:
            assert np.array_equal(x.astype(str) if x.dtype.kind in "OU" else x,
                                  y.astype(str) if y.dtype.kind in "OU" else y), name
    for name in a.coords:
        assert np.array_equal(a[name].values, b[name].values), name
