"""Who is calling: bearer → session, client, route, audience; runs and tasks; the scope revision."""

from agent_knowledge.identity.audience import admits as admits
from agent_knowledge.identity.caller import Caller as Caller
from agent_knowledge.identity.caller import bearer_token as bearer_token
from agent_knowledge.identity.caller import revalidate as revalidate
from agent_knowledge.identity.runs import authorize_run as authorize_run
from agent_knowledge.identity.runs import ensure_task_usable as ensure_task_usable
from agent_knowledge.identity.scope import Scope as Scope
from agent_knowledge.identity.scope import canonical_json as canonical_json
from agent_knowledge.identity.scope import load_scope as load_scope
from agent_knowledge.identity.scope import scope_revision as scope_revision
