"""Render a ``report.html`` in headless Chromium into a PNG: the page as a person sees it, and
a check that it opens offline.

    python benchmarks/report_screenshot.py RUN_DIR/report.html OUT.png [--width 1280]
        [--height 2400] [--chromium chromium] [--colors 256]

Chromium (Debian's ``chromium`` package: ``apt-get install -y chromium``) runs with every
network request sent to a proxy that is not there, so the screenshot shows only what the file
itself holds; the script also refuses a page that names an ``http(s)://`` source or a
``<script>``. The PNG is quantised to ``--colors`` colours (Pillow, which matplotlib brings)
to keep it small for the repository; ``--colors 0`` keeps it as Chromium wrote it.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FETCHING = re.compile(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", re.IGNORECASE)


def offline_problems(page: str) -> list[str]:
    """What in ``page`` would fetch or run something: remote sources, scripts."""
    problems = [m.group(0) for m in FETCHING.finditer(page)]
    if re.search(r"<script\b", page, re.IGNORECASE):
        problems.append("<script>")
    if re.search(r"@import|url\(\s*['\"]?https?:", page, re.IGNORECASE):
        problems.append("a remote stylesheet")
    return problems


def screenshot(page: Path, out: Path, width: int, height: int, chromium: str) -> None:
    """Chromium's screenshot of ``page`` at ``width`` x ``height`` into ``out``."""
    binary = shutil.which(chromium)
    if binary is None:
        sys.exit(f"no {chromium} on PATH: apt-get install -y chromium")
    with tempfile.TemporaryDirectory(prefix="report-shot-") as profile:
        command = [
            binary,
            "--headless",
            "--no-sandbox",  # root in a container has no user namespace for it
            "--disable-gpu",
            "--hide-scrollbars",
            "--proxy-server=127.0.0.1:9",  # nothing listens there: any fetch fails
            "--no-first-run",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            f"--screenshot={out.resolve()}",
            page.resolve().as_uri(),
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0 or not out.is_file():
        sys.exit(f"chromium failed ({done.returncode}):\n{done.stderr[-2000:]}")


def quantise(path: Path, colors: int) -> None:
    from PIL import Image

    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=colors, dither=Image.Dither.NONE)
    small.save(path, optimize=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("page", type=Path, help="a report.html")
    parser.add_argument("out", type=Path, help="the PNG to write")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=2400)
    parser.add_argument("--chromium", default="chromium")
    parser.add_argument("--colors", type=int, default=256)
    args = parser.parse_args()
    problems = offline_problems(args.page.read_text())
    if problems:
        print(f"{args.page} does not stand alone: {', '.join(problems[:5])}", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    screenshot(args.page, args.out, args.width, args.height, args.chromium)
    if args.colors:
        quantise(args.out, args.colors)
    print(f"wrote {args.out} ({args.out.stat().st_size // 1024} KB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
