"""Small repositories over botocore: the only code that talks to DynamoDB, S3, SQS and Secrets Manager."""

from agent_knowledge.repositories.bodies import BodyMissing, BodyReplaced, BodyStore
from agent_knowledge.repositories.bundle import Repositories, default_repositories, reset_repositories
from agent_knowledge.repositories.secrets import SecretStore

__all__ = [
    "BodyMissing",
    "BodyReplaced",
    "BodyStore",
    "Repositories",
    "SecretStore",
    "default_repositories",
    "reset_repositories",
]
