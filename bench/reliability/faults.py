"""Storage taken away under the running local API, with real timings: how long until each endpoint
answers 503, when the moto server is stopped (connections refused) and when it hangs (accepts and
never answers, so every attempt waits out its read timeout).

    python -m bench.reliability.faults

The in-process fault matrix (throttling, 5xx, timeouts, denied, missing objects on every endpoint)
is tests/reliability/test_storage_faults.py.
"""

from __future__ import annotations

import sys

from bench.reliability.client import LocalApi
from bench.reliability.load import with_local_api

FUNCTION_TIMEOUT_SECONDS = 15


def drill(command: str) -> int:
    failures = 0

    def run(api: LocalApi) -> int:
        nonlocal failures
        ref = api.search("vacation policy").json()["hints"][0]["ref"]
        print(f"{command}: {api.command(command)}")
        for name, call in (
            ("capabilities", api.capabilities),
            ("search", lambda: api.search("vacation policy")),
            ("read", lambda: api.read(ref)),
        ):
            reply = call()
            error = reply.json().get("error")
            ok = reply.status == 503 and error == "knowledge_unavailable" and reply.seconds < FUNCTION_TIMEOUT_SECONDS
            failures += not ok
            print(f"  {name:>12}: {reply.status} {error} in {reply.seconds:.2f} s {'ok' if ok else 'FAILED'}")
        return 0

    with_local_api(run)
    return failures


def main() -> int:
    failures = drill("stop-storage") + drill("hang-storage")
    print(f"faults: 6 tried, {6 - failures} answered 503 knowledge_unavailable within {FUNCTION_TIMEOUT_SECONDS} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
