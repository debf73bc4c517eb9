"""The figures by name, for ``odeflow plot`` and the docs gallery.

Each entry names a plot function and the common options it understands
(``data``, ``eta_y``, ``eta_z``, ``t_end``, ``flow``); :func:`make_figure`
checks them and hands them to the function. Each model family declares its
figures (:mod:`odeflow.families`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from odeflow.errors import ValidationError

#: The options :func:`make_figure` knows.
COMMON_OPTIONS = ("data", "eta_y", "eta_z", "t_end", "flow")


@dataclass(frozen=True)
class FigureSpec:
    """A named figure: where its plot function lives, a summary and the options it takes.

    ``target`` is ``"module:function"``; the module (and matplotlib) is
    imported only when :attr:`function` is used, so listing the figures stays
    cheap for the command line. The function takes the common options it
    ``accepts`` as keyword arguments.
    """

    name: str
    target: str
    summary: str
    accepts: tuple[str, ...]

    @property
    def function(self) -> Callable:
        """The plot function."""
        from odeflow.families import load

        return load(self.target)


def family_figures() -> dict[str, FigureSpec]:
    """The figures every registered model family declares (:mod:`odeflow.families`)."""
    from odeflow.families import families

    return {name: FigureSpec(name, target, summary, tuple(accepts))
            for family in families().values()
            for name, target, summary, accepts in family.figures}


class Figures(Mapping):
    """The figures by name over every registered family, read afresh on each use (a
    family registered later is included)."""

    def __getitem__(self, name) -> FigureSpec:
        return family_figures()[name]

    def __iter__(self):
        return iter(family_figures())

    def __len__(self) -> int:
        return len(family_figures())


#: The figures by name (:class:`Figures`).
FIGURES = Figures()


def figure_arguments(name: str, **options) -> dict:
    """Keyword arguments of figure ``name``'s function for the common ``options``.

    Options that are ``None`` are left to the function's defaults; an option
    the figure does not take raises a :class:`~odeflow.ValidationError`.
    """
    spec = _spec(name)
    given = {k: v for k, v in options.items() if v is not None}
    for key in given:
        if key not in COMMON_OPTIONS:
            raise ValidationError(key, f"unknown option; known: {list(COMMON_OPTIONS)}")
        if key not in spec.accepts:
            raise ValidationError(key, f"figure {name!r} does not take it; it takes "
                                  f"{list(spec.accepts)}")
    return given


def make_figure(name: str, **options):
    """Draw figure ``name`` (a key of :data:`FIGURES`) with the common ``options``.

    Returns
    -------
    matplotlib.figure.Figure
    """
    return _spec(name).function(**figure_arguments(name, **options))


def _spec(name: str) -> FigureSpec:
    figures = family_figures()
    if not isinstance(name, str) or name not in figures:
        raise ValidationError("name", f"unknown figure {name!r}; choose one of "
                              f"{sorted(figures)}")
    return figures[name]
