"""Every command and code block of README.md and docs/*.md runs as written.

One test case per block, with the id ``page.md:line`` of its opening fence
(see :mod:`tests.docs_blocks` for how each kind of block runs). A page's blocks
build on each other (a TOML file, then the command that reads it; one Python
namespace), so a case first runs the earlier blocks of its page that have not
run yet in this worker: under xdist a page may be split over workers.
"""

from __future__ import annotations

import pytest
from threadpoolctl import threadpool_limits

from tests.docs_blocks import (
    BLOCK_TIMEOUT,
    PAGES,
    PYTHON,
    SHOWN,
    TOML,
    Block,
    Page,
    read_blocks,
    time_limit,
)

#: At most this many blocks may be marked illustrative (not run).
MAX_ILLUSTRATIVE = 3

BLOCKS = {page: read_blocks(page) for page in PAGES}
RUNNABLE = [b for page in PAGES for b in BLOCKS[page] if b.runs]
_PAGES: dict[str, Page] = {}  # page -> its folder and namespace, in this worker


def _param(block: Block):
    marks = [pytest.mark.slow] if block.marker and block.marker[0] == "slow" else []
    return pytest.param(block, id=block.id, marks=marks)


def _runs_in_suite(block: Block) -> bool:
    return block.marker is None


@pytest.fixture(autouse=True)
def _one_thread_no_display(monkeypatch):
    """Figures to files only; BLAS on one thread (the suite runs one worker per core)."""
    monkeypatch.setenv("MPLBACKEND", "Agg")
    with threadpool_limits(1, user_api="blas"):
        yield


@pytest.mark.parametrize("block", [_param(b) for b in RUNNABLE])
def test_block_runs_as_written(block, tmp_path_factory, capsys):
    if block.marker and block.marker[0] == "illustrative":
        if block.lang in PYTHON:
            compile(block.text, block.id, "exec")  # still valid Python
        pytest.skip(f"illustrative: {block.marker[1]}")
    if block.marker:
        with capsys.disabled():
            print(f"\n{block.id} is slow: {block.marker[1]}")
    page = _PAGES.get(block.page)
    if page is None:
        folder = tmp_path_factory.mktemp(block.page.replace("/", "-"))
        page = _PAGES[block.page] = Page(folder)
    with time_limit(0 if block.marker else BLOCK_TIMEOUT, block.id):
        for earlier in BLOCKS[block.page]:
            if earlier.line >= block.line:
                break
            if earlier.runs and _runs_in_suite(earlier) and earlier.line not in page.done:
                page.run(earlier)
                page.done.add(earlier.line)
        notes = page.run(block)
    page.done.add(block.line)
    print("\n".join(notes))
    if block.lang not in PYTHON | TOML and not any(n.startswith("ran ") for n in notes):
        pytest.skip("; ".join(notes))  # a block of pip lines only


def test_every_block_is_known():
    """A block is code that runs (python, toml, a shell or console block with
    commands) or shown text (output, a synopsis, a Sphinx directive); a new
    language must be placed in one of the two."""
    unknown = [b.id + f" ({b.lang!r})" for page in PAGES for b in BLOCKS[page]
               if not b.runs and b.lang not in SHOWN | {"", "console"}]
    assert not unknown, f"blocks of an unknown language: {unknown}"


def test_markers_are_few_and_say_why():
    marked = [b for page in PAGES for b in BLOCKS[page] if b.marker]
    illustrative = [b.id for b in marked if b.marker[0] == "illustrative"]
    assert len(illustrative) <= MAX_ILLUSTRATIVE, illustrative
    assert all(b.runs for b in marked), [b.id for b in marked if not b.runs]
    assert all(len(b.marker[1].split()) >= 3 for b in marked), \
        [b.id for b in marked if len(b.marker[1].split()) < 3]


def test_reading_of_blocks():
    """The reader itself: console prompts and continuations, shell loops, markers."""
    from tests.docs_blocks import console_commands, shell_commands, toml_target

    text = "$ for x in 1 2; do\n>   odeflow run \\\n>     --t-end $x\n> done\nout\n$ ls"
    assert console_commands(text) == ["for x in 1 2; do odeflow run --t-end $x done", "ls"]
    assert shell_commands("# c\nodeflow a \\\n  --b 1\n\nodeflow c") == \
        ["odeflow a --b 1", "odeflow c"]
    assert toml_target(Block("p.md", 1, "toml", "# x.toml\na = 1")) == "x.toml"
    with pytest.raises(AssertionError, match="name its file"):
        toml_target(Block("p.md", 1, "toml", "a = 1"))


def test_a_block_that_hangs_fails_naming_itself():
    import time

    with pytest.raises(TimeoutError, match="page.md:3 ran over 1 s"):
        with time_limit(1, "page.md:3"):
            time.sleep(5)


def test_documented_dotted_paths_resolve_after_import_odeflow_alone():
    """The pages write ``import odeflow`` and then ``odeflow.analysis.measures...``,
    ``odeflow.fields.ExactFlow``: that holds in a fresh interpreter too, whatever
    an earlier block imported (the flat API loads its modules lazily)."""
    import subprocess
    import sys

    code = ("import odeflow; odeflow.analysis.measures.distinct_entropy; "
            "odeflow.fields.ExactFlow; odeflow.fields.induction; odeflow.io.atomic_write")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-1000:]
