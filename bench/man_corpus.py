"""A folder of real text documents, available offline: this machine's manual pages rendered to text.

Each page under /usr/share/man/man{1,2,3,5,7,8} (gzipped roff) is rendered with `groff -man -Tutf8`
(no overstriking or escape sequences: plain text, as `man -P cat` shows it) to
`<section>/<name>.txt`. Pages that only include another (`.so`), that render to less than
`MIN_BYTES` or that groff cannot render are left out; a name seen in an earlier section is too.
Pages are taken in a stable order (section, then name), so the first N are the same on every run
of the same machine.

Rendering costs ~50 ms a page, so the rendered pages are cached (`CACHE`, outside the repository)
and a folder of N documents is hard links (or copies) of the first N of them.
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

MAN_ROOT = Path("/usr/share/man")
SECTIONS = ("1", "8", "5", "7", "2", "3")
MIN_BYTES = 800
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "agent-knowledge-bench" / "man"


class NoManualPages(RuntimeError):
    """groff or the manual pages are not installed."""


def _sources() -> list[Path]:
    found, seen = [], set()
    for section in SECTIONS:
        for path in sorted((MAN_ROOT / f"man{section}").glob("*.gz")):
            name = path.name.removesuffix(".gz")
            if name not in seen:
                seen.add(name)
                found.append(path)
    return found


def _render(source: Path) -> bytes | None:
    try:
        roff = gzip.decompress(source.read_bytes())
    except (OSError, EOFError):
        return None
    if roff.lstrip().startswith(b".so "):
        return None
    try:
        rendered = subprocess.run(
            ["groff", "-man", "-Tutf8", "-P-cbou", "-rLL=80n"],
            input=roff,
            capture_output=True,
            timeout=30,
            check=False,
            env={**os.environ, "LC_ALL": "C.UTF-8"},
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    try:
        rendered.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return rendered if len(rendered) >= MIN_BYTES else None


def _cached(source: Path) -> Path | None:
    section = source.parent.name.removeprefix("man")
    target = CACHE / section / (source.name.removesuffix(".gz") + ".txt")
    missing = CACHE / section / (source.name.removesuffix(".gz") + ".skip")
    if target.exists():
        return target
    if missing.exists():
        return None
    rendered = _render(source)
    target.parent.mkdir(parents=True, exist_ok=True)
    if rendered is None:
        missing.touch()
        return None
    temporary = target.with_suffix(".tmp")
    temporary.write_bytes(rendered)
    temporary.replace(target)
    return target


def rendered_pages(count: int, workers: int | None = None) -> list[Path]:
    """The first `count` renderable pages, rendered (or from the cache)."""
    if shutil.which("groff") is None or not MAN_ROOT.is_dir():
        raise NoManualPages("the man-page corpus needs groff and /usr/share/man (apt-get install groff man-db)")
    pages: list[Path] = []
    sources = _sources()
    batch = max(count, 64)
    with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 2) as pool:
        for start in range(0, len(sources), batch):
            pages.extend(page for page in pool.map(_cached, sources[start : start + batch]) if page is not None)
            if len(pages) >= count:
                return pages[:count]
    raise NoManualPages(f"only {len(pages)} manual pages render on this machine, {count} asked for")


def write_folder(folder: Path, count: int) -> int:
    """`count` rendered manual pages as `<section>/<name>.txt` below `folder`; their total bytes."""
    total = 0
    for page in rendered_pages(count):
        target = folder / page.parent.name / page.name
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(page, target)
        except OSError:
            shutil.copyfile(page, target)
        total += target.stat().st_size
    return total
