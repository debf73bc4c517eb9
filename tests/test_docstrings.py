"""Docstrings, comments and pages cite what a user can read: the papers or the docs.

"spec section N" pointed to the project's internal mathematical contract, which
does not ship; a citation names the paper's equation, lemma, theorem, section or
figure (Scan and Snap: Tian et al. 2023; induction heads: Chen, Sheen, Wang,
Yang 2024) or a page under ``docs/``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: The phrase, also when a line break or several spaces split it.
INTERNAL_REFERENCE = re.compile(r"\bspec\s+sections?\b", re.IGNORECASE)
#: Files read under ``docs/`` (sources, not generated figures or data).
DOC_SUFFIXES = (".md", ".rst", ".py", ".txt")


def internal_references(paths) -> list[str]:
    """``path:line: text`` of every internal reference in ``paths``."""
    hits = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        for match in INTERNAL_REFERENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            shown = " ".join(match.group().split())
            hits.append(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:"
                        f"{line}: {shown!r}")
    return hits


def package_files() -> list[Path]:
    return sorted((ROOT / "odeflow").rglob("*.py"))


def page_files() -> list[Path]:
    docs = [p for p in (ROOT / "docs").rglob("*")
            if p.is_file() and p.suffix in DOC_SUFFIXES and "_build" not in p.parts]
    return [ROOT / "README.md", *sorted(docs)]


def test_the_package_cites_papers_or_docs_not_the_internal_spec():
    files = package_files()
    assert len(files) > 50, "the package's modules were not found"
    hits = internal_references(files)
    assert not hits, "cite the paper or a docs page instead:\n" + "\n".join(hits)


def test_readme_and_docs_cite_papers_or_docs_not_the_internal_spec():
    files = page_files()
    assert (ROOT / "README.md") in files and len(files) > 10
    hits = internal_references(files)
    assert not hits, "cite the paper or a docs page instead:\n" + "\n".join(hits)


@pytest.mark.parametrize("text", ["(spec section 6)", "Spec section 10: the flow",
                                  "(spec\n    section 7)", "spec sections 6 and 8"])
def test_the_scan_finds_a_planted_reference(tmp_path, text):
    planted = tmp_path / "planted.py"
    planted.write_text(f'"""Docstring.\n\n{text}\n"""\n', encoding="utf-8")
    assert len(internal_references([planted])) == 1


def test_the_scan_passes_citations_of_papers_and_pages(tmp_path):
    clean = tmp_path / "clean.py"
    clean.write_text('"""Level E (Lemma 1, Eqns 3-4, 7; ``docs/model.md``); the sweep\'s spec.\n'
                     '\nSec. 6 of the paper, the spec of a sweep store."""\n', encoding="utf-8")
    assert internal_references([clean]) == []
