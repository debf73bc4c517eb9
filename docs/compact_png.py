"""Keep the docs' PNG figures small: a 256-colour palette, no dithering.

matplotlib writes 32-bit RGBA; the figures are line art with few colours, so a
palette (maximum-coverage quantisation: on the docs' figures no channel of a
pixel moves by more than 20 of 255, and a colour map keeps its extremes) keeps
them visually the same at about a third of the bytes. The
``make_*.py`` scripts call :func:`compact_png` on every PNG they write; for a
figure written by ``odeflow reproduce ... --out docs/...``, run this script.
(The CSV files stay at full precision: the pages compare numbers that agree to
the last digit, such as the runs' and the flows' shared start.)

Usage: ``python docs/compact_png.py [FILE.png ...]`` (default: every PNG under
``docs/``). Compacting a compacted file changes nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent


def compact_png(path: Path) -> int:
    """Rewrite ``path`` as a 256-colour palette PNG in place; returns its size in bytes."""
    from PIL import Image

    path = Path(path)
    with Image.open(path) as image:
        if image.mode == "P":
            return path.stat().st_size
        palette = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MAXCOVERAGE,
                                                dither=Image.Dither.NONE)
    tmp = path.with_name(path.name + ".tmp")
    palette.save(tmp, format="PNG", optimize=True)
    tmp.replace(path)
    return path.stat().st_size


def main(argv=None) -> int:
    paths = [Path(p) for p in (sys.argv[1:] if argv is None else argv)] or sorted(
        p for p in DOCS.rglob("*.png") if "_build" not in p.parts)
    for path in paths:
        if path.suffix.lower() != ".png":
            sys.exit(f"compact_png: {path}: not a .png file")
        before = path.stat().st_size
        print(f"{path}: {before} -> {compact_png(path)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
