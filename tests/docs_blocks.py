"""Read the fenced code blocks of the README and the docs, and run them as a reader would.

Used by ``tests/test_docs_examples.py``. A page's blocks are run in order, in one
working folder: ``python`` blocks in one namespace, ``toml`` blocks written to the
file their first line names (``# name.toml``), command blocks line by line
(``bash``/``sh``/``shell``: every line is a command; ``console``, or a block without
a language, whose lines start with ``$ ``: those lines, with ``> `` continuations, the
rest being shown output). ``odeflow ...`` and ``python -m odeflow ...`` run
in-process through :func:`odeflow.cli.main`; other ``python`` commands in a
subprocess; ``pip install`` is skipped (the suite runs on the installed package).

A comment on the line before a block's fence changes how it runs:
``<!-- illustrative: REASON -->`` (not run) and ``<!-- slow: REASON -->`` (run under
``-m slow`` only).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
#: The pages whose blocks are run, relative to the repository.
PAGES = ["README.md"] + sorted(p.relative_to(REPO).as_posix()
                               for p in (REPO / "docs").glob("*.md"))
#: Block languages that are run, and those that are shown only (output, synopses,
#: Sphinx directives); a language in neither set fails the suite.
PYTHON, TOML = {"python"}, {"toml"}
SHELL, CONSOLE = {"bash", "sh", "shell"}, {"console", ""}
SHOWN = {"text", "{eval-rst}", "{figure}", "{image}", "{toctree}"}
#: Commands whose lines are not run in the suite, and why.
SKIPPED = {"pip": "pip install: the suite runs on the installed package"}
#: Paths of the repository a documented ``python`` command may name, as it is run
#: from the repository's root (linked into the page's working folder; ``docs``: a
#: folder of copies of its scripts, so that what they write stays there).
REPO_PATHS = {"derivations": "link", "benchmarks": "link", "tests": "link",
              "setup.cfg": "link", "pyproject.toml": "link", "docs": "copy-scripts"}
#: Seconds a ``python`` subprocess may take.
SUBPROCESS_TIMEOUT = 3600
#: Seconds a block of the default suite may take (with what runs before it on its
#: page) before it fails, naming itself, instead of stalling the suite.
BLOCK_TIMEOUT = 300

_FENCE = re.compile(r"^(`{3,}|~{3,})\s*([^\s`]*)")
_MARKER = re.compile(r"^<!--\s*(illustrative|slow)\s*:\s*(.+?)\s*-->$")


@dataclass(frozen=True)
class Block:
    """One fenced block: its page, the line of its opening fence (1-based), its
    language (``""`` if none), its text, and a marker ``(kind, reason)`` or None."""

    page: str
    line: int
    lang: str
    text: str
    marker: tuple[str, str] | None = None

    @property
    def id(self) -> str:
        return f"{Path(self.page).name}:{self.line}"

    @property
    def runs(self) -> bool:
        """Whether the block is code to run (and not output, a synopsis or a directive)."""
        if self.lang in PYTHON | TOML | SHELL:
            return True
        return self.lang in CONSOLE and bool(console_commands(self.text))


def read_blocks(page: str) -> list[Block]:
    """The fenced blocks of ``page`` (a path relative to the repository), in order."""
    lines = (REPO / page).read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        match = _FENCE.match(lines[i].strip())
        if not match:
            i += 1
            continue
        fence, start = match.group(1), i
        end = next((j for j in range(i + 1, len(lines))
                    if lines[j].strip().startswith(fence)), len(lines))
        before = next((lines[j].strip() for j in range(start - 1, -1, -1)
                       if lines[j].strip()), "")
        mark = _MARKER.match(before)
        blocks.append(Block(page, start + 1, match.group(2), "\n".join(lines[i + 1:end]),
                            (mark.group(1), mark.group(2)) if mark else None))
        i = end + 1
    return blocks


def console_commands(text: str) -> list[str]:
    """The commands of a console transcript: ``$ `` lines joined with their ``> ``
    and backslash continuations; every other line is output."""
    commands, current = [], None
    for raw in text.splitlines():
        if raw.startswith("$ "):
            current = raw[2:]
            commands.append(current)
        elif current is not None and (raw.startswith("> ") or commands[-1].endswith("\\")):
            commands[-1] = _join(commands[-1], raw[2:] if raw.startswith("> ") else raw)
        else:
            current = None
    return [c for c in commands if c.strip()]


def shell_commands(text: str) -> list[str]:
    """The commands of a shell block: each line, joined across backslash continuations."""
    commands: list[str] = []
    for raw in text.splitlines():
        if commands and commands[-1].endswith("\\"):
            commands[-1] = _join(commands[-1], raw)
        elif raw.strip() and not raw.lstrip().startswith("#"):
            commands.append(raw)
    return commands


def _join(head: str, tail: str) -> str:
    head = head[:-1] if head.endswith("\\") else head
    return f"{head.rstrip()} {tail.strip()}"


def toml_target(block: Block) -> str:
    """The file a TOML block is saved as: its first line, ``# NAME.toml``."""
    first = block.text.splitlines()[0].strip() if block.text.strip() else ""
    match = re.fullmatch(r"#\s*(\S+\.toml)", first)
    if not match:
        raise AssertionError(f"{block.id}: a toml block's first line must name its file "
                             f"(# name.toml), got {first!r}")
    return match.group(1)


