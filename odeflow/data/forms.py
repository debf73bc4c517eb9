"""The TOML form and the presets of a data model, shared by every model family.

:class:`TomlForm` gives a data model class with ``to_dict``/``from_dict`` its
TOML text and file round trip and ``preset(name)``; the Scan and Snap
:class:`~odeflow.data.DataModel` and the induction-head
:class:`~odeflow.data.induction.InductionData` both derive from it.

:func:`data_type` finds the data model class of a configuration file's
``family = "..."`` key in the family registry (:mod:`odeflow.families`), so
the reader never branches on the family.
"""

from __future__ import annotations

from collections.abc import Mapping

from odeflow.data.checks import parse_toml
from odeflow.errors import ValidationError


class TomlForm:
    """``to_toml``/``from_toml`` (text and files) and ``preset`` over ``to_dict``/``from_dict``.

    A subclass defines ``to_dict()``, ``from_dict(d)`` (its TOML schema),
    :meth:`preset_table` (name -> factory) and :attr:`toml_marker`, a key of its
    top level (a document without it whose ``[data]`` table has it is read
    from that table, as in a run configuration).
    """

    #: A top-level key of the class's TOML schema.
    toml_marker = "vocab_size"
    #: Every top-level key of the class's TOML schema (a run configuration allows these).
    toml_keys: tuple = ()
    #: Name of the model family the class describes (the ``family`` key of a config).
    family = ""

    @classmethod
    def preset_table(cls) -> Mapping:
        """Name -> factory of the built-in data models of this class."""
        return {}

    def to_toml_string(self) -> str:
        """TOML text; reading it back with :meth:`from_toml_string` is exact."""
        import tomli_w

        return tomli_w.dumps(self.to_dict())

    @classmethod
    def from_toml_string(cls, text: str):
        """Parse TOML text (schema of ``from_dict``; also inside a ``[data]`` table)."""
        d = parse_toml(text, "toml")
        if "data" in d and isinstance(d["data"], Mapping) and cls.toml_marker not in d:
            d = d["data"]
        if "family" in d:  # a configuration file's family key: it must be this class's
            d = dict(d)
            family = d.pop("family")
            if family != cls.family:
                raise ValidationError("family", f"must be {cls.family!r} for a "
                                      f"{cls.__name__}, got {family!r:.40}")
        return cls.from_dict(d)

    def to_toml(self, path) -> None:
        """Write the data model as TOML, atomically (temp file + rename)."""
        from odeflow.io import atomic_write_text

        atomic_write_text(path, self.to_toml_string())

    @classmethod
    def from_toml(cls, path):
        """Read a data model from a TOML file (schema of ``from_dict``)."""
        from odeflow.io import read_text

        return cls.from_toml_string(read_text(path, "config"))

    @classmethod
    def preset(cls, name: str):
        """A built-in data model by name (see :meth:`preset_table`)."""
        table = cls.preset_table()
        try:
            factory = table[name]
        except (KeyError, TypeError):
            raise ValidationError(
                "preset", f"unknown preset {name!r}; choose one of {sorted(table)}") from None
        return factory()


def data_type(family, field_name: str = "family") -> type:
    """The data model class of the model family ``family`` (:mod:`odeflow.families`), or a
    ValidationError naming ``field_name``."""
    from odeflow.families import family_named

    return family_named(family, field_name).data_class


def data_types() -> dict[str, type]:
    """Family name -> data model class, over every registered family (loads each class)."""
    from odeflow.families import families

    return {name: family.data_class for name, family in families().items()}
