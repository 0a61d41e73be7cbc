"""Route audience policy (docs/DESIGN.md §2), without storage."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent_knowledge.identity.caller import admits
from agent_knowledge.records import AudiencePolicy, Principal

ALICE = Principal(id="alice", tenant="acme", roles=["agent", "reader"], audience="internal")


def test_no_policy_or_a_disabled_one_admits_everyone():
    assert admits(None, "client-a", None)
    assert admits(AudiencePolicy(enabled=False, clients=["other"], anonymous=False), "client-a", None)


def test_every_listed_dimension_must_match():
    policy = AudiencePolicy(tenants=["acme"], roles=["reader"], audiences=["internal"])
    assert admits(policy, "client-a", ALICE)
    assert not admits(policy, "client-a", ALICE.model_copy(update={"tenant": "globex"}))
    assert not admits(policy, "client-a", ALICE.model_copy(update={"roles": ["agent"]}))
    assert not admits(policy, "client-a", ALICE.model_copy(update={"audience": "public"}))


def test_any_value_of_a_list_matches_and_the_wildcard_matches_any_present_value():
    assert admits(AudiencePolicy(roles=["admin", "agent"]), "client-a", ALICE)
    assert admits(AudiencePolicy(tenants=["*"]), "client-a", ALICE)
    assert not admits(AudiencePolicy(tenants=["*"]), "client-a", ALICE.model_copy(update={"tenant": None}))


def test_an_empty_or_absent_list_does_not_constrain():
    assert admits(AudiencePolicy(tenants=[], roles=None), "client-a", ALICE.model_copy(update={"tenant": None}))


def test_a_value_the_session_lacks_never_matches_a_listed_dimension():
    assert not admits(AudiencePolicy(roles=["reader"]), "client-a", ALICE.model_copy(update={"roles": []}))
    assert not admits(AudiencePolicy(audiences=["internal"]), "client-a", ALICE.model_copy(update={"audience": None}))


def test_clients_are_checked_for_principals_and_anonymous_sessions_alike():
    policy = AudiencePolicy(clients=["client-b"], anonymous=True)
    assert not admits(policy, "client-a", ALICE)
    assert not admits(policy, "client-a", None)
    assert admits(policy, "client-b", None)


def test_a_session_without_principal_needs_anonymous_and_skips_the_principal_dimensions():
    assert not admits(AudiencePolicy(), "client-a", None)
    assert admits(AudiencePolicy(anonymous=True, tenants=["acme"], roles=["reader"]), "client-a", None)


def test_principals_are_matched_by_id():
    assert admits(AudiencePolicy(principals=["alice"]), "client-a", ALICE)
    assert not admits(AudiencePolicy(principals=["bob"]), "client-a", ALICE)


values = st.lists(st.sampled_from(["a", "b", "c"]), max_size=3)


@given(tenants=st.none() | values, roles=st.none() | values, tenant=st.sampled_from(["a", "b", "c"]), role=values)
def test_adding_a_dimension_never_admits_more(tenants, roles, tenant, role):
    principal = Principal(id="p", tenant=tenant, roles=role)
    narrower = admits(AudiencePolicy(tenants=tenants, roles=roles), "c", principal)
    wider = admits(AudiencePolicy(tenants=tenants), "c", principal)
    assert not narrower or wider
