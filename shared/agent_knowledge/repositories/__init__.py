"""Small repositories over boto3: the only code that talks to DynamoDB and S3."""

from agent_knowledge.repositories.bundle import Repositories, default_repositories, reset_repositories

__all__ = ["Repositories", "default_repositories", "reset_repositories"]
