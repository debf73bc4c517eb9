"""Training and runs beside the flow for every family: :func:`train`, :func:`compare`.

Each model family declares its trainer and its comparison with its flow
(:attr:`odeflow.families.Family.train`, :attr:`~odeflow.families.Family.compare`,
targets ``"module:attribute"``); :func:`train` and :func:`compare` look the family of
``data`` up and call them. Every family's pair takes the same keywords for the same
concepts (``docs/api.md``, "Training and runs beside the flow"):

``train(data, *, steps, seeds=1, start=None, optimizer=None, batch_size, seq_len,
sample_size=None, seed=0, record=None, progress=None, <the family's rates>, ...)``

``compare(data=None, *, seeds, steps, ..., record=None, progress=None)``

This module also holds what the families' trainers share: :class:`Runs` (one run per
seed, recorded at the same steps), :func:`run_seeds` (``seeds`` and ``seed``),
:func:`record_marks` (``record``) and :func:`old_forms`, which takes a trainer's old
positional and keyword forms for one release with a
:class:`~odeflow.errors.RenamedWarning`.
"""

from __future__ import annotations

import functools
import inspect
import numbers
import sys
import warnings

import numpy as np

from odeflow.data.checks import check_count, check_seed, check_seeds
from odeflow.errors import RenamedWarning, ValidationError, renamed


# ------------------------------------------------------------------ entry points
def _target(data, what: str):
    """The family of ``data`` and its declared ``what`` (``train`` or ``compare``)."""
    from odeflow.families import family_of, load

    family = family_of(data)
    target = getattr(family, what, "")
    if not target:
        raise ValidationError("data", f"the family {family.name!r} declares no {what} "
                              f"(its Family.{what} is empty)")
    return family, load(target)


def _check_keywords(family, function, what: str, options: dict) -> None:
    """Refuse, by name, a keyword that the family's ``function`` does not take."""
    parameters = inspect.signature(function).parameters
    if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        return
    known = {name for name, p in parameters.items()
             if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)} - {"data"}
    for name in options:
        if name not in known and name not in getattr(function, "renamed", {}):
            raise ValidationError(name, f"is not an option of the {family.name} family's "
                                  f"{what}; it takes {sorted(known)}")


def train(data, *args, **options):
    """Train the model of ``data``'s family on sampled data: its declared trainer.

    Parameters
    ----------
    data
        A data model of a registered family (:func:`odeflow.families.family_of`).
    **options
        The shared keywords (``steps``, ``seeds``, ``start``, ``optimizer``,
        ``batch_size``, ``seq_len``, ``sample_size``, ``seed``, ``record``,
        ``progress``) and the family's own (its rates: Scan and Snap's ``eta_y``,
        ``eta_z``, the induction family's ``rates``, the two-stage family's ``eta``);
        ``docs/api.md``, "Training and runs beside the flow".

    Returns
    -------
    The family's run result: it has ``seeds``, ``steps`` (the recorded steps), ``t``
    (their flow times), ``loss`` (seed axis first) and ``len()`` (the seeds).

    Raises
    ------
    ValidationError
        Naming ``data`` when its family declares no trainer, or an option the
        family's trainer does not take.
    """
    family, function = _target(data, "train")
    _check_keywords(family, function, "train", options)
    return function(data, *args, **options)


def compare(data=None, *args, **options):
    """Runs of ``data``'s family beside its flow at the same times: its declared comparison.

    Parameters
    ----------
    data
        A data model of a registered family, or None (the family that accepts None).
    **options
        ``seeds``, ``steps``, ``record``, ``progress`` and the trainer's keywords
        (``docs/api.md``, "Training and runs beside the flow").

    Returns
    -------
    The family's comparison: it has ``t`` (the recorded flow times), ``seeds``,
    ``flow`` (the flow at those times) and ``rows()`` (one dict per recorded time).

    Raises
    ------
    ValidationError
        Naming ``data`` when its family declares no comparison, or an option it does
        not take.
    """
    family, function = _target(data, "compare")
    _check_keywords(family, function, "compare", options)
    return function(data, *args, **options)


