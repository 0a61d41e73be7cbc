"""Turn idempotency records, in the runs table beside the runs they point to.

Three kinds of item, each claimed with a conditional put (`attribute_not_exists(pk)`), so that
exactly one request wins a key however many arrive at once:

- `turn#<key>`: one per (session, route, conversation, turn). Holds the request hash, the
  user message id, the run id, a preparation lease and — once prepared — the frozen context
  (the exact response bytes, zlib-compressed to stay far below DynamoDB's 400 KB item limit).
- `message#<key>`: one per (session, route, user_message_id), naming the turn that used it.
- `completion#<run_id>`: the fingerprint of the request that completed the run.

All of them expire with their run (DynamoDB TTL on `ttl`).

A fresh turn makes its writes in two transactions (`claim_fresh`: message, turn and run;
`freeze_with_run`: run ready and context frozen) instead of five writes one after another; when a
transaction is cancelled nothing was written, and the caller repeats the same claims one by one,
which tells exactly which key was taken (docs/DESIGN.md §9).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any, Literal

from agent_knowledge.records import RunRecord
from agent_knowledge.repositories.dynamo import Table, key
from agent_knowledge.repositories.runs import run_item, run_transition

# Same grace as runs: the records outlive their run by a day, then TTL removes them.
TTL_GRACE_SECONDS = 86_400

TurnState = Literal["preparing", "ready"]
STATE_NAME = {"#s": "state"}  # `state` is a DynamoDB reserved word


@dataclass(frozen=True)
class TurnClaim:
    key: str
    request_hash: str
    user_message_id: str
    run_id: str
    state: TurnState
    lease_until: int
    expires_at: int
    context: str | None = None


@dataclass(frozen=True)
class CompletionClaim:
    run_id: str
    fingerprint: str
    state: str
    assistant_message_id: str
    completed_at: int


def _message_item(message_key: str, turn_key: str, expires_at: int) -> dict[str, Any]:
    return {"pk": f"message#{message_key}", "turn_key": turn_key, "ttl": expires_at + TTL_GRACE_SECONDS}


def _turn_item(claim: TurnClaim) -> dict[str, Any]:
    return {
        "pk": f"turn#{claim.key}",
        "request_hash": claim.request_hash,
        "user_message_id": claim.user_message_id,
        "run_id": claim.run_id,
        "state": claim.state,
        "lease_until": claim.lease_until,
        "expires_at": claim.expires_at,
        "ttl": claim.expires_at + TTL_GRACE_SECONDS,
    }


class TurnRepository:
    def __init__(self, dynamodb: Any, table: str) -> None:
        self._table = Table(dynamodb, table, "run storage")

    # user_message_id ------------------------------------------------------------------------

    def claim_message(self, message_key: str, turn_key: str, expires_at: int) -> tuple[str, bool]:
        """The turn key that owns the message (ours or an earlier one), and whether we just claimed it."""
        values = _message_item(message_key, turn_key, expires_at)
        if self._table.put_new(values, key_attribute="pk"):
            return turn_key, True
        existing = self._table.get(key(pk=f"message#{message_key}"))
        if existing is None:  # removed in between (released or expired): try once more
            return (turn_key, True) if self._table.put_new(values, key_attribute="pk") else (turn_key, False)
        return str(existing["turn_key"]), False

    def release_message(self, message_key: str, turn_key: str) -> None:
        """Undo a claim this request made for a turn it then could not use (unless the message
        has another owner by now)."""
        self._table.delete_if(key(pk=f"message#{message_key}"), "turn_key = :t", {":t": turn_key})

    # turns ----------------------------------------------------------------------------------

    def claim_fresh(self, message_key: str, claim: TurnClaim, run: RunRecord) -> bool:
        """Claim the user message and the turn key and create the run, all or nothing, in one round
        trip; False (nothing written) if any of the three exists or is being written: the caller then
        claims step by step (`claim_message`, `claim_turn`, `RunRepository.create`) to learn which.
        The run item goes into this table: runs and turn records share the runs table
        (`repositories/bundle.py` gives both repositories `RUNS_TABLE`)."""
        return self._table.write_together(
            [
                ("Put", self._table.new_item(_message_item(message_key, claim.key, claim.expires_at), "pk")),
                ("Put", self._table.new_item(_turn_item(claim), "pk")),
                ("Put", self._table.new_item(run_item(run), "pk")),
            ]
        )

    def claim_turn(self, claim: TurnClaim) -> TurnClaim | None:
        """Create the turn record; None if created, else the record that already holds the key."""
        if self._table.put_new(_turn_item(claim), key_attribute="pk"):
            return None
        existing = self.get_turn(claim.key)
        # Gone in between only if it expired this very moment; a retry then creates it afresh.
        return existing if existing is not None else self.claim_turn(claim)

    def get_turn(self, turn_key: str) -> TurnClaim | None:
        item = self._table.get(key(pk=f"turn#{turn_key}"))
        if item is None:
            return None
        context = item.get("context")
        return TurnClaim(
            key=turn_key,
            request_hash=str(item["request_hash"]),
            user_message_id=str(item["user_message_id"]),
            run_id=str(item["run_id"]),
            state=item["state"],
            lease_until=int(item["lease_until"]),
            expires_at=int(item["expires_at"]),
            context=zlib.decompress(context).decode("utf-8") if context is not None else None,
        )

    def renew_lease(self, turn_key: str, expected_lease: int, lease_until: int) -> bool:
        """Take over the preparation of a turn whose preparer stopped (its lease ran out)."""
        return self._table.update(
            key(pk=f"turn#{turn_key}"),
            "SET lease_until = :new",
            "#s = :preparing AND lease_until = :old",
            {":new": lease_until, ":old": expected_lease, ":preparing": "preparing"},
            STATE_NAME,
        )

    def freeze(self, turn_key: str, run_id: str, lease_until: int, context: str) -> bool:
        """Store the prepared context once; False if another preparer took the turn over."""
        return self._table.write("Update", self._freezing(turn_key, run_id, lease_until, context))

    def freeze_with_run(self, turn_key: str, run_id: str, lease_until: int, context: str) -> bool:
        """Move the run from `preparing` to `context_ready` and freeze the turn's context, both or
        neither, in one round trip; False (nothing written) if either condition fails: the caller
        then goes step by step (`RunRepository.transition`, `freeze`) to learn which."""
        return self._table.write_together(
            [
                ("Update", run_transition(self._table, run_id, "preparing", "context_ready")),
                ("Update", self._freezing(turn_key, run_id, lease_until, context)),
            ]
        )

    def _freezing(self, turn_key: str, run_id: str, lease_until: int, context: str) -> dict[str, Any]:
        return self._table.conditional_update(
            key(pk=f"turn#{turn_key}"),
            "SET #s = :ready, context = :context",
            "#s = :preparing AND run_id = :run AND lease_until = :lease",
            {
                ":ready": "ready",
                ":preparing": "preparing",
                ":run": run_id,
                ":lease": lease_until,
                ":context": zlib.compress(context.encode("utf-8")),
            },
            STATE_NAME,
        )

    # run completion ------------------------------------------------------------------------

    def claim_completion(self, claim: CompletionClaim, expires_at: int) -> CompletionClaim | None:
        """Record how the run was completed; None if recorded now, else the earlier completion."""
        values = {
            "pk": f"completion#{claim.run_id}",
            "fingerprint": claim.fingerprint,
            "state": claim.state,
            "assistant_message_id": claim.assistant_message_id,
            "completed_at": claim.completed_at,
            "ttl": expires_at + TTL_GRACE_SECONDS,
        }
        if self._table.put_new(values, key_attribute="pk"):
            return None
        item = self._table.get(key(pk=f"completion#{claim.run_id}"))
        if item is None:
            return self.claim_completion(claim, expires_at)
        return CompletionClaim(
            run_id=claim.run_id,
            fingerprint=str(item["fingerprint"]),
            state=str(item["state"]),
            assistant_message_id=str(item["assistant_message_id"]),
            completed_at=int(item["completed_at"]),
        )