class Page:
    """A page's working folder and Python namespace, and which of its blocks have run."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.namespace: dict = {"__name__": "__docs__"}
        self.done: set[int] = set()
        for name, how in REPO_PATHS.items():
            if how == "link":
                (folder / name).symlink_to(REPO / name)
            else:  # the folder's scripts, so that what they write stays here
                (folder / name).mkdir()
                for script in (REPO / name).glob("*.py"):
                    shutil.copy(script, folder / name / script.name)

    def run(self, block: Block) -> list[str]:
        """Run one block in this page's folder; a note per command: ``ran ...`` or
        ``skipped ...: why``."""
        with _chdir(self.folder):
            if block.lang in PYTHON:
                code = compile(block.text, f"{block.page}:{block.line}", "exec")
                exec(code, self.namespace)  # noqa: S102 - the documented example itself
                _close_figures()
                return []
            if block.lang in TOML:
                return _write_toml(block)
            lines = (shell_commands(block.text) if block.lang in SHELL
                     else console_commands(block.text))
            notes = []
            for line in lines:
                notes += run_line(line, self.folder)
            return notes


def _write_toml(block: Block) -> list[str]:
    """Save a TOML block as its file; a data-model config (no ``[sweep]``) must load."""
    target = Path(toml_target(block))
    target.write_text(block.text + "\n", encoding="utf-8")
    if "sweep" not in tomllib.loads(block.text):
        from odeflow.data import load_config

        load_config(str(target))
    return []


@contextlib.contextmanager
def _chdir(folder: Path):
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


@contextlib.contextmanager
def time_limit(seconds: int, what: str):
    """Raise ``TimeoutError`` naming ``what`` after ``seconds`` (POSIX main thread only;
    elsewhere, or with ``seconds = 0``, no limit)."""
    usable = (seconds > 0 and hasattr(signal, "SIGALRM")
              and threading.current_thread() is threading.main_thread())
    if not usable:
        yield
        return

    def expire(signum, frame):
        raise TimeoutError(f"{what} ran over {seconds} s")

    before = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)


def _close_figures() -> None:
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")


_FOR = re.compile(r"^for (\w+) in ([^;]+); do (.+?);? done$")


def run_line(line: str, folder: Path) -> list[str]:
    """Run one shell line (commands joined by ``&&``, or a ``for`` loop over words)."""
    loop = _FOR.match(line.strip())
    if loop:
        name, words, body = loop.groups()
        notes = []
        for word in shlex.split(words):
            notes += run_line(body.replace(f"${name}", word).replace(f"${{{name}}}", word),
                              folder)
        return notes
    tokens = shlex.split(line, comments=True)
    notes, command = [], []
    for token in tokens + ["&&"]:
        if token != "&&":
            command.append(token)
            continue
        if command:
            notes += run_command(command, folder)
        command = []
    return notes


def run_command(tokens: list[str], folder: Path) -> list[str]:
    """Run one command (``NAME=VALUE`` prefixes set its environment); assert exit 0."""
    env = {}
    while tokens and re.fullmatch(r"[A-Za-z_]\w*=.*", tokens[0]):
        key, value = tokens.pop(0).split("=", 1)
        env[key] = value.replace("$PWD", str(folder)).replace("${PWD}", str(folder))
    program, args = tokens[0], tokens[1:]
    if program in SKIPPED:
        return [f"skipped {shlex.join(tokens)!r}: {SKIPPED[program]}"]
    if program == "odeflow" or (program == "python" and args[:2] == ["-m", "odeflow"]):
        argv = args if program == "odeflow" else args[2:]
        code = _odeflow(argv)
        assert code == 0, f"`{shlex.join(tokens)}` exited {code}"
        return [f"ran {shlex.join(tokens)!r} in-process"]
    if program == "python":
        full = dict(os.environ)
        full.update(env)
        full["PYTHONPATH"] = os.pathsep.join(
            p for p in (full.get("PYTHONPATH", ""), str(folder)) if p)
        done = subprocess.run([sys.executable, *args], cwd=folder, env=full,
                              capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT)
        assert done.returncode == 0, (f"`{shlex.join(tokens)}` exited {done.returncode}:\n"
                                      f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        return [f"ran {shlex.join(tokens)!r}"]
    raise AssertionError(f"the docs test cannot run `{program}`: mark its block "
                         "<!-- illustrative: REASON --> or run it otherwise")


def _odeflow(argv: list[str]) -> int:
    from odeflow.cli import main

    try:
        return int(main(argv) or 0)
    except SystemExit as exc:  # argparse's usage errors
        return int(exc.code or 0)