# ------------------------------------------------------------------ shared pieces
def run_seeds(seeds, seed=0) -> list[int]:
    """The runs' seeds: a count ``n`` is ``seed, .., seed + n - 1``; a list is itself.

    Run ``i`` draws all its randomness (batches, its sample) from its seed, as
    :func:`odeflow.solve` draws a fixed sample from ``seed``. A list of seeds with a
    ``seed`` other than 0 is refused naming ``seed``.
    """
    if isinstance(seeds, numbers.Integral) and not isinstance(seeds, bool):
        first = check_seed(seed, "seed")
        return [first + i for i in range(check_count(seeds, "seeds"))]
    out = check_seeds(seeds)
    if not (isinstance(seed, numbers.Integral) and seed == 0):
        raise ValidationError("seed", f"is the first seed of a count of seeds; with the list "
                              f"seeds={out} give no seed (got {seed!r})")
    return out


def check_optimizer(optimizer):
    """``optimizer`` if it is an odeflow optimiser (``None``: plain gradient steps,
    :class:`~odeflow.fields.optimizers.GradientDescent`), else a ValidationError."""
    from odeflow.fields.optimizers import GradientDescent, Optimizer

    if optimizer is None:
        return GradientDescent()
    if not isinstance(optimizer, Optimizer):
        raise ValidationError("optimizer", f"must be an odeflow optimiser (GradientDescent, "
                              f"Momentum, Adam), got {type(optimizer).__name__}")
    return optimizer


def record_marks(record, steps: int, default=None, *, exact: bool = False) -> np.ndarray:
    """Recorded steps, sorted and distinct, always with the start ``0`` and the end.

    Parameters
    ----------
    record : None, int or sequence of int
        ``None``: ``default``; an integer ``n``: every ``n`` steps (``0, n, 2n, ..``);
        a sequence: those steps, each in ``[0, steps]``. Integers follow the package's
        count policy (:func:`odeflow.data.checks.check_count`): a float of integral
        value (``2.0``) is that integer; a bool, a fraction or text is refused.
    steps : int
        The run's steps.
    default : None, int, sequence or callable
        What ``None`` means (a callable is given ``steps``); ``None``: every step.
    exact : bool, default False
        A sequence is exactly its steps (sorted, distinct, at least one): the start
        and the end only when listed (one two-stage run,
        :func:`odeflow.training.two_stage.train_run`).

    Raises
    ------
    ValidationError
        Naming ``record``.
    """
    if record is None:
        record = default(steps) if callable(default) else default
        if record is None:
            record = 1
    if _is_scalar(record):
        marks = np.arange(0, steps + 1, check_count(record, "record"), dtype=np.int64)
    else:
        marks = record_steps(record, steps)
        if exact:
            if marks.size == 0:
                raise ValidationError("record", "must list at least one step, got none")
            return np.unique(marks)
    return np.unique(np.concatenate([[0], marks, [steps]])).astype(np.int64)


def log_spaced_steps(steps: int, count: int) -> np.ndarray:
    """``0``, ``steps`` and about ``count`` distinct log-spaced steps from 1 to ``steps``
    (sorted int64; ``[0]`` for ``steps = 0``): the families' default records."""
    steps = check_count(steps, "steps", minimum=0)
    if steps == 0:
        return np.zeros(1, dtype=np.int64)
    marks = np.round(np.geomspace(1, steps, check_count(count, "count"))).astype(np.int64)
    return np.unique(np.concatenate([[0], marks, [steps]]))


def _is_scalar(value) -> bool:
    """Whether ``value`` is one number (not text, not a sequence)."""
    try:
        return np.ndim(value) == 0 and not isinstance(value, str)
    except ValueError:   # a ragged sequence
        return False


def record_steps(record, steps: int) -> np.ndarray:
    """The steps of a sequence ``record``, each an integer in ``[0, steps]`` (the count
    policy of :func:`odeflow.data.checks.check_count`: ``4.0`` is 4), as int64 in the
    given order; anything else is refused naming ``record``."""
    try:
        arr = np.asarray(record)
    except (TypeError, ValueError):   # ragged
        arr = np.asarray(None)
    if arr.size == 0 and arr.ndim == 1:
        arr = arr.astype(np.int64)
    if arr.ndim == 1 and arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(
            arr == np.round(arr)):
        arr = arr.astype(np.int64)
    if arr.ndim != 1 or arr.dtype.kind not in "iu" or (arr.size and (
            arr.min() < 0 or arr.max() > steps)):
        raise ValidationError("record", f"must be an integer (every that many steps) or "
                              f"integer steps in [0, steps={steps}], got {record!r:.80}")
    return arr.astype(np.int64)


