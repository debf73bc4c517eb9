"""Helpers shared by the command-line tests: run the CLI in-process, read its error line,
and make odeflow's writer fail as an unwritable folder does (root writes anywhere)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess

from odeflow.cli import main
from odeflow.io import TEMP_MARK


def cli(capsys, *argv):
    """Run ``odeflow ARGV`` in-process: ``(exit code, stdout, stderr)``; never a traceback."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def cli_in(folder, *argv) -> subprocess.CompletedProcess:
    """Run ``odeflow ARGV`` in-process with ``folder`` as the working folder, without
    pytest's capture: its exit code, stdout and stderr as a finished process has them."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(folder), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def one_error_line(err: str) -> str:
    """The one non-empty stderr line (asserting there is exactly one)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


def deny_temp_files(monkeypatch) -> None:
    """Every temporary file of odeflow's writer fails to open with EACCES, as in a
    read-only folder (the tests run as root, for whom chmod does not deny writes)."""
    real_open = os.open

    def denied(path, flags, *args, **kwargs):
        if TEMP_MARK in os.fspath(path):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", denied)
