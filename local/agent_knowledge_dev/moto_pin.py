"""The one moto version the local patches were written against (5.2.5): they replace moto
internals, which change between releases without notice. The patches, one module per service:
`moto_dynamodb` (`dynamodb.lock`, `dynamodb.untracked`, `dynamodb.serialize`, `dynamodb.query`,
`dynamodb.copy`), `moto_sqs` (`sqs.queue`, `sqs.untracked`) and `moto_s3` (`s3.events`, `s3.listing`,
`s3.ranges`);
the list, what each fixes and its test: docs/DESIGN.md, "moto's patches". Each installs through
`replace`, so that a test can run moto's own code beside it (`unpatched`) and the benchmark can
leave it out (`SKIP_VARIABLE`, bench/moto_patches.py). On an upgrade: re-read what each replaces
(`python -m bench.moto_patches count` lists it), run tests/integration/test_moto_*.py (most also
show the defect in moto's own code, so a fixed defect fails its test: drop that patch), and
re-measure (bench/README.md, "moto patches (issue 37)").

The pin itself lives in one place, pyproject.toml (`moto[...]==X.Y.Z`); this module reads it from
the installed distribution's metadata and refuses to patch any other moto version.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, requires, version
from typing import Any

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


# Bench-only (bench/moto_patches.py): the patches named here, comma-separated, are not installed,
# so that each one's effect can be measured. Never a product setting; unset, every patch installs.
SKIP_VARIABLE = "AGENT_KNOWLEDGE_BENCH_SKIP_MOTO_PATCHES"
_MISSING = object()
# (patch, owner, attribute) → what the owner held before the patch replaced it.
_originals: dict[tuple[str, Any, str], Any] = {}


class Untracked(list[Any]):
    """A moto model class's `instances_tracked` (kept for moto's dashboard) that keeps nothing."""

    def append(self, item: Any) -> None:
        pass


def skipped(patch: str) -> bool:
    """Whether the benchmark asked to leave `patch` (e.g. "dynamodb.query") uninstalled."""
    return patch in {name.strip() for name in os.environ.get(SKIP_VARIABLE, "").split(",")}


def replace(patch: str, owner: Any, name: str, replacement: Any) -> None:
    """`owner.name = replacement` (a class or module of moto) unless the benchmark skips `patch`;
    the original is remembered for `unpatched`. Replacing again (after moto's reset) is allowed."""
    if skipped(patch):
        return
    _originals.setdefault((patch, owner, name), vars(owner).get(name, _MISSING))
    setattr(owner, name, replacement)


@contextlib.contextmanager
def unpatched(*patches: str) -> Iterator[None]:
    """moto's own code for `patches` while the block runs (the tests compare answers with it)."""
    chosen = [(key, original) for key, original in _originals.items() if key[0] in patches]
    if len(chosen) == 0 or {key[0] for key, _ in chosen} != set(patches):
        raise ValueError(f"not installed: {sorted(set(patches) - {key[0] for key, _ in chosen})}")
    current = [(key, vars(key[1])[key[2]]) for key, _ in chosen]
    for (_, owner, name), original in chosen:
        if original is _MISSING:
            delattr(owner, name)
        else:
            setattr(owner, name, original)
    try:
        yield
    finally:
        for (_, owner, name), value in current:
            setattr(owner, name, value)
