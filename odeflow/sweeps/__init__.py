"""Parameter sweeps: one task over a grid of parameters, as an :class:`xarray.Dataset`.

- :mod:`odeflow.sweeps.tasks`: the task kinds by name (flows and training runs)
  and their parameters, gathered from the model families' declarations
  (:func:`~odeflow.sweeps.tasks.tasks`); :mod:`odeflow.sweeps.scan_snap` holds the
  Scan and Snap flows and runs, :mod:`odeflow.sweeps.induction` ``induction_flow``
  (the induction-head family) and its outputs; :mod:`odeflow.sweeps.models`
  holds a sweep's data model as plain data, for every family.
- :mod:`odeflow.sweeps.spec`: the checked sweep (grid, seeds, settings, data).
- :mod:`odeflow.sweeps.outputs`: the named outputs of one point (each task's set).
- :mod:`odeflow.sweeps.backends`: ``serial``, ``processes``, ``dask``.
- :mod:`odeflow.sweeps.store`: the incremental zarr store (netCDF on request);
  :mod:`odeflow.sweeps.journal` its journal of finished points,
  :mod:`odeflow.sweeps.integrity` its checksums and integrity record, and
  :mod:`odeflow.sweeps.reading` the checked reading of a store.
- :mod:`odeflow.sweeps.run`: :func:`sweep`, the entry point, which ``odeflow``
  re-exports as ``odeflow.sweep(task, grid, ...)``.

xarray, zarr and dask.distributed come with ``pip install "odeflow[sweep]"``;
they are imported only when a sweep runs.
"""

from odeflow.sweeps.outputs import VARIABLES
from odeflow.sweeps.run import sweep
from odeflow.sweeps.scan_snap import flow_task
from odeflow.sweeps.spec import SweepSpec, make_spec
from odeflow.sweeps.store import open_store
from odeflow.sweeps.tasks import TASKS, Parameter, TaskKind, register, tasks

__all__ = ["Parameter", "SweepSpec", "TASKS", "TaskKind", "VARIABLES",
           "flow_task", "make_spec", "open_store", "register", "sweep", "tasks"]
