"""Figures from a sweep store: a heat map over two parameters, or lines over a third.

A variable of the store (:mod:`odeflow.sweeps.outputs`) is reduced to the
parameters drawn: a ``time`` axis is read at the point's own horizon (the
last stored time) unless a time is given; ``seed`` and ``class`` are
averaged (failed points, NaN, are left out of the mean and blank in a heat
map); every other grid parameter must have one value or be selected.
"""

from __future__ import annotations

import numpy as np

from odeflow.errors import ValidationError
from odeflow.plots.style import HEATMAP_CMAP, finish_axes, new_figure, series_colour, single_axes
from odeflow.sweeps.reading import at_end

#: Dims averaged away before drawing.
AVERAGED = ("seed", "class")

#: Axis labels of the sweeps' parameters (any other parameter is shown by its name).
PARAMETER_LABELS = {
    "eta_y": r"$\eta_Y$ (decoder rate)", "eta_z": r"$\eta_Z$ (attention rate)",
    "t_end": "t_end (horizon)", "steps": "training steps", "batch_size": "batch size",
    "seq_len": "T (sequence length)", "momentum": r"momentum $\mu$",
    "rate_c": "rate of c (selector)", "rate_w": "rate of w (copier)",
    "rate_a": "rate of a (classifier)", "sample_size": "sequences in the sample",
    "seed": "sample seed",
    "preset": "data model (preset)", "method": "solve_ivp method",
}

#: Axis labels of the stored variables (any other: its name, and its units if stored).
VARIABLE_LABELS = {
    "entropy": "distinct-token entropy (nats)", "J": "objective J (Eqn 2)",
    "t0": r"$t_0$ (snap time: $e^h = M - 1$)", "B": r"$B_n$ (Eqn 98)",
    "nfev": "right-hand-side evaluations", "wall_time": "wall time (s)",
    "a": "classifier weight a", "population_loss": "loss of the induction-head level",
}


def parameter_label(name: str) -> str:
    """Axis label of a sweep parameter: ``eta_z`` -> ``eta_Z (attention rate)``."""
    return PARAMETER_LABELS.get(name, name)


def variable_label(ds, var: str) -> str:
    """Axis label of a stored variable (:data:`VARIABLE_LABELS`, else name and units)."""
    if var in VARIABLE_LABELS:
        return VARIABLE_LABELS[var]
    units = ds[var].attrs.get("units") if var in ds.data_vars else None
    return f"{var} ({units})" if units else var


def settings_line(ds, shown, select=None, width: int = 46) -> str:
    """The sweep's settings not on an axis: its ``[sweep.settings]`` (task and preset
    first), single-valued and selected parameters, and what is averaged (``mean of 3
    seeds``), wrapped at ``width`` characters."""
    stored = {k.removeprefix("setting_"): v for k, v in ds.attrs.items()
              if k.startswith("setting_")}
    order = [k for k in ("task", "preset") if k in stored] + \
        sorted(k for k in stored if k not in ("task", "preset"))
    parts = [f"{k} = {_setting(stored[k])}" for k in order if k not in shown]
    for dim in ds["computed"].dims:
        if dim in shown:
            continue
        values = np.atleast_1d(ds[dim].values)
        if dim in (select or {}):
            parts.append(f"{dim} = {(select or {})[dim]}")
        elif values.size == 1:
            value = values[0]
            parts.append(f"{dim} = {value:g}" if isinstance(value, (float, np.floating))
                         else f"{dim} = {value}")
        elif dim in AVERAGED:
            parts.append(f"mean of {values.size} {dim}s")
    lines: list[str] = []
    for part in parts:  # whole "name = value" pieces per line
        if lines and len(lines[-1]) + 2 + len(part) <= width:
            lines[-1] += f", {part}"
        else:
            lines.append(part)
    return "\n".join(lines)


def _setting(value) -> str:
    """A stored setting as text: numbers in ``%g`` (``1e+04``, ``0.5``), the rest as is."""
    try:
        return f"{float(value):g}"
    except (TypeError, ValueError):
        return str(value)


def _stored_time(da, time) -> float:
    """``time`` as a float, refused unless finite and within the stored times."""
    times = da["time"].values
    try:
        value = float(time)
    except (TypeError, ValueError):
        value = float("nan")
    if not (np.isfinite(value) and times.min() <= value <= times.max()):
        raise ValidationError("time", f"must be a finite time within the stored "
                              f"[{times.min():g}, {times.max():g}], got {time!r}")
    return value


