"""The one moto version the local patches (`moto_speedups`, `moto_threads`, `s3_events`) were
written against: they replace moto internals, which change between releases without notice.

The pin itself lives in one place, pyproject.toml (`moto[...]==X.Y.Z`); this module reads it from
the installed distribution's metadata and refuses to patch any other moto version.
"""

from __future__ import annotations

import functools
import re
from importlib.metadata import PackageNotFoundError, requires, version

DISTRIBUTION = "agent-knowledge"


class MotoVersionMismatch(RuntimeError):
    """The installed moto is not the version the local patches were written against."""


@functools.cache
def pinned_moto_version() -> str:
    """The exact version pyproject.toml pins moto to, as installed."""
    for requirement in requires(DISTRIBUTION) or ():
        match = re.match(r"moto(\[[^\]]*\])?\s*==\s*([0-9][0-9A-Za-z.]*)\s*(;|$)", requirement)
        if match:
            return match.group(2)
    raise MotoVersionMismatch(f"{DISTRIBUTION} does not pin moto to an exact version (pyproject.toml: moto==X.Y.Z)")


def require_pinned_moto() -> None:
    """Raise unless the installed moto is the pinned one (call before patching moto)."""
    try:
        installed = version("moto")
    except PackageNotFoundError:
        raise MotoVersionMismatch("moto is not installed; run `make venv`") from None
    pinned = pinned_moto_version()
    if installed != pinned:
        raise MotoVersionMismatch(
            f"moto {installed} is installed, but the local stack's patches were written against moto {pinned} "
            "(pyproject.toml); run `make venv` to install the pinned version"
        )