class Runs:
    """Training runs of one family, one per seed, recorded at the same steps.

    The result of the induction and two-stage families' ``train`` (Scan and Snap's
    :class:`~odeflow.training.protocol.TrainingRun` holds its seeds in arrays).

    Attributes
    ----------
    runs : list
        One run per seed (an ``InductionRun``, a ``TwoStageRun``).
    seeds : list of int
    steps : ndarray of int
        The recorded steps (those of every run).
    t : ndarray
        Their flow times.
    loss : ndarray, shape (S, n)
        Each run's training loss at the recorded steps (the seed axis first). With
        ``note`` (a trainer whose old form returned one run with another ``loss``),
        reading it from outside odeflow warns :class:`~odeflow.errors.RenamedWarning`
        ``note`` first.
    """

    def __init__(self, runs, seeds, loss: str = "loss", note: str | None = None):
        self.runs, self.seeds, self._loss = list(runs), list(seeds), loss
        self._note = note

    def __len__(self) -> int:
        return len(self.runs)

    def __getitem__(self, i):
        return self.runs[i]

    def __iter__(self):
        return iter(self.runs)

    def __repr__(self) -> str:
        return f"<Runs of {len(self)} seeds {self.seeds}, {self.steps.size} records>"

    @property
    def steps(self) -> np.ndarray:
        return self.runs[0].steps

    @property
    def t(self) -> np.ndarray:
        return self.runs[0].t

    @property
    def loss(self) -> np.ndarray:
        note = self.__dict__.get("_note")
        if note and not _in_package(sys._getframe(1)):
            warnings.warn(RenamedWarning(note), stacklevel=2)
        return self.stack(self._loss)

    def stack(self, name: str) -> np.ndarray:
        """A series of every run, the seed axis first."""
        return np.stack([np.asarray(getattr(r, name)) for r in self.runs])

    def mean(self, name: str) -> np.ndarray:
        """Mean over seeds of a run's series (``a``, ``accuracy_q_only``, ..)."""
        return np.mean(self.stack(name), axis=0)

    def std(self, name: str) -> np.ndarray:
        """Standard deviation over seeds (``ddof = 0``) of a run's series."""
        return np.std(self.stack(name), axis=0)

    def __getattr__(self, name):
        runs = self.__dict__.get("runs", [])
        if name.startswith("_") or len(runs) != 1 or not hasattr(runs[0], name):
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r} (one run "
                                 f"per seed: runs[i].{name})")
        warnings.warn(RenamedWarning(f"'run.{name}' is now 'runs[0].{name}': train returns "
                                     "the runs over seeds"), stacklevel=2)
        return getattr(runs[0], name)


# ------------------------------------------------------------------ old forms
def _in_package(frame) -> bool:
    """Whether ``frame`` runs code of a module of odeflow."""
    name = frame.f_globals.get("__name__", "") if frame is not None else ""
    return name == "odeflow" or name.startswith("odeflow.")


def _caller_level(start: int) -> tuple[int, bool]:
    """``(stacklevel, in_package)`` of the first frame, from ``start`` frames above the
    caller of this function, that runs no code of this module (the entry points and
    :func:`old_forms` wrappers): the user's call."""
    level, frame = start, sys._getframe(start)
    while frame is not None and frame.f_globals.get("__name__") == __name__:
        frame, level = frame.f_back, level + 1
    return level, _in_package(frame)


