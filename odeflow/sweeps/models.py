"""The data model of a sweep as plain data, for every model family.

A sweep's spec holds its data model as a dict (:func:`model_to_dict`): the
model's ``to_dict()``, with a ``family`` key for every family but Scan and
Snap (whose stores were written without one, and still open). It is rebuilt
through the data layer's registry of data model classes
(:func:`odeflow.data.forms.data_type`, :func:`model_from_dict`); a preset is
found in whichever family has it (:func:`odeflow.families.find_preset`).

A task that takes *model fields* (``TaskKind.model_fields``) sweeps numbers of
the model's dict form by dotted name, ``prior.alpha`` or ``init.w_plus``
(:func:`model_field_names`); each point's model is the dict with its values
put in, rebuilt by ``from_dict`` (:func:`edited_model`), so that the data
model's own checks name the key.
"""

from __future__ import annotations

import numbers

from odeflow.data.config import DEFAULT_FAMILY
from odeflow.data.forms import data_type
from odeflow.errors import ValidationError
from odeflow.families import family_of, find_preset


def model_to_dict(model) -> dict:
    """``model.to_dict()``, with ``family`` unless the model is Scan and Snap's."""
    out = model.to_dict()
    family = family_of(model).name
    return out if family == DEFAULT_FAMILY else {"family": family, **out}


def model_from_dict(d: dict):
    """The data model of a :func:`model_to_dict` dict, through its family's class."""
    d = dict(d)
    family = d.pop("family", DEFAULT_FAMILY)
    return data_type(family, "data.family").from_dict(d)


def preset_model(name, field: str = "preset"):
    """The built-in data model ``name`` of any family; a ValidationError names ``field``."""
    try:
        return find_preset(name)
    except ValidationError as exc:
        raise ValidationError(field, exc.reason) from None


def model_field_names(model) -> list[str]:
    """The dotted names of the numbers one level down in ``model.to_dict()``
    (``prior.alpha``, ``init.w_plus``, ...): the model fields a sweep may set."""
    out = []
    for key, table in model.to_dict().items():
        if isinstance(table, dict):
            out += [f"{key}.{name}" for name, value in table.items()
                    if isinstance(value, numbers.Real) and not isinstance(value, bool)]
    return out


def edited_model(model, edits: dict, fields: dict | None = None):
    """``model`` with the dotted fields ``edits`` (``{"prior.alpha": 0.5}``) set.

    The edited dict is rebuilt by the model's ``from_dict``; its ValidationError
    names ``fields[name]`` (e.g. ``grid.prior.alpha[1]``) when given for the key
    it names, else the key itself.
    """
    if not edits:
        return model
    d = model.to_dict()
    for name, value in edits.items():
        table, key = name.split(".", 1)
        d[table] = {**d[table], key: value}
    try:
        return type(model).from_dict(d)
    except ValidationError as exc:
        where = (fields or {}).get(exc.field, exc.field)
        raise ValidationError(where, exc.reason) from None
