"""Build a folder of documents for the folder walk and `doc put --dir` tests."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def write_folder(root: Path, files: Mapping[str, str | bytes], links: Mapping[str, Path] | None = None) -> Path:
    """Create `root` with `files` (path relative to `root` → text, written as UTF-8, or bytes) and
    symbolic `links` (path relative to `root` → target, a file or a folder). Returns `root`."""
    root.mkdir(parents=True, exist_ok=True)
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    for relative, target in (links or {}).items():
        (root / relative).symlink_to(target, target_is_directory=target.is_dir())
    return root
