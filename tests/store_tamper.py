"""Tamper with sweep stores and classify what odeflow's readers make of them.

Shared by the store fuzzer (``tests/properties/test_store_tamper_properties.py``,
hypothesis) and a counting run::

    python -m tests.store_tamper 400        # tamperings of each store kind; prints counts

Two stores of a 2 x 3 exact-flow grid are damaged: a finished one (every
point folded into the arrays) and one whose sweep was killed before its first
fold (every point in the journal). A tampering is a bit flip, a truncation, a
deletion (a file or a whole array), bytes appended, or an edit of a JSON
document (an array's ``zarr.json``, the root attributes, ``odeflow_sweep``,
``odeflow_integrity``) at a random place. Each damaged copy is read with
:func:`odeflow.sweeps.open_store` and resumed with :func:`odeflow.sweeps.sweep`
and classified (:func:`classify`):

``refused``     a :class:`ValidationError` naming ``store`` and the path (both readers)
``identical``   read back number for number (the tampering changed nothing read)
``pending``     journal points lost and shown as pending (``computed`` 0: a journal
                cut at a record boundary or deleted looks like a sweep killed earlier);
                the resume computes them again, to the same numbers
``different``   other values read as good data (the goal: never)
``traceback``   any other exception (the goal: never)
"""

from __future__ import annotations

import json
import random
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

from odeflow.errors import ValidationError
from odeflow.sweeps import make_spec, open_store, sweep
from odeflow.sweeps.journal import JOURNAL_GROUP, Journal
from odeflow.sweeps.outputs import VARYING
from odeflow.sweeps.store import SweepArrays

GRID = {"eta_y": [0.5, 1.0], "eta_z": [0.1, 1.0, 2.0]}
SETTINGS = {"t_end": 50.0}
OPERATIONS = ("flip", "truncate", "delete", "delete array", "append", "edit json")
KINDS = ("finished", "killed")


def make_stores(folder: Path) -> tuple[dict, object]:
    """``({kind: store path}, the sweep's dataset)`` in ``folder``."""
    finished = folder / "finished.zarr"
    ds = sweep("exact", GRID, settings=SETTINGS, backend="serial", store=finished)
    killed = folder / "killed.zarr"
    spec = make_spec("exact", GRID, settings=SETTINGS)
    SweepArrays(spec, killed).create()
    (killed / JOURNAL_GROUP).mkdir()
    journal = Journal(killed)
    for index, _ in spec.points():
        outputs = {name: ds[name].values[index] for name in ds.data_vars}
        outputs["error"] = str(outputs["error"])
        journal.append(index, outputs)
    journal.close()
    return {"finished": finished, "killed": killed}, ds


class Chooser:
    """Random choices from :class:`random.Random` or a hypothesis ``data`` object."""

    def __init__(self, rng=None, data=None):
        self.rng, self.data = rng, data

    def pick(self, options):
        options = list(options)
        if self.data is not None:
            from hypothesis import strategies as st

            return self.data.draw(st.sampled_from(options))
        return self.rng.choice(options)

    def integer(self, lo: int, hi: int) -> int:
        if self.data is not None:
            from hypothesis import strategies as st

            return self.data.draw(st.integers(lo, hi))
        return self.rng.randint(lo, hi)

    def value(self):
        """A JSON value to put in place of another."""
        return self.pick([None, True, 0, -1, 1, 2**70, 1.5, float("nan"), "", "x", "float32",
                          "{broken", "[1,2]", [], [1, 2], {}, {"a": 1}])


def files(store: Path) -> list[str]:
    return sorted(str(p.relative_to(store)) for p in store.rglob("*") if p.is_file())


def tamper(store: Path, choose: Chooser) -> str:
    """Damage ``store`` once; a description of what was done."""
    operation = choose.pick(OPERATIONS)
    names = files(store)
    if operation == "edit json":
        name = choose.pick([n for n in names if n.endswith("zarr.json")])
        path = store / name
        meta = json.loads(path.read_text())
        where, key = _json_place(meta, choose)
        where[key] = choose.value()
        path.write_text(json.dumps(meta))
        return f"edit {name}: {key!r}"
    if operation == "delete array":
        name = choose.pick(sorted({n.split("/")[0] for n in names if "/" in n}))
        shutil.rmtree(store / name)
        return f"delete {name}/"
    name = choose.pick(names)
    path = store / name
    data = bytearray(path.read_bytes())
    if operation == "delete":
        path.unlink()
    elif operation == "append":
        path.write_bytes(bytes(data) + bytes([choose.integer(0, 255)]) * choose.integer(1, 9))
    elif not data:
        path.write_bytes(b"x")
    elif operation == "flip":
        at = choose.integer(0, len(data) - 1)
        data[at] ^= 1 << choose.integer(0, 7)
        path.write_bytes(bytes(data))
        return f"flip {name} byte {at}"
    else:
        path.write_bytes(bytes(data[:choose.integer(0, len(data) - 1)]))
    return f"{operation} {name}"


