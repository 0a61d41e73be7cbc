"""SnapStart's runtime hooks for the protocol functions (template parameter `SnapStart`).

With `SnapStart=PublishedVersions` Lambda runs a function's init once per published version and
snapshots the initialized container; new containers resume from that snapshot instead of
importing again (docs/DESIGN.md §10, "SnapStart"). What the snapshot holds is what init made:
the imported modules (botocore, pydantic, Powertools; tantivy and numpy only where a handler
imports them), the settings, and the AWS clients `create_clients_at_init` created — with no
connection opened and no call made. Init handles no request, so no bearer, no document, no index
file and no server token is in it; `before_snapshot` forgets the server-token codec anyway, should
anything have built it.

A container resumed from the snapshot shares that memory with every other one, so
`after_restore`, before its first request:

- re-seeds `random` from the OS (the snapshot's generator state is everybody's; `secrets`,
  `uuid4` and the signing code read the OS's randomness directly);
- renews the AWS session (`repositories.aws.renew_session`): clients made again, so credentials
  are resolved in this container and no pooled connection or cached credential of the snapshot
  is used; the parsed service models are kept (3 clients again: ~15-25 ms of CPU, measured in
  docs/DESIGN.md §10, against ~120-170 ms from nothing);
- forgets the server-token codec, so the first signing reads the current secret.

The hooks are registered through `snapshot_restore_py`, which the Lambda Python runtimes ship;
where it is not installed (the local stack) nothing is registered, and without SnapStart Lambda
never runs them.
"""

from __future__ import annotations

import random

from agent_knowledge.references.server_token import reset_codec
from agent_knowledge.repositories import aws


def before_snapshot() -> None:
    """Nothing of a request or a secret goes into the snapshot."""
    reset_codec()


def after_restore(clients: tuple[str, ...]) -> None:
    """Make this container's own what every container resumed from the snapshot shares."""
    random.seed()  # from os.urandom
    aws.renew_session()
    from agent_knowledge.runtime.container import create_clients_at_init

    create_clients_at_init(*clients)
    reset_codec()


def register(clients: tuple[str, ...]) -> bool:
    """Register the hooks for a function whose init creates `clients`; False where the runtime has
    no SnapStart module."""
    try:
        from snapshot_restore_py import register_after_restore, register_before_snapshot
    except ImportError:
        return False
    register_before_snapshot(before_snapshot)
    register_after_restore(after_restore, clients)
    return True