def sweep_values(ds, var: str, axes_dims: tuple, time=None, select=None):
    """``ds[var]`` reduced to the dims ``axes_dims`` (see the module notes)."""
    if var not in ds.data_vars:
        raise ValidationError("var", f"no variable {var!r} in the store; it has "
                              f"{sorted(ds.data_vars)}")
    da = ds[var]
    if da.dtype.kind not in "fiu":
        raise ValidationError("var", f"{var!r} is not numeric")
    for key, value in (select or {}).items():
        if key not in da.dims:
            raise ValidationError("select", f"{key!r} is not a dim of {var!r} {da.dims}")
        da = da.sel({key: _coord_value(da, key, value)})
    if "time" in da.dims:
        da = da.sel(time=_stored_time(da, time), method="nearest") if time is not None \
            else at_end(da)
    da = da.where(da != -1) if da.dtype.kind in "iu" else da
    for dim in AVERAGED:
        if dim in da.dims and dim not in axes_dims:
            da = da.mean(dim, skipna=True)
    left = [d for d in da.dims if d not in axes_dims]
    if any(da.sizes[d] > 1 for d in left):
        many = [d for d in left if da.sizes[d] > 1]
        raise ValidationError("select", f"{many} have several values; draw them (x, y, hue) "
                              "or select one, e.g. --select " + f"{many[0]}=VALUE")
    da = da.squeeze(left, drop=True) if left else da
    for d in axes_dims:
        if d not in da.dims:
            raise ValidationError(d, f"{d!r} is not a dim of {var!r} here; dims: "
                                  f"{list(ds[var].dims)}")
    return da.transpose(*axes_dims)


def _coord_value(da, key, value):
    coord = da[key].values
    if coord.dtype.kind in "fiu":
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise ValidationError("select", f"{key}={value!r} is not a number") from None
        near = coord[np.argmin(np.abs(coord - value))]
        if not np.isclose(near, value, rtol=1e-9, atol=0):
            raise ValidationError("select", f"{key}={value!r} is not in {coord.tolist()}")
        return near
    if value not in coord:
        raise ValidationError("select", f"{key}={value!r} is not in {coord.tolist()}")
    return value


def _log_axis(values) -> bool:
    """Log scale for three or more positive numbers that span at least 20x or step by a
    constant factor (0.25, 1, 4), not by a constant difference."""
    v = np.sort(np.asarray(values, dtype=float))
    if v.size < 3 or not np.all(v > 0):
        return False
    steps, factors = np.diff(v), np.diff(np.log(v))
    geometric = (np.allclose(factors, factors[0], rtol=1e-6)
                 and not np.allclose(steps, steps[0], rtol=1e-6))
    return bool(v[-1] / v[0] >= 20 or geometric)


def default_variable(ds) -> str:
    """The variable ``plot sweep`` draws without ``--var``: ``entropy`` if the store has
    it (the Scan and Snap tasks), else the alphabetically first output that is a plain
    time series per point (``a`` for ``induction_flow``), else the first output that
    is not bookkeeping."""
    from odeflow.sweeps.outputs import BOOKKEEPING

    names = sorted(str(n) for n in ds.data_vars if n not in BOOKKEEPING)
    if "entropy" in names or not names:
        return "entropy"
    grid = set(ds["computed"].dims) if "computed" in ds else set()
    series = [n for n in names if tuple(d for d in ds[n].dims if d not in grid) == ("time",)]
    return (series or names)[0]


