"""Where a running `agent-knowledge serve` announces itself, so other commands can find it.

`serve` holds an exclusive `flock` on `<state dir>/serve.lock` for its whole life and writes
`<state dir>/serve.json` (pid, URLs, the stack's environment) once it is ready. The lock, not the
pid file, is the truth: the kernel releases it when the process dies, so a crashed `serve` never
leaves a stale "already running". The state dir is `.local-state/` at the project root (gitignored),
or `$AGENT_KNOWLEDGE_STATE_DIR` (the tests use a temporary one).

Nothing else is kept here: the stack itself lives in the memory of the moto server inside `serve`.
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

# The project root (as `template.PROJECT_ROOT`, without importing the template's YAML reader:
# every CLI run reads the state dir).
PROJECT_ROOT = Path(__file__).resolve().parents[2]

STATE_DIR_ENV = "AGENT_KNOWLEDGE_STATE_DIR"


def state_dir() -> Path:
    return Path(os.environ.get(STATE_DIR_ENV) or PROJECT_ROOT / ".local-state")


@dataclass(frozen=True)
class ServerInfo:
    pid: int
    api_url: str
    moto_endpoint: str
    environment: dict[str, str]
    started_at: float


class AlreadyRunning(Exception):
    def __init__(self, info: ServerInfo | None) -> None:
        self.info = info
        super().__init__("agent-knowledge serve is already running")


def _info_path() -> Path:
    return state_dir() / "serve.json"


def _lock_path() -> Path:
    return state_dir() / "serve.lock"


def _read_info() -> ServerInfo | None:
    try:
        return ServerInfo(**json.loads(_info_path().read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def _try_lock(path: Path) -> IO[str] | None:
    """An open handle holding the lock, or None when another process holds it."""
    handle = path.open("a+", encoding="utf-8")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


class ServeLock:
    """Held by `serve` from start to exit; at most one `serve` per state dir."""

    def __init__(self) -> None:
        self._handle: IO[str] | None = None

    def acquire(self) -> None:
        state_dir().mkdir(parents=True, exist_ok=True)
        handle = _try_lock(_lock_path())
        if handle is None:
            raise AlreadyRunning(_read_info())
        self._handle = handle

    def publish(self, info: ServerInfo) -> None:
        temporary = _info_path().with_suffix(".tmp")
        temporary.write_text(json.dumps(asdict(info), indent=2), encoding="utf-8")
        temporary.replace(_info_path())

    def release(self) -> None:
        if self._handle is None:
            return
        _info_path().unlink(missing_ok=True)
        fcntl.flock(self._handle, fcntl.LOCK_UN)
        self._handle.close()
        self._handle = None


def running_server() -> ServerInfo | None:
    """The running `serve`, or None. A leftover serve.json without a lock holder is ignored."""
    lock = _lock_path()
    if not lock.exists():
        return None
    handle = _try_lock(lock)
    if handle is not None:  # nobody holds it: no serve is running
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()
        return None
    return _read_info()
