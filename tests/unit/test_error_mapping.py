"""Domain errors → HTTP statuses and bodies (docs/DESIGN.md §5, §7), without AWS."""

from __future__ import annotations

import json

import pytest

from agent_knowledge import errors
from agent_knowledge.runtime.http import STATUS_BY_ERROR, error_response, status_of
from tests.support import protocol

EXPECTED = {
    getattr(errors, name): (status, code)
    for status, code, name in protocol.ERRORS
    if code != protocol.CATCH_ALL_CODE  # answered by the catch-all, not by a domain error
}


@pytest.mark.parametrize("error_type", list(EXPECTED), ids=lambda error_type: error_type.__name__)
def test_each_error_has_its_status_and_code(error_type):
    status, code = EXPECTED[error_type]
    error = error_type()
    assert (status_of(error), error.code) == (status, code)
    response = error_response(status, error.code, error.message)
    assert json.loads(response.body) == {"error": code, "message": error_type.default_message}


def test_every_concrete_error_is_mapped_and_nothing_else():
    assert set(STATUS_BY_ERROR) == set(EXPECTED)


def test_an_unmapped_error_is_a_500():
    class Unexpected(errors.KnowledgeError):
        pass

    assert status_of(Unexpected()) == 500


def test_the_ladder_groups_errors_by_what_the_caller_can_do():
    assert all(issubclass(t, errors.AccessRefused) for t in (errors.Unauthorized, errors.WorkspaceNotFound))
    refused = (errors.RunNotFound, errors.RunNotReady, errors.TaskNotActive)
    assert all(issubclass(t, errors.RunRefused) for t in refused)
    again = (errors.ReferenceInvalid, errors.ReferenceExpired, errors.ScopeChanged, errors.KnowledgeChanged)
    assert all(issubclass(t, errors.SearchAgain) for t in again)


def test_errors_carry_context_without_changing_their_message():
    expired = errors.ReferenceExpired(expires_at=1_800_000_300)
    assert expired.expires_at == 1_800_000_300 and expired.context() == {"expires_at": 1_800_000_300}
    assert expired.message == errors.ReferenceExpired.default_message
    unavailable = errors.KnowledgeUnavailable.of("document storage")
    assert unavailable.store == "document storage"
    assert unavailable.message == "document storage is temporarily unavailable"
    assert errors.RunNotFound(run_id="run_1").context() == {"run_id": "run_1"}
    assert errors.InvalidRequest().context() == {}


def test_a_401_asks_for_a_bearer():
    assert error_response(401, "unauthorized", "x").headers["WWW-Authenticate"] == 'Bearer realm="agent-api"'
    assert "WWW-Authenticate" not in (error_response(404, "workspace_not_found", "x").headers or {})


def test_a_reference_error_keeps_its_reason_out_of_the_message():
    invalid = errors.ReferenceInvalid("issued to another caller or run")
    assert invalid.message == errors.ReferenceInvalid.default_message
    assert invalid.context() == {"reason": "issued to another caller or run"}
    assert errors.ReferenceInvalid().context() == {}