def _json_place(meta: dict, choose: Chooser):
    """A container in ``meta`` and a key of it, at a random depth."""
    where = meta
    while True:
        keys = list(where) if isinstance(where, dict) else list(range(len(where)))
        key = choose.pick(keys) if keys else None
        if key is None:
            return where, 0 if isinstance(where, list) else "added"
        inner = where[key]
        if not isinstance(inner, (dict, list)) or not inner or choose.integer(0, 2) == 0:
            return where, key
        where = inner


def classify(store: Path, original, kind: str) -> tuple[str, str]:
    """What :func:`open_store` and a resumed sweep make of the damaged ``store``."""
    outcomes = []
    for reader in (_open, _resume):
        try:
            outcomes.append(reader(store, original))
        except ValidationError as exc:
            if exc.field != "store" or str(store) not in str(exc):
                return "traceback", f"ValidationError not naming the store: {exc}"
            outcomes.append(("refused", str(exc)))
        except Exception as exc:  # noqa: BLE001 (any other kind is what is counted)
            return "traceback", f"{type(exc).__name__}: {exc}"
        if outcomes[-1][0] == "refused":
            break  # the resume would refuse it too (same checks), and may not run on it
    worst = max(outcomes, key=lambda o: ("identical", "pending", "refused", "different",
                                         "traceback").index(o[0]))
    return worst


def _open(store, original):
    ds = open_store(store)
    return _compare(ds, original, allow_pending=True)


def _resume(store, original):
    ds = sweep("exact", GRID, settings=SETTINGS, backend="serial", store=store, resume=True)
    outcome = _compare(ds, original, allow_pending=False, skip=VARYING + ("computed",))
    return outcome


def _compare(ds, original, allow_pending: bool, skip=()) -> tuple[str, str]:
    pending = ds["computed"].values == 0
    differ = []
    for name in original.data_vars:
        if name in skip:
            continue
        if name not in ds:
            return "different", f"{name} missing"
        a, b = np.asarray(ds[name].values), np.asarray(original[name].values)
        if a.dtype.kind in "OU":
            a, b = a.astype(str), b.astype(str)
            same = a == b
        else:
            same = (a == b) | (np.isnan(a) & np.isnan(b)) if a.dtype.kind == "f" else a == b
        same = same.reshape(pending.shape + (-1,)).all(axis=-1)
        if not same.all():
            differ.append((name, ~same))
    if not differ:
        return "identical", ""
    if allow_pending and all((~pending & mask).sum() == 0 for _, mask in differ):
        return "pending", f"{int(pending.sum())} points pending"
    return "different", ", ".join(name for name, _ in differ)


def run(count: int, seed: int = 0) -> Counter:
    """``count`` tamperings of each store kind; the counts of each outcome."""
    counts = Counter()
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        stores, original = make_stores(folder)
        for i in range(count):
            for kind in KINDS:
                copy = folder / f"copy{i}-{kind}.zarr"
                shutil.copytree(stores[kind], copy)
                what = tamper(copy, Chooser(rng=rng))
                outcome, detail = classify(copy, original, kind)
                counts[outcome] += 1
                if outcome in ("different", "traceback"):
                    print(f"{outcome}: {kind} store, {what}: {detail}", file=sys.stderr)
                shutil.rmtree(copy)
    counts["tried"] = 2 * count
    return counts


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    totals = run(n)
    print(f"tampered stores tried: {totals['tried']}; refused by name: {totals['refused']}; "
          f"read back identical: {totals['identical']}; journal points lost and shown "
          f"pending: {totals['pending']}; silently accepted with other values: "
          f"{totals['different']}; tracebacks: {totals['traceback']}")
