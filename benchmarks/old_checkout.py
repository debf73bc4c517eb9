"""The previous implementation, for benchmarks that measure old and new side by side.

``--old`` takes a folder holding a checkout, or a git revision of this
repository; a revision is exported (``git archive``) into a temporary folder
that is removed at exit. The default, :data:`DEFAULT_OLD`, is the last commit
with the dense (K, L) fields, before the per-class supports of the scale work.
"""

from __future__ import annotations

import atexit
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

#: Last commit before the per-class support representation (242d26a~1).
DEFAULT_OLD = "15b421f"
ROOT = Path(__file__).resolve().parents[1]


def old_checkout(spec: str) -> str:
    """A folder with the old code: ``spec`` itself if it is a folder, else an export of it."""
    if Path(spec).is_dir():
        return spec
    folder = Path(tempfile.mkdtemp(prefix=f"odeflow-{spec}-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    archive = folder / "src.tar"
    with open(archive, "wb") as fh:
        subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", spec], stdout=fh,
                       check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(folder, filter="data")
    archive.unlink()
    return str(folder)
