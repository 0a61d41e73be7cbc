"""Route audience policy (docs/DESIGN.md §2).

No policy, or `enabled: false`, admits everyone. Otherwise every listed dimension must match:
AND across dimensions, any-of within a list, `"*"` matches any present value, and an empty or
absent list does not constrain. A value the session lacks never matches a listed dimension
(fail closed). A session without a principal is admitted only with `anonymous: true`; the
principal dimensions (tenants, roles, principals, audiences) then do not apply — there is no
principal to test — but the `clients` dimension still does.
"""

from __future__ import annotations

from agent_knowledge.records import AudiencePolicy, Principal

WILDCARD = "*"


def _matches(allowed: list[str] | None, values: list[str]) -> bool:
    if not allowed:
        return True
    if not values:
        return False
    return WILDCARD in allowed or any(value in allowed for value in values)


def _present(value: str | None) -> list[str]:
    return [value] if value else []


def admits(policy: AudiencePolicy | None, client_app_id: str, principal: Principal | None) -> bool:
    if policy is None or not policy.enabled:
        return True
    if not _matches(policy.clients, [client_app_id]):
        return False
    if principal is None:
        return policy.anonymous
    return (
        _matches(policy.tenants, _present(principal.tenant))
        and _matches(policy.roles, principal.roles)
        and _matches(policy.principals, [principal.id])
        and _matches(policy.audiences, _present(principal.audience))
    )
