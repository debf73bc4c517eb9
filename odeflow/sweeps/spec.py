"""What a sweep computes: :class:`SweepSpec`, checked from the user's task, grid and seeds.

The spec is plain data (names, lists of numbers and text, a data model as a
dict), so it can be written into a store, compared with the spec a store was
made for, and sent to the workers without pickling any code.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from odeflow.errors import ValidationError
from odeflow.families import family_of
from odeflow.sweeps.models import (
    edited_model,
    model_field_names,
    model_from_dict,
    model_to_dict,
    preset_model,
)
from odeflow.sweeps.outputs import OutputSet
from odeflow.sweeps.tasks import TaskKind, new_parameter_names, task_kind, tasks, time_grid
from odeflow.training.common import check_seed

#: Grid and settings keys that are not task parameters.
DATA_KEYS = ("task", "preset")

#: Version of the spec written into stores.
SPEC_FORMAT = "odeflow-sweep/1"

#: Most training steps of one point of a run task (the cap of ``odeflow reproduce``):
#: a typo such as ``steps = [1000000000000]`` is refused, not run for days.
MAX_STEPS = 100_000
#: Most tokens one training step may draw (``batch_size x seq_len``; 128 x 128 by
#: default): 10 million tokens are 80 MB a step, so that a typo such as
#: ``batch_size = 1000000000`` is refused before anything runs.
MAX_BATCH_TOKENS = 10**7
#: Share of this machine's memory the outputs of a sweep may take (they are all held
#: in memory, and a sweep's set-up builds them before the first point runs).
MEMORY_SHARE = 0.5
#: Bytes a point costs in memory beside its outputs (its parameter values while pending).
POINT_OVERHEAD = 1000


@dataclass(frozen=True)
class SweepSpec:
    """A checked sweep: the grid (in dimension order), seeds, fixed settings, data.

    Build one with :func:`make_spec`. ``grid`` maps each swept name to its
    values (numbers or text); ``seeds`` is ``None`` (no seed dimension) or a
    list of integers; ``settings`` holds every other parameter of the task,
    checked; ``data`` is ``None`` when the data model comes from ``preset``
    (fixed in ``settings`` or swept in ``grid``), else the model as a dict
    (:func:`odeflow.sweeps.models.model_to_dict`).
    """

    grid: dict
    seeds: list | None
    settings: dict
    data: dict | None
    times: list = field(default_factory=list)

    # ------------------------------------------------------------ structure
    @property
    def dims(self) -> tuple[str, ...]:
        """The point dimensions: the grid names in order, then ``seed`` if seeded."""
        return tuple(self.grid) + (("seed",) if self.seeds is not None else ())

    @property
    def coords(self) -> dict:
        out = dict(self.grid)
        if self.seeds is not None:
            out["seed"] = list(self.seeds)
        return out

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(v) for v in self.coords.values())

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def points(self):
        """``(index, values)`` of every point, in C order over :attr:`dims`."""
        coords = self.coords
        names = list(coords)
        for index in itertools.product(*(range(len(v)) for v in coords.values())):
            values = dict(self.settings)
            values.update({n: coords[n][i] for n, i in zip(names, index, strict=True)})
            yield index, values

    @cached_property
    def kinds(self) -> list[TaskKind]:
        names = self.grid.get("task", [self.settings.get("task")])
        return [task_kind(n) for n in names]

    @property
    def family(self) -> str:
        return self.kinds[0].family

    @property
    def outputs(self) -> OutputSet:
        """The outputs of the sweep's task(s) (one set for every task of a sweep)."""
        return self.kinds[0].outputs

    @cached_property
    def data_models(self) -> dict:
        """Data model of each preset in use (key ``None`` for a given model)."""
        if self.data is not None:
            return {None: model_from_dict(self.data)}
        names = self.grid.get("preset", [self.settings.get("preset")])
        return {n: preset_model(n) for n in names}

    @cached_property
    def sizes(self) -> dict:
        """Size of every per-point dim of the outputs (``time`` included)."""
        return self.outputs.sizes(list(self.data_models.values()), self.times)

    # -------------------------------------------------------------- identity
    def to_dict(self) -> dict:
        return {"format": SPEC_FORMAT, "grid": self.grid, "seeds": self.seeds,
                "settings": self.settings, "data": self.data, "times": self.times}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def differences(self, other: Mapping) -> list[str]:
        """Names of the entries that differ from the spec ``other`` (a :meth:`to_dict`)."""
        mine = json.loads(self.to_json())
        out = []
        for key in ("format", "grid", "seeds", "settings", "data", "times"):
            a, b = mine.get(key), other.get(key)
            if isinstance(a, dict) and isinstance(b, dict) and key != "data":
                out += [f"{key}.{k}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
            elif a != b:
                out.append(key)
        return out


def make_spec(task="exact", grid=None, seeds=None, settings=None, data=None) -> SweepSpec:
    """Check a sweep's inputs and build its :class:`SweepSpec`.

    Parameters
    ----------
    task : str or None
        A key of :func:`odeflow.sweeps.tasks.tasks`; ``None`` when ``grid``
        sweeps ``task``.
    grid : mapping of str to list
        Swept parameters: any parameter of the task, ``task`` and ``preset``.
    seeds : list of int, optional
        Seeds of a stochastic task (a ``seed`` dimension).
    settings : mapping, optional
        Fixed values of parameters that are not swept (defaults otherwise).
    data : data model or str, optional
        The data model (of the family the task takes), or a preset name (default:
        the task's ``default_preset``).

    Raises
    ------
    ValidationError
        Naming the field: an unknown parameter (``grid.<name>``), an empty list,
        a value of the wrong kind (``grid.<name>[i]``), a parameter both swept
        and fixed, seeds for a deterministic task, repeated values, a data model
        of another family than the task's; a model field (``prior.alpha``) the
        model does not have, or a value its model refuses.
    """
    if grid is None:
        grid = {}
    if not isinstance(grid, Mapping):
        raise ValidationError("grid", f"must be a mapping of parameter names to lists, "
                              f"got {type(grid).__name__}")
    if settings is not None and not isinstance(settings, Mapping):
        raise ValidationError("settings", f"must be a mapping of parameter names to values, "
                              f"got {type(settings).__name__}")
    settings = dict(settings or {})
    kinds = _task_kinds(task, grid)
    grid = new_parameter_names(kinds, dict(grid), "grid")
    settings = new_parameter_names(kinds, settings, "settings")
    data_dict, preset = _data_source(data, grid, settings, kinds)
    models = _check_models(data_dict, grid, preset, kinds)
    allowed = _allowed_parameters(kinds, models)
    checked_grid = _checked_grid(grid, kinds, allowed)
    fixed = _fixed_values(settings, checked_grid, kinds, allowed)
    if data_dict is None and "preset" not in checked_grid:
        fixed["preset"] = preset
    for kind in kinds:
        if kind.check is not None:
            kind.check(checked_grid, fixed)
    seeds = _seeds(seeds, kinds)
    if seeds is None and any(k.stochastic for k in kinds):
        fixed["seed"] = 0
    _check_storable(checked_grid, seeds, fixed)
    spec = SweepSpec(checked_grid, seeds, dict(sorted(fixed.items())), data_dict)
    horizon = kinds[0].horizon
    largest = max(checked_grid.get(horizon, [fixed.get(horizon)]))
    times = time_grid(kinds[0].family, largest)
    object.__setattr__(spec, "times", [float(t) for t in times])
    spec.sizes  # noqa: B018 (every data model's outputs fit one store, or refused here)
    check_size(spec)
    return spec


def _checked_grid(grid: Mapping, kinds, allowed: dict) -> dict:
    """Each swept parameter's checked values; refuses a name that is also an output's."""
    checked_grid = {}
    outputs = kinds[0].outputs
    for name, values in grid.items():
        checked_grid[name] = _grid_values(name, values, kinds, allowed)
        if name in outputs.variables:  # a coordinate and a data variable of one name
            raise ValidationError(f"grid.{name}", f"is also the name of an output of task "
                                  f"{kinds[0].name!r}; fix it in settings")
    return checked_grid


def _fixed_values(settings: dict, checked_grid: dict, kinds, allowed: dict) -> dict:
    """The values of the parameters not swept: ``settings`` checked, ``task`` when it is
    not swept, and each remaining parameter's default (``preset`` is the caller's)."""
    fixed = {}
    for name, value in settings.items():
        if name not in allowed and name not in DATA_KEYS:
            raise ValidationError(f"settings.{name}", _unknown(name, kinds, allowed))
        if name in checked_grid:
            raise ValidationError(f"settings.{name}", "is also swept in grid; give it once")
        if name == "task":
            raise ValidationError("settings.task", "give the task as the task argument "
                                  "([sweep] task = ...), or sweep it in grid.task")
        if name == "preset":
            continue
        fixed[name] = allowed[name].check(value, f"settings.{name}")
    if "task" not in checked_grid:
        fixed["task"] = kinds[0].name
    for name, param in allowed.items():
        if name not in checked_grid and name not in fixed and param.default is not None:
            fixed[name] = param.default
    return fixed


#: The integers a store holds (int64), and so every integer of a sweep.
INT64_RANGE = (-(1 << 63), (1 << 63) - 1)


def _check_storable(grid: dict, seeds, settings: dict) -> None:
    """Refuse, naming it, a value a store cannot hold (an integer beyond int64, a value
    that is not a number or text), before any point runs."""
    items = [(f"grid.{k}[{i}]", v) for k, values in grid.items() for i, v in enumerate(values)]
    items += [(f"seeds[{i}]", v) for i, v in enumerate(seeds or [])]
    items += [(f"settings.{k}", v) for k, v in settings.items()]
    for name, value in items:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValidationError(name, f"must be a number or text, got {value!r:.60}")
        if isinstance(value, int) and not INT64_RANGE[0] <= value <= INT64_RANGE[1]:
            raise ValidationError(name, f"is {value:.4g}, beyond the 64-bit integers a "
                                  "store holds")


def memory_estimate(spec: SweepSpec) -> int:
    """Bytes a sweep of ``spec`` holds in memory: its outputs (twice: the arrays and the
    dataset made of them) and :data:`POINT_OVERHEAD` a point."""
    sizes = spec.sizes
    per_point = sum(8 * int(np.prod([sizes[d] for d in dims], dtype=np.int64))
                    for dims, _ in spec.outputs.variables.values())
    return spec.size * (2 * per_point + POINT_OVERHEAD)


def machine_memory() -> int | None:
    """Bytes of physical memory of this machine (``None`` where the system cannot say)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):  # pragma: no cover (not on Linux)
        return None


def check_size(spec: SweepSpec) -> None:
    """Refuse, naming the key, a sweep whose points or size cannot be run here.

    A run task's ``steps`` above :data:`MAX_STEPS`; ``batch_size x seq_len`` above
    :data:`MAX_BATCH_TOKENS`; a grid whose outputs (:func:`memory_estimate`) exceed
    :data:`MEMORY_SHARE` of this machine's memory.
    """
    for name in ("steps", "batch_size"):
        if name not in spec.grid and name not in spec.settings:
            continue
        field = f"grid.{name}" if name in spec.grid else f"settings.{name}"
        largest = max(spec.grid.get(name, [spec.settings.get(name)]))
        if name == "steps" and largest > MAX_STEPS:
            raise ValidationError(field, f"must be <= {MAX_STEPS:,} training steps a point "
                                  f"(the cap of odeflow reproduce), got {largest:,}")
        if name == "batch_size":
            seq_len = max(spec.grid.get("seq_len", [spec.settings.get("seq_len", 1)]))
            if largest * seq_len > MAX_BATCH_TOKENS:
                raise ValidationError(field, f"batch_size x seq_len = {largest:,} x "
                                      f"{seq_len:,} tokens a step exceeds "
                                      f"{MAX_BATCH_TOKENS:,}; use a smaller batch")
    need, have = memory_estimate(spec), machine_memory()
    if have is not None and need > MEMORY_SHARE * have:
        shape = " x ".join(f"{len(v):,}" for v in spec.coords.values())
        raise ValidationError("grid", f"{shape} = {spec.size:,} points would hold about "
                              f"{need / 2**30:.1f} GiB of outputs in memory, more than "
                              f"{MEMORY_SHARE:.0%} of this machine's {have / 2**30:.1f} GiB; "
                              "sweep fewer points (or split the grid into several sweeps)")


def _task_kinds(task, grid) -> list[TaskKind]:
    if "task" in grid:
        if task is not None:
            raise ValidationError("task", "is swept in grid.task; pass task=None")
        names = grid["task"]
        if isinstance(names, str) or not isinstance(names, Sequence) or not names:
            raise ValidationError("grid.task", f"must be a non-empty list of task names, "
                                  f"got {names!r}")
        kinds = [task_kind(n, f"grid.task[{i}]") for i, n in enumerate(names)]
        if len({k.family for k in kinds}) > 1:
            raise ValidationError("grid.task", "mixes flows and training runs (their time "
                                  "axes differ); sweep them separately")
        if len({(k.outputs.name, k.model_family) for k in kinds}) > 1:
            raise ValidationError("grid.task", "mixes tasks of different model families "
                                  "(their data models and outputs differ); sweep them "
                                  "separately")
        return kinds
    return [task_kind(task)]


def _data_source(data, grid, settings, kinds) -> tuple[dict | None, str | None]:
    preset = settings.get("preset")
    if preset is not None and not isinstance(preset, str):
        raise ValidationError("settings.preset", f"must be a preset name, got {preset!r}")
    if data is not None and not isinstance(data, str):
        try:
            family_of(data)
        except ValidationError:
            raise ValidationError("data", f"must be a data model or a preset name, got "
                                  f"{type(data).__name__}") from None
        if "preset" in grid or preset is not None:
            raise ValidationError("preset", "give either a data model or a preset, not both")
        return model_to_dict(data), None
    if data is None and "preset" in grid:
        return None, None
    if data is not None and "preset" in grid:
        raise ValidationError("grid.preset", "give either a data model or a swept preset")
    if data is not None and preset is not None:
        raise ValidationError("settings.preset", "given twice (also as data)")
    return None, data or preset or kinds[0].default_preset


def _check_models(data_dict, grid, preset, kinds) -> list:
    """The sweep's data models (the given one, or each preset), each of the family the
    task takes; a ValidationError names ``data``, ``preset`` or ``grid.preset[i]``."""
    if data_dict is not None:
        pairs = [("data", model_from_dict(data_dict))]
    elif "preset" in grid:
        names = grid["preset"]
        if isinstance(names, (str, bytes)) or not isinstance(names, Sequence):
            return []  # not a list: refused by the grid's own check
        pairs = [(f"grid.preset[{i}]", preset_model(n, f"grid.preset[{i}]"))
                 for i, n in enumerate(names)]
    else:
        pairs = [("preset", preset_model(preset))]
    wanted = kinds[0].model_family
    for where, model in pairs:
        family = family_of(model).name
        if family != wanted:
            others = sorted(k.name for k in tasks().values() if k.model_family == family)
            raise ValidationError(where, f"is a {family!r} data model, but task "
                                  f"{kinds[0].name!r} takes {wanted!r} models; tasks of "
                                  f"{family!r} models: {others}")
    return [model for _, model in pairs]


class ModelField:
    """A number of the sweep's data model set by dotted name (``prior.alpha``), checked
    by rebuilding each of the sweep's models with the value in
    (:func:`odeflow.sweeps.models.edited_model`)."""

    default = None

    def __init__(self, name: str, models: list):
        self.name, self.models = name, models

    def check(self, value, field: str):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValidationError(field, f"must be a number, got {value!r:.80}")
        for model in self.models:
            edited_model(model, {self.name: value}, {self.name: field})
        return value


def _allowed_parameters(kinds, models) -> dict:
    allowed = {}
    for kind in kinds:
        for p in kind.parameters:
            allowed.setdefault(p.name, p)
    if models and all(k.model_fields for k in kinds):
        others = [set(model_field_names(m)) for m in models[1:]]  # each model's once
        names = [n for n in model_field_names(models[0]) if all(n in o for o in others)]
        for name in names:
            allowed.setdefault(name, ModelField(name, models))
    return allowed


def _unknown(name, kinds, allowed) -> str:
    names = ", ".join(repr(k.name) for k in kinds)
    return (f"unknown parameter {name!r} for task {names}; it takes "
            f"{sorted([*allowed, *DATA_KEYS])}")


def _grid_values(name, values, kinds, allowed) -> list:
    field = f"grid.{name}"
    if not isinstance(name, str) or (name not in allowed and name not in DATA_KEYS):
        raise ValidationError(field, _unknown(name, kinds, allowed))
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
        raise ValidationError(field, f"must be a list of values, got {values!r:.80}")
    if len(values) == 0:
        raise ValidationError(field, "is empty; give at least one value")
    if name == "task":
        out = [task_kind(v, f"{field}[{i}]").name for i, v in enumerate(values)]
    elif name == "preset":
        out = []
        for i, v in enumerate(values):
            if not isinstance(v, str):
                raise ValidationError(f"{field}[{i}]", f"must be a preset name, got {v!r}")
            out.append(v)
    else:
        param = allowed[name]
        out = [param.check(v, f"{field}[{i}]") for i, v in enumerate(values)]
    if len(set(out)) != len(out):
        raise ValidationError(field, f"has repeated values {list(values)!r:.120}")
    return out


def _seeds(seeds, kinds) -> list | None:
    if seeds is None:
        return None
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, (Sequence, np.ndarray)):
        raise ValidationError("seeds", f"must be a list of integers, got {seeds!r:.80}")
    if len(seeds) == 0:
        raise ValidationError("seeds", "is empty; give at least one seed or leave it out")
    if not any(k.stochastic for k in kinds):
        raise ValidationError("seeds", f"task {kinds[0].name!r} is deterministic; every "
                              "seed would repeat the same point")
    out = [check_seed(s, f"seeds[{i}]") for i, s in enumerate(seeds)]
    if len(set(out)) != len(out):
        raise ValidationError("seeds", f"has repeated values {list(seeds)!r:.120}")
    return out


def spec_from_dict(stored) -> SweepSpec:
    """The :class:`SweepSpec` a store's spec (:meth:`SweepSpec.to_dict`) describes.

    The stored entries are checked again by :func:`make_spec`; a dict that is
    not exactly what ``make_spec`` would write for them (an entry edited, added
    or removed, values of another kind) is refused.

    Raises
    ------
    ValidationError
        Naming ``odeflow_sweep`` and what does not fit.
    """
    field = "odeflow_sweep"
    if not isinstance(stored, Mapping):
        raise ValidationError(field, f"must be a JSON object, got {type(stored).__name__}")
    keys = {"format", "grid", "seeds", "settings", "data", "times"}
    if set(stored) != keys:
        raise ValidationError(field, f"must have the keys {sorted(keys)}, got "
                              f"{sorted(map(str, stored))}")
    if stored["format"] != SPEC_FORMAT:
        raise ValidationError(field, f"format {stored['format']!r:.40} is not "
                              f"{SPEC_FORMAT!r}")
    grid, settings = stored["grid"], stored["settings"]
    if not isinstance(grid, Mapping) or not isinstance(settings, Mapping):
        raise ValidationError(field, "grid and settings must be JSON objects")
    settings = dict(settings)
    task = None if "task" in grid else settings.pop("task", None)
    preset = settings.pop("preset", None)
    data = stored["data"]
    try:
        if stored["seeds"] is None and not any(k.parameter("seed") is not None
                                               for k in _task_kinds(task, grid)):
            settings.pop("seed", None)
        data = preset if data is None else model_from_dict(data)
        spec = make_spec(task, dict(grid), stored["seeds"], settings, data)
    except (ValidationError, TypeError, KeyError, AttributeError) as exc:
        raise ValidationError(field, f"does not describe a sweep: {exc}") from None
    differ = spec.differences(stored)
    if differ:
        raise ValidationError(field, f"is not what odeflow writes for its sweep "
                              f"({', '.join(differ)} differ)")
    return spec