def old_forms(positional=(), renames=None, translate=None, legacy=None, slots=None):
    """Decorator: a trainer takes its old forms for one release, with a RenamedWarning.

    Parameters
    ----------
    positional : sequence of str or None
        The old names of the positional arguments after ``data``; given positionally
        they are taken by these names. None: the positional arguments are the
        function's own (passed on as they are).
    renames : dict, optional
        Old keyword -> new one (:func:`odeflow.errors.renamed`).
    translate : dict, optional
        Old keyword -> ``f(value, options)`` returning the new keywords it stands for;
        its docstring completes the warning ``'old' is now ...``.
    legacy : (predicate, function, message), optional
        When ``predicate(args, options)``, the call is an old form that
        ``function(*args, **options)`` serves as before (warning ``message``).
    slots : dict, optional
        New parameter -> old keyword of ``translate`` whose positional slot it took:
        a real number given there positionally is that old keyword's value (with
        ``positional=None``; e.g. ``train_sgd(data, .., seq_len, 0.9)``, the old
        ``momentum``).

    A call from a module of odeflow is translated without a warning (as
    :func:`odeflow.errors.renamed` does); the wrapper keeps the signature.
    """
    renames, translate = dict(renames or {}), dict(translate or {})

    def decorate(function):
        @functools.wraps(function)
        def wrapper(*args, **options):
            level, own = _caller_level(2)
            if legacy is not None and legacy[0](args, options):
                if not own:
                    warnings.warn(RenamedWarning(legacy[2]), stacklevel=level)
                return legacy[1](*args, **options)
            if len(args) > 1 and positional is not None:
                args, options = _by_name(function, args, options, positional, level, own)
            if renames:
                options = renamed(options, renames, stacklevel=level + 1)
            for old in [name for name in options if name in translate]:
                if not own:
                    warnings.warn(RenamedWarning(f"{old!r} is now {translate[old].__doc__}"),
                                  stacklevel=level)
                new = translate[old](options.pop(old), options)
                clash = sorted(set(new) & set(options))
                if clash:
                    raise ValidationError(old, f"stands for {sorted(new)}; give only those "
                                          f"(not also {clash})")
                options.update(new)
            if slots:
                args = _numbers_in_slots(function, args, slots, translate, level, own)
            return function(*args, **options)
        wrapper.renamed = {**renames, **dict.fromkeys(translate, "")}
        return wrapper
    return decorate


def _by_name(function, args, options, positional, level, own):
    """``(args[:1], options)`` with the positional arguments after ``data`` named."""
    extra = args[1:]
    if len(extra) > len(positional):
        raise TypeError(f"{function.__name__}() takes data and keywords only "
                        f"({len(args)} positional arguments given)")
    named = dict(zip(positional, extra, strict=False))
    for name in named:
        if name in options:
            raise TypeError(f"{function.__name__}() got {name!r} twice")
    if not own:
        shown = ", ".join(f"{n}=" for n in named)
        warnings.warn(RenamedWarning(f"positional arguments after data are keywords now: "
                                     f"{function.__name__}(data, {shown}...)"),
                      stacklevel=level + 1)
    return args[:1], {**named, **options}


def _numbers_in_slots(function, args, slots, translate, level, own) -> tuple:
    """``args`` with a real number in a slot of ``slots`` (a new parameter, given
    positionally) translated as the old keyword whose place it took."""
    names = list(inspect.signature(function).parameters)
    args = list(args)
    for name, old in slots.items():
        i = names.index(name)
        value = args[i] if i < len(args) else None
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            if not own:
                warnings.warn(RenamedWarning(f"a number in the place of {name!r} is the old "
                                             f"{old!r}; {old!r} is now "
                                             f"{translate[old].__doc__}"), stacklevel=level + 1)
            args[i] = translate[old](value, {})[name]
    return tuple(args)


def momentum_optimizer(value, options: dict) -> dict:
    """'optimizer': momentum=mu is optimizer=odeflow.Momentum(mu), 0 plain SGD"""
    from odeflow.fields.optimizers import Momentum, Optimizer
    from odeflow.training.common import check_fraction

    if value is None or isinstance(value, Optimizer):
        return {"optimizer": value}
    mu = check_fraction(value, "momentum")
    return {"optimizer": Momentum(mu) if mu else None}


#: The old keywords of the Scan and Snap family's runs beside the flow (train_sgd,
#: sgd_ensemble, gap_table): ``momentum=`` and ``record_every=``.
SGD_OLD_FORMS = {"positional": None, "renames": {"record_every": "record"},
                 "translate": {"momentum": momentum_optimizer},
                 "slots": {"optimizer": "momentum"}}
