"""Hypothesis fuzzers of odeflow's own front ends: closed forms, result files, the CLI.

Arguments of every kind for the closed forms (:func:`closed_form_calls`),
damaged file bytes (:func:`corrupted_bytes`) and result arrays
(:func:`tampered_result_arrays`), argument vectors a careless or hostile user
types (:func:`cli_argv`) and small sweep configs, valid or broken
(:func:`sweep_config_texts`). They serve ``tests/properties``; nothing is built
at import (the CLI parser is read on first use, :func:`cli_verbs`).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from hypothesis import strategies as st

from odeflow.testing import data_models

#: Floats a careless or hostile user passes: extremes, subnormals, non-finite.
_EXTREME_FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 5e-324, 1e-308, 1e-200, 1e-12, 1.0, 2.0, 1e12, 1e200, 1e299,
                     1.7976931348623157e308, -1.0, math.inf, -math.inf, math.nan]),
    st.floats(-1e3, 1e3))

#: Arity of every public closed form (``odeflow.analysis.closed_forms``).
CLOSED_FORM_ARITY = {"decoder_margin": 4, "speed_control": 4, "speed_control_early": 4,
                     "speed_control_late": 4, "transition_time": 3, "gamma_integral": 4,
                     "relative_gain": 3, "dominant_bounds": 2, "snap_common_logit": 7,
                     "snap_B": 7}


def _closed_form_argument():
    scalar = st.one_of(_EXTREME_FLOATS, st.integers(-10, 10**6), st.booleans(),
                       st.sampled_from(["1", None, 1j]))
    arrays = st.lists(_EXTREME_FLOATS, min_size=0, max_size=3)
    ragged = st.just([1.0, [2.0, 3.0]])
    return st.one_of(_EXTREME_FLOATS, _EXTREME_FLOATS, _EXTREME_FLOATS, scalar, arrays, ragged)


@st.composite
def closed_form_calls(draw):
    """``(name, args)``: a closed form and arguments of every kind (extreme, wrong, ragged).

    Each argument is mostly an extreme float (subnormal, huge, non-finite,
    zero) and sometimes an integer, a bool, text, ``None``, a complex number,
    a short list or a ragged nested list.
    """
    name = draw(st.sampled_from(sorted(CLOSED_FORM_ARITY)))
    args = tuple(draw(_closed_form_argument()) for _ in range(CLOSED_FORM_ARITY[name]))
    return name, args


@st.composite
def corrupted_bytes(draw, original: bytes):
    """A damaged copy of a file's bytes: truncated, bytes flipped or overwritten, junk inserted,
    emptied, or replaced by unrelated content (text, a pickle-like header)."""
    data = bytearray(original)
    kind = draw(st.sampled_from(["truncate", "flip", "overwrite", "insert", "empty",
                                 "unrelated"]))
    if kind == "truncate":
        return bytes(data[:draw(st.integers(0, max(len(data) - 1, 0)))])
    if kind == "flip":
        for _ in range(draw(st.integers(1, 8))):
            i = draw(st.integers(0, len(data) - 1))
            data[i] ^= draw(st.integers(1, 255))
        return bytes(data)
    if kind == "overwrite":
        i = draw(st.integers(0, len(data) - 1))
        junk = draw(st.binary(min_size=1, max_size=64))
        data[i:i + len(junk)] = junk
        return bytes(data)
    if kind == "insert":
        i = draw(st.integers(0, len(data)))
        return bytes(data[:i] + draw(st.binary(min_size=1, max_size=64)) + data[i:])
    if kind == "empty":
        return b""
    return draw(st.one_of(st.binary(max_size=256), st.just(b"\x80\x04\x95junk."),
                          st.text(max_size=64).map(str.encode)))


@st.composite
def tampered_result_arrays(draw, arrays: dict, metadata: dict):
    """One structural fault in the arrays or the JSON metadata of a result file.

    Parameters
    ----------
    arrays : dict of str -> ndarray
        The arrays of an intact file (without ``metadata``).
    metadata : dict
        Its metadata record.

    Returns
    -------
    SearchStrategy[dict]
        Arrays to write with ``np.savez`` (``metadata`` as a 0-d text array),
        with one of: an array dropped, added, reshaped, retyped (text, bool,
        complex) or holding a NaN / inf; the metadata not JSON, not an object,
        a key dropped or retyped, an unknown format version, or a data model
        with a changed vocabulary or class.
    """
    import copy
    import json

    out = {k: np.array(v) for k, v in arrays.items()}
    meta = copy.deepcopy(metadata)
    text = None
    names = sorted(out)
    kind = draw(st.sampled_from(["drop", "add", "reshape", "retype", "nonfinite", "json",
                                 "not-object", "drop-key", "retype-key", "version", "vocab",
                                 "class"]))
    name = draw(st.sampled_from(names))
    if kind == "drop":
        del out[name]
    elif kind == "add":
        out[draw(st.sampled_from(["extra", "series__extra", "decoder_lumped"]))] = \
            np.zeros(draw(st.sampled_from([(), (1,), (3, 2), (0,)])))
    elif kind == "reshape":
        value = out[name].ravel()
        shapes = [(value.size,), (1, value.size), (), (0,), (value.size + 1,)]
        shape = draw(st.sampled_from(shapes))
        out[name] = np.resize(value, shape) if shape else np.array(value[:1].sum())
    elif kind == "retype":
        out[name] = draw(st.sampled_from([out[name].astype(str), out[name].astype(bool),
                                          out[name].astype(complex)]))
    elif kind == "nonfinite":
        value = out[name].astype(float)
        if value.size:
            value.flat[draw(st.integers(0, value.size - 1))] = draw(
                st.sampled_from([np.nan, np.inf, -np.inf]))
        out[name] = value
    elif kind == "json":
        text = draw(st.sampled_from(["", "{", "not json", "[1, 2", '{"format": }']))
    elif kind == "not-object":
        text = json.dumps(draw(st.sampled_from([[], 1, "odeflow", None])))
    elif kind == "drop-key":
        meta.pop(draw(st.sampled_from(sorted(meta))), None)
    elif kind == "retype-key":
        meta[draw(st.sampled_from(sorted(meta)))] = draw(st.sampled_from([None, 1, "x", []]))
    elif kind == "version":
        meta["format"] = draw(st.sampled_from(["odeflow-trajectory/2", "odeflow-snap/1", "", 7,
                                               "odeflow-trajectory/0"]))
    elif kind == "vocab":
        meta["data"]["vocab_size"] = draw(st.sampled_from([meta["data"]["vocab_size"] + 1,
                                                           1, 0, -3, "30", 10**30]))
    else:
        classes = meta["data"]["classes"]
        if len(classes) > 1 and draw(st.booleans()):
            classes.pop()
        else:
            classes[0]["query_token"] = int(classes[0]["query_token"]) + 1
    out["metadata"] = np.array(json.dumps(meta) if text is None else text)
    return out


@functools.cache
def _verb_parsers() -> dict:
    """The sub-parser of each verb of :func:`odeflow.cli.build_parser`, by verb (built once,
    on first use)."""
    import argparse

    from odeflow.cli import build_parser

    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}  # pragma: no cover (the parser always has subcommands)


def cli_verbs() -> tuple[str, ...]:
    """The verbs the ``odeflow`` parser really has (from :func:`odeflow.cli.build_parser`).

    The CLI fuzzers cover every one of them: a new command module is picked up
    here, and ``test_every_verb_has_a_fuzzer`` then asks for its fuzzer and its
    entry in :data:`CLI_FLAGS`.
    """
    return tuple(_verb_parsers())


def cli_flags(verb: str) -> set[str]:
    """The option strings the parser of ``odeflow VERB`` accepts."""
    return {o for a in _verb_parsers()[verb]._actions for o in a.option_strings}


#: The flags :func:`cli_argv` draws from, per verb (each must exist in the verb's
#: parser: see :func:`cli_flags`).
CLI_FLAGS = {
    "run": ["--t-end", "--eta-y", "--eta-z", "--rtol", "--atol", "--rows", "--flow",
            "--method", "--preset", "--config", "--out"],
    "compare-levels": ["--t-end", "--eta-y", "--eta-z", "--ratios", "--rtol", "--atol",
                       "--preset", "--config"],
    "compare": ["--steps", "--t-end", "--eta-y", "--eta-z", "--seeds", "--batch-size",
                "--seq-len", "--dt", "--run", "--record-every", "--momentum", "--rows",
                "--preset", "--config"],
    "plot": ["--t-end", "--eta-y", "--eta-z", "--dpi", "--flow", "--preset", "--config",
             "--out", "--format"],
    "verify": ["--rtol", "--atol", "--method", "--tolerance", "--t-max", "--seed",
               "--only"],
    # the fuzzers keep --backend serial (no process pool, no dask cluster)
    "sweep": ["--backend", "--scheduler", "--workers", "--batch", "--out", "--resume",
              "--retry-failed", "--rows", "--no-progress"],
    "reproduce": ["--seeds", "--steps", "--out", "--same-start", "--no-progress"],
    "derive": ["--list", "--detail"],
}

#: Flags without a value.
_SWITCHES = ("--resume", "--retry-failed", "--no-progress", "--same-start", "--list",
             "--detail")


def _cli_number():
    return st.one_of(
        st.sampled_from(["0", "-1", "1e-3", "0.5", "1", "10", "1e12", "1e300", "5e-324",
                         "inf", "-inf", "nan", "1e999", "abc", "", "99999999999999999999"]),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        st.integers(-10**25, 10**25).map(str))


@st.composite
def cli_argv(draw, verb: str, files: dict | None = None):
    """An argument vector for ``odeflow VERB ...`` as a careless or hostile user types it.

    Flags of the verb with values drawn from extreme numbers (``0``, ``inf``,
    ``nan``, ``1e999``, 20-digit integers, subnormals), text and odd lists
    (``0.1,,0.2``); ``files`` maps names to paths the fuzzer prepared (e.g.
    ``{"config": [...], "out": [...]}``: broken configs, directories, ``/``).
    Costly inputs are bounded: ``--t-end`` is at most 10 unless drawn from the
    extreme list; ``reproduce`` draws ``--steps``/``--seeds`` of 1 or 2 or past
    the command's limits. ``sweep`` takes its config from ``files["config"]``
    (see :func:`sweep_config_texts`) and keeps the backend ``serial``;
    ``derive`` always names one cheap derivation (or a wrong name).
    """
    files = files or {}
    argv = [verb]
    flags = CLI_FLAGS[verb]
    if verb == "plot":
        argv.append(draw(st.sampled_from(["margin", "entropy", "scan-snap", "levels",
                                          "relative-gain", "attention-map", "all", "nope"])))
    elif verb == "sweep":
        argv.append(draw(st.sampled_from(list(files.get("config") or ["sweep.toml"]))))
    elif verb == "reproduce":
        argv.append(draw(st.sampled_from(["fig4", "fig5", "fig6", "fig7", "FIG4", ""])))
    elif verb == "derive":
        # always a name: the whole set of derivations takes half a minute
        argv.append(draw(st.sampled_from(["CF2", "cf3", "CF5", "cf5_dominant_bounds", "",
                                          " CF2", "CF-IH9", "nope", "-"])))
    chosen = draw(st.lists(st.sampled_from(flags), max_size=5, unique=True))
    for flag in chosen:
        key = flag.lstrip("-")
        if flag in _SWITCHES:
            argv.append(flag)
            continue
        if key in files and files[key]:
            value = draw(st.sampled_from(list(files[key])))
        elif key in ("flow",):
            value = draw(st.sampled_from(["exact", "reduced", "snap", "EXACT", "", "sgd"]))
        elif key in ("method",):
            value = draw(st.sampled_from(["auto", "LSODA", "RK23", "Radau", "BDF", "x"]))
        elif key == "run":
            value = draw(st.sampled_from(["sgd", "gradient_ascent", "x"]))
        elif key == "preset":
            value = draw(st.sampled_from(["syn-small", "nope", ""]))
        elif key == "ratios":
            value = draw(st.one_of(st.sampled_from(["0.1,,0.2", ",", "", "1,nan", "inf",
                                                    "0.1,1", "-1", "1e-300,1e300"]),
                                   st.lists(_cli_number(), max_size=3).map(",".join)))
        elif key == "only":
            value = draw(st.sampled_from(["CF1", "cf3", "CF9", ""]))
        elif key == "format":
            value = draw(st.sampled_from(["png", "svg", "gif"]))
        elif key == "backend":
            value = draw(st.sampled_from(["serial", "serial", "SERIAL", ""]))
        elif key == "scheduler":
            value = draw(st.sampled_from(["tcp://127.0.0.1:1", "", "nonsense"]))
        elif verb == "sweep" and key in ("workers", "batch", "rows"):
            value = draw(st.one_of(st.sampled_from(["1", "2", "3"]), _cli_number()))
        elif verb == "reproduce" and key in ("steps", "seeds"):
            # tiny valid counts, or counts past the limits (a valid large count is a
            # long run, not a fuzz case)
            past = "100001" if key == "steps" else "1001"
            value = draw(st.sampled_from(["1", "2", "1", "0", "-3", past,
                                          "99999999999999999999", "1e3", "1.5", "abc", ""]))
        elif key in ("out", "config"):
            value = draw(st.sampled_from(["", "/", ".", "x.toml"]))
        elif key in ("t-end", "t-max", "steps"):
            value = draw(st.one_of(st.sampled_from(["0.01", "0.5", "1", "3", "10"]),
                                   _cli_number()))
        else:
            value = draw(_cli_number())
        argv += [flag, value]
    return argv


#: Sweep task kinds by family (the names of :data:`odeflow.sweeps.TASKS`).
_SWEEP_FLOWS = ("exact", "reduced", "snap", "finite_t")
_SWEEP_RUNS = ("gradient_ascent", "sgd", "adam")

#: Raw texts of sweep configs that are not a sweep config at all.
_SWEEP_RAW = ("", "[sweep", "[sweep]\ntask = ", "sweep = 3", "[sweep]\ngrid = 3",
              "[sweep]\nsettings = [1]", "[[sweep]]\ntask = 'exact'",
              "a = " + "[" * 3000 + "]" * 3000, "[sweep]\ntask = 'exact'\n[sweep]\n",
              "[sweep.grid]\neta_y = [" + "[" * 2000 + "]" * 2000 + "]")


@st.composite
def sweep_config_texts(draw) -> str | bytes:
    """Text of a small ``odeflow sweep`` config (TOML), valid or broken.

    Valid configs run in well under a second per point on the serial backend:
    one task, a grid of at most 2 x 2 points, a short horizon (``t_end`` <= 2,
    ``steps`` <= 3, batches of at most 4 sequences of length <= 8), the
    ``syn-small`` preset or a small data model (:func:`data_models`). Broken ones
    have a bad value in the grid or settings, an unknown or empty key (in
    ``[sweep]``, its tables or the top level), a wrong task, a preset beside a
    data model, bad ``store``/``format``/``backend`` entries, invalid or deeply
    nested TOML, or bytes that are not UTF-8 (returned as ``bytes``).
    """
    import tomli_w

    kind = draw(st.sampled_from(["valid"] * 7 + ["bad-value", "unknown-key", "top-level",
                                                 "task", "both-data", "entries", "raw",
                                                 "bytes"]))
    if kind == "raw":
        return draw(st.sampled_from(_SWEEP_RAW))
    if kind == "bytes":
        return draw(st.sampled_from([b"\xff\xfe[sweep]", b"[sweep]\ntask = '\xc3('",
                                     b"\x00\x00\x00"]))
    task = draw(st.sampled_from(_SWEEP_FLOWS + _SWEEP_RUNS))
    flow = task in _SWEEP_FLOWS
    horizon = "t_end" if flow else "steps"
    horizons = [0.1, 0.5, 1.0, 2.0] if flow else [1, 2, 3]
    settings = {horizon: draw(st.sampled_from(horizons))}
    if task in ("sgd", "adam"):
        settings.update(batch_size=draw(st.integers(1, 4)), seq_len=draw(st.integers(2, 8)))
    if task == "finite_t":
        settings.update(seq_len=draw(st.integers(2, 8)),
                        sample_size=draw(st.integers(1, 4)))
    names = draw(st.lists(st.sampled_from(["eta_y", "eta_z", horizon]), min_size=1,
                          max_size=2, unique=True))
    grid = {}
    for name in names:
        pool = horizons if name == horizon else [0.5, 1.0, 2.0]
        grid[name] = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=2,
                                   unique=True))
        settings.pop(name, None)
    table = {"task": task, "grid": grid, "settings": settings}
    if task in ("finite_t", "sgd", "adam") and draw(st.booleans()):
        table["seeds"] = draw(st.sampled_from([[0], [0, 1]]))
    doc = {}
    if draw(st.booleans()):
        table["preset"] = "syn-small"
    elif draw(st.booleans()):
        model = draw(data_models(max_classes=2, max_vocab=8)).to_dict()
        doc.update({"data": model} if draw(st.booleans()) else model)
    if kind == "bad-value":
        where = draw(st.sampled_from(["grid", "settings", "seeds"]))
        value = draw(st.sampled_from([[], [0], [-1.0], ["a"], [1.0, 1.0], "x", [math.inf],
                                      [math.nan], [True], 0, [[1.0]], {"a": 1}]))
        if where == "seeds":
            table["seeds"] = value
        else:
            table[where][draw(st.sampled_from(["eta_y", "eta_z", horizon, "method"]))] = value
    elif kind == "unknown-key":
        where = draw(st.sampled_from(["sweep", "grid", "settings"]))
        key = draw(st.sampled_from(["", " ", "nope", "eta-y", "seed", "task", "preset"]))
        value = [1.0] if where == "grid" else 1
        (table if where == "sweep" else table[where])[key] = value
    elif kind == "top-level":
        key = draw(st.sampled_from(["", "foo", "data", "run", "sweeps", "vocab_size",
                                    "classes"]))
        doc[key] = draw(st.sampled_from([1, {"x": 1}, {}, "text", [1, 2]]))
    elif kind == "task":
        table["task"] = draw(st.sampled_from(["nope", "", "EXACT", 3, ["exact"]]))
        if draw(st.booleans()):
            table["grid"]["task"] = draw(st.sampled_from([["exact", "sgd"], [], ["nope"],
                                                          "exact", ["exact", "reduced"]]))
    elif kind == "both-data":
        table["preset"] = draw(st.sampled_from(["syn-small", "nope", "", 3]))
        doc.update(draw(data_models(max_classes=1, max_vocab=6)).to_dict())
    else:  # the sweep's own entries (the CLI keeps the serial backend)
        entry = draw(st.sampled_from(["store", "format", "backend", "scheduler", "workers",
                                      "batch"]))
        table[entry] = draw(st.sampled_from({
            "store": ["s.zarr", "adir", "afile", "dangling", "x.nc", "", 5, "sub/s.zarr"],
            "format": ["zarr", "netcdf", "hdf5", 3],
            "backend": ["serial", "processes", "dask", "nope"],
            "scheduler": ["tcp://127.0.0.1:1", "", 3],
            "workers": [1, 0, -2, 2.5, "x"],
            "batch": [1, 2, 0, -1, 10**12, 1.5, "x"]}[entry]))
    doc["sweep"] = table
    return tomli_w.dumps(doc)
