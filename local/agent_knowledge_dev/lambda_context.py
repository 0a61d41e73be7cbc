"""The parts of the Lambda context object the handlers and Powertools use."""

from __future__ import annotations

import time

from agent_knowledge_dev.aws_environment import REGION

# A fixed id, so that tests can assert the "internal error (request id …)" message.
DEFAULT_REQUEST_ID = "test-request-id"


class LambdaContext:
    def __init__(
        self,
        function_name: str = "local",
        *,
        request_id: str = DEFAULT_REQUEST_ID,
        memory_limit_in_mb: int = 512,
        timeout_seconds: float = 15,
    ) -> None:
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = memory_limit_in_mb
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:123456789012:function:{function_name}"
        self.aws_request_id = request_id
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = "local"
        self._deadline = time.monotonic() + timeout_seconds

    @classmethod
    def for_function(cls, function: str, request_id: str = DEFAULT_REQUEST_ID) -> LambdaContext:
        """The context of template function `function` (logical id): its memory size and timeout."""
        from agent_knowledge_dev.template import function_setting

        return cls(
            function,
            request_id=request_id,
            memory_limit_in_mb=int(function_setting(function, "MemorySize", 128)),
            timeout_seconds=float(function_setting(function, "Timeout", 3)),
        )

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))
