"""The ``odeflow-trajectory/1`` file layout of a Scan and Snap trajectory.

An ``.npz`` archive (:mod:`odeflow.results.files`) of float64 arrays and one
JSON ``metadata`` record (``format``, ``data``: the data model's dict,
``decoder_layout``, ``stats``, ``meta``):

- ``t`` (n,) and ``z_base`` (q, M), always;
- the logits, either dense ``z_active`` (n, q, L) or compact ``z_by_logit``
  (P, n) with the integer ``logit_query``, ``logit_token`` (P,) of each row;
- optionally ``decoder_lumped`` (n, R, L) and ``decoder_base`` (M, M);
- one ``series__<name>`` array per recorded series, time on its first axis.

Files of this format written by earlier versions load unchanged
(``tests/test_result_kinds.py`` writes one by hand).
"""

from __future__ import annotations

import numpy as np

from odeflow.data import DataModel
from odeflow.errors import ValidationError
from odeflow.results.decoder import DECODER_LAYOUTS
from odeflow.results.files import (
    SERIES_PREFIX,
    read_result_file,
    series_arrays,
    stored_data_model,
    stored_series,
    write_result_file,
)

#: Format tag written into saved files.
FILE_FORMAT = "odeflow-trajectory/1"


def write_trajectory(path, traj, field: str = "path"):
    """Write ``traj`` to ``path`` in this layout (:func:`.files.write_result_file`; the
    provenance's seeds are the meta entries named ``*seed*``)."""
    arrays = {"t": traj.t, "z_base": traj.z_base}
    if traj._z_dense is not None:
        arrays["z_active"] = traj._z_dense
    else:
        arrays.update({"z_by_logit": traj._z_by_logit, "logit_query": traj.logit_query,
                       "logit_token": traj.logit_token})
    if traj.decoder_lumped is not None:
        arrays["decoder_lumped"] = traj.decoder_lumped
    arrays.update(series_arrays(traj.series))
    if traj.decoder_base is not None:
        arrays["decoder_base"] = traj.decoder_base
    return write_result_file(path, FILE_FORMAT, traj, arrays, traj.data.to_dict(), field,
                             {k: v for k, v in traj.meta.items() if "seed" in k},
                             decoder_layout=traj.decoder_layout)


def read_trajectory(path) -> tuple[tuple, dict]:
    """Positional and keyword arguments of :class:`~odeflow.results.Trajectory` for a file.

    Returns
    -------
    (args, kwargs)
        ``args = (data, t, z, z_base)``; ``kwargs`` the decoder, series, stats,
        meta and (compact logits) ``logit_index``.

    Raises
    ------
    ValidationError
        (field ``path``) for anything that is not an intact odeflow trajectory.
    """
    arrays, metadata = read_result_file(path, FILE_FORMAT)
    where = f"{str(path)!r}"
    data = stored_data_model(DataModel, metadata["data"], where)
    layout = metadata.get("decoder_layout", "lumped")
    if layout not in DECODER_LAYOUTS:
        raise ValidationError("path", f"{where}: the metadata record is damaged "
                              f"(decoder_layout {layout!r:.40})")
    series = check_trajectory_arrays(arrays, data, layout, where)
    if "z_active" in arrays:
        z, index = arrays["z_active"], None
    else:
        z, index = arrays["z_by_logit"].T, (arrays["logit_query"], arrays["logit_token"])
    kwargs = {"decoder_lumped": arrays.get("decoder_lumped"), "logit_index": index,
              "series": series, "stats": metadata["stats"], "meta": metadata["meta"],
              "decoder_layout": layout, "decoder_base": arrays.get("decoder_base")}
    return (data, arrays["t"], z, arrays["z_base"]), kwargs


def expected_shapes(arrays: dict, data: DataModel, layout: str) -> dict:
    """The shape each array of a trajectory file must have, given its data model.

    ``n`` (times) is read from ``t`` and ``P`` (carried logits) from
    ``logit_query``; -1 stands for either when that array is not 1-d.
    """
    t = arrays["t"]
    n = t.shape[0] if t.ndim == 1 else -1
    q, L, M = data.query_tokens.size, data.active_tokens.size, data.vocab_size
    R = M if layout == "full" else np.asarray(data.output_multiplicity).size
    expected = {"t": (n,), "z_base": (q, M)}
    if "z_active" in arrays:
        expected["z_active"] = (n, q, L)
    else:
        P = arrays["logit_query"].shape[0] if arrays["logit_query"].ndim == 1 else -1
        expected.update({"z_by_logit": (P, n), "logit_query": (P,), "logit_token": (P,)})
    if "decoder_lumped" in arrays:
        expected["decoder_lumped"] = (n, R, L)
    if "decoder_base" in arrays:
        expected["decoder_base"] = (M, M)
    return expected


def check_trajectory_arrays(arrays: dict, data: DataModel, layout: str, where: str) -> dict:
    """Names, types, shapes and index ranges of a trajectory file's arrays; returns the
    series it holds (:func:`~odeflow.results.files.stored_series`).

    Raises ValidationError (field ``path``, message starting with ``where``).
    """
    if "z_active" not in arrays:
        for name in ("z_by_logit", "logit_query", "logit_token"):
            if name not in arrays:
                raise ValidationError("path", f"{where}: array {name!r} is missing (and no "
                                      "'z_active')")
    expected = expected_shapes(arrays, data, layout)
    n = expected["t"][0]
    series = stored_series(arrays, n, where)
    for name in arrays:
        if not name.startswith(SERIES_PREFIX) and name not in expected:
            raise ValidationError("path", f"{where}: unexpected array {name!r}; not an "
                                  "odeflow trajectory")
    for name, shape in expected.items():
        if name not in ("logit_query", "logit_token") and arrays[name].dtype != np.float64:
            raise ValidationError("path", f"{where}: array {name!r} has type "
                                  f"{arrays[name].dtype}; odeflow writes float64")
        if arrays[name].shape != shape:
            raise ValidationError("path", f"{where}: array {name!r} has shape "
                                  f"{arrays[name].shape}, inconsistent with the stored data "
                                  f"model (expected {shape})")
    if n < 1 or np.any(np.diff(arrays["t"]) <= 0):
        raise ValidationError("path", f"{where}: the times 't' are empty, repeated or not "
                              "increasing")
    if "logit_query" in expected:
        rows, tokens = arrays["logit_query"], arrays["logit_token"]
        if rows.dtype.kind not in "iu" or tokens.dtype.kind not in "iu" \
                or np.any((rows < 0) | (rows >= data.query_tokens.size)) \
                or not np.all(np.isin(tokens, data.active_tokens)):
            raise ValidationError("path", f"{where}: 'logit_query'/'logit_token' do not index "
                                  "query tokens and active tokens of the stored data model")
    return series
