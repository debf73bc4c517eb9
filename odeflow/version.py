"""odeflow's version (one place; setup.cfg reads it with ``attr:``)."""

__version__ = "0.1.0"