def plot_sweep(source, var: str | None = None, x: str | None = None, y: str | None = None,
               hue: str | None = None, time=None, select=None, ax=None):
    """Draw ``var`` from a sweep store: a heat map over ``(x, y)`` or lines over ``x``.

    Parameters
    ----------
    source : xarray.Dataset or path
        A sweep's dataset or store (:func:`odeflow.sweeps.open_store`).
    var : str, optional
        A data variable (``entropy``, ``J``, ``t0``, ``B``, ``nfev``, ``a``,
        ``population_loss``, ...); default :func:`default_variable`.
    x, y : str, optional
        Parameters on the axes; ``y`` makes a heat map. Default: the first
        (and, without ``hue``, second) grid parameter.
    hue : str, optional
        A third parameter: one line per value (without ``y``), or one heat
        map panel per value (with ``y``).
    time : float, optional
        Read time-dependent variables here (nearest stored time); default:
        each point's last stored time.
    select : dict, optional
        Fixed values of the other parameters, ``{"seed": 0, "t_end": 1e4}``.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from odeflow.sweeps import open_store

    ds = source if hasattr(source, "data_vars") else open_store(source)
    var = default_variable(ds) if var is None else var
    x, y = _axes_parameters(ds, x, y, hue)
    dims = tuple(d for d in (y, x, hue) if d is not None)
    if len(set(dims)) != len(dims):
        raise ValidationError("x", f"x, y and hue must differ, got {dims}")
    da = sweep_values(ds, var, dims, time=time, select=select)
    failed = int(np.count_nonzero(ds["error"].values.astype(str) != ""))
    when = "" if "time" not in ds[var].dims else (
        " (last stored time)" if time is None else f" at t = {float(time):g}")
    title = f"{var}{when}" + (f"; {failed} failed points blank" if failed else "")
    settings = settings_line(ds, dims, select)
    title += f"\n{settings}" if settings else ""
    if y is not None:
        return _heat_maps(da, x, y, hue, title, variable_label(ds, var), ax)
    return _lines(da, x, hue, title, variable_label(ds, var), ax)


def _axes_parameters(ds, x, y, hue) -> tuple:
    """``(x, y)`` of :func:`plot_sweep`: the first grid parameters with several values by
    default (``y`` only without ``hue`` and with the default ``x``)."""
    grid = [d for d in ds["computed"].dims if d not in AVERAGED and ds.sizes[d] > 1]
    if x is None:
        if not grid:
            raise ValidationError("x", "the sweep has no parameter with several values")
        x = grid[0]
    if y is None and hue is None and len(grid) > 1 and x == grid[0]:
        y = grid[1]
    return x, y


def _heat_maps(da, x: str, y: str, hue, title: str, label: str, ax):
    """One heat map of ``da`` over ``(x, y)`` per value of ``hue``, one shared colour scale."""
    panels = [None] if hue is None else list(da[hue].values)
    fig, axes = (ax.figure, [ax]) if ax is not None else new_figure(ncols=len(panels))
    if len(axes) < len(panels):
        raise ValidationError("hue", "one Axes given for several panels")
    finite = da.values[np.isfinite(da.values)]
    vmin, vmax = (finite.min(), finite.max()) if finite.size else (0.0, 1.0)
    for a, value in zip(axes, panels, strict=False):
        part = da if value is None else da.sel({hue: value})
        mesh = a.pcolormesh(_edges(da[x].values), _edges(da[y].values),
                            np.ma.masked_invalid(part.values), cmap=HEATMAP_CMAP,
                            vmin=vmin, vmax=vmax, shading="flat")
        _scale(a, da, x, y)
        finish_axes(a, parameter_label(x), parameter_label(y),
                    title if value is None else f"{title}\n{hue} = {value}", legend=False)
    fig.colorbar(mesh, ax=axes, label=label)
    return fig


def _lines(da, x: str, hue, title: str, label: str, ax):
    """``da`` over ``x``, one line per value of ``hue``."""
    fig, a = single_axes(ax)
    for i, value in enumerate([None] if hue is None else list(da[hue].values)):
        part = da if value is None else da.sel({hue: value})
        a.plot(_positions(da[x].values), part.values, marker="o", color=series_colour(i),
               label=None if value is None else f"{value:g}" if isinstance(
                   value, (float, np.floating)) else str(value))
    _scale(a, da, x, None)
    finish_axes(a, parameter_label(x), label, title,
                **({} if hue is None else {"loc": "upper left", "bbox_to_anchor": (1.02, 1.0)}))
    if hue is not None and a.get_legend() is not None:
        a.get_legend().set_title(parameter_label(hue), prop={"size": "small"})
    return fig

def _positions(values) -> np.ndarray:
    v = np.asarray(values)
    return v.astype(float) if v.dtype.kind in "fiu" else np.arange(v.size, dtype=float)


def _edges(values) -> np.ndarray:
    """Cell edges around sorted centres (geometric midpoints on a log-spaced axis)."""
    v = np.asarray(values)
    if v.dtype.kind not in "fiu" or v.size < 2:
        return np.arange(v.size + 1) - 0.5
    v = v.astype(float)
    if _log_axis(v):
        mids = np.sqrt(v[1:] * v[:-1])
        return np.concatenate([[v[0] ** 2 / mids[0]], mids, [v[-1] ** 2 / mids[-1]]])
    mids = (v[1:] + v[:-1]) / 2
    return np.concatenate([[2 * v[0] - mids[0]], mids, [2 * v[-1] - mids[-1]]])


#: A numeric axis with at most this many swept values is ticked at exactly those values.
MAX_VALUE_TICKS = 8


def _scale(a, da, x, y) -> None:
    """Log scale for log-spaced numbers; named ticks for text (task, preset); ticks at the
    swept values themselves when there are at most :data:`MAX_VALUE_TICKS`."""
    from matplotlib.ticker import NullLocator

    for name, axis in ((x, a.xaxis), (y, a.yaxis)):
        if name is None:
            continue
        values = np.asarray(da[name].values)
        if values.dtype.kind not in "fiu":
            axis.set_ticks(np.arange(values.size), [str(v) for v in values])
            continue
        if _log_axis(values):
            (a.set_xscale if axis is a.xaxis else a.set_yscale)("log")
        if values.size <= MAX_VALUE_TICKS:
            axis.set_ticks(values.astype(float), [f"{v:g}" for v in values])
            axis.set_minor_locator(NullLocator())
