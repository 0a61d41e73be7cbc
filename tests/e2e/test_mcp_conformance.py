"""The official MCP conformance suite (npm `@modelcontextprotocol/conformance`, written by the
protocol's maintainers) against a real `agent-knowledge serve`: the server scenarios that apply to
a server of two fixed read-only tools (issue 34).

`make mcp-conformance` (a prerequisite of `make test`) installs the suite at the pinned version into
`.venv/tools/mcp-conformance`; this module skips only when node or npm is absent. The suite has no
option for credentials, so `mcp_conformance_bearer.mjs`, preloaded into its process, adds the demo
bearer to every request it sends: the DNS-rebinding scenario's forged request carries it too, as
a rebinding page would (the demo token is printed in the README).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent_knowledge_dev.demo import DEMO_ROUTE
from agent_knowledge_dev.template import PROJECT_ROOT
from tests.support.local_api import ServedApi

SUITE = Path(sys.prefix) / "tools" / "mcp-conformance" / "node_modules" / "@modelcontextprotocol" / "conformance"
PIN = re.search(r"^MCP_CONFORMANCE_VERSION := (\S+)$", (PROJECT_ROOT / "Makefile").read_text(), re.MULTILINE)
BEARER_PRELOAD = Path(__file__).with_name("mcp_conformance_bearer.mjs")
TIMEOUT = 120  # seconds for one scenario; each takes well under one on an idle machine

# Run, and must pass every check.
SCENARIOS = ("server-initialize", "ping", "tools-list", "dns-rebinding-protection")
# The suite's other server scenarios, and why they do not apply. Most call fixtures that the
# suite's reference server implements (tools named test_*, resources, prompts): a server whose tools
# are its product's has none of them.
NOT_APPLICABLE = {
    "logging-set-level": "no logging capability: the server sends no log messages",
    "completion-complete": "no prompts or resource templates, so nothing to complete",
    "tools-call-simple-text": "calls the suite's fixture tool test_simple_text",
    "tools-call-image": "calls the suite's fixture tool test_image_content",
    "tools-call-audio": "calls the suite's fixture tool test_audio_content",
    "tools-call-embedded-resource": "calls the suite's fixture tool test_embedded_resource",
    "tools-call-mixed-content": "calls the suite's fixture tool test_multiple_content_types",
    "tools-call-with-logging": "calls a fixture tool that logs while it runs; this server never logs to clients",
    "tools-call-error": "calls the suite's fixture tool test_error_handling",
    "tools-call-with-progress": "calls a fixture tool that reports progress; answers are one JSON each",
    "tools-call-sampling": "calls a fixture tool that asks the client to sample; a stateless server never asks",
    "tools-call-elicitation": "calls a fixture tool that elicits input; a stateless server never asks",
    "json-schema-2020-12": "lists the suite's fixture tool json_schema_2020_12_tool",
    "elicitation-sep1034-defaults": "calls a fixture tool that elicits input; a stateless server never asks",
    "elicitation-sep1330-enums": "calls a fixture tool that elicits input; a stateless server never asks",
    "server-sse-polling": "server-sent events: this endpoint answers JSON only (GET is 405)",
    "server-sse-multiple-streams": "server-sent events: this endpoint answers JSON only (GET is 405)",
    "resources-list": "no resources: two tools only",
    "resources-read-text": "no resources: two tools only",
    "resources-read-binary": "no resources: two tools only",
    "resources-templates-read": "no resources: two tools only",
    "resources-subscribe": "no resources: two tools only",
    "resources-unsubscribe": "no resources: two tools only",
    "prompts-list": "no prompts: two tools only",
    "prompts-get-simple": "no prompts: two tools only",
    "prompts-get-with-args": "no prompts: two tools only",
    "prompts-get-embedded-resource": "no prompts: two tools only",
    "prompts-get-with-image": "no prompts: two tools only",
}


@pytest.fixture(scope="module")
def node() -> str:
    found, npm = shutil.which("node"), shutil.which("npm")
    if found is None or npm is None:
        pytest.skip("node and npm are needed to run the MCP conformance suite (npm package); not found on PATH")
    assert (SUITE / "dist" / "index.js").is_file(), (
        f"the MCP conformance suite is not installed in {SUITE.parents[2]}: run `make mcp-conformance`"
    )
    installed = json.loads((SUITE / "package.json").read_text(encoding="utf-8"))["version"]
    assert PIN is not None and installed == PIN.group(1), f"installed {installed}; run `make mcp-conformance`"
    return found


def conformance(node: str, *arguments: str, bearer: str | None = None) -> subprocess.CompletedProcess[str]:
    preload = ["--import", BEARER_PRELOAD.as_uri()] if bearer else []
    environment = {"PATH": "/usr/bin:/bin", "NO_COLOR": "1", **({"MCP_CONFORMANCE_BEARER": bearer} if bearer else {})}
    return subprocess.run(
        [node, *preload, str(SUITE / "dist" / "index.js"), *arguments],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=environment,
        check=False,
    )


def server_scenarios(node: str) -> set[str]:
    listed = conformance(node, "list").stdout
    section = listed.split("Server scenarios", 1)[1].split("Client scenarios", 1)[0]
    return set(re.findall(r"^\s+- (\S+)$", section, re.MULTILINE))


def run_scenario(node: str, api: ServedApi, scenario: str, output: Path, bearer: str | None) -> list[dict[str, str]]:
    url = f"{api.base_url}/agent-api/v1/workspaces/{DEMO_ROUTE}/mcp"
    result = conformance(node, "server", "--url", url, "--scenario", scenario, "-o", str(output), bearer=bearer)
    (checks_file,) = output.glob(f"server-{scenario}-*/checks.json")
    checks: list[dict[str, str]] = json.loads(checks_file.read_text(encoding="utf-8"))
    failed = [check for check in checks if check["status"] != "SUCCESS"]
    assert (result.returncode == 0) == (not failed), result.stdout + result.stderr
    return checks


def test_every_server_scenario_of_the_suite_is_run_or_says_why_not(node: str) -> None:
    assert server_scenarios(node) == set(SCENARIOS) | set(NOT_APPLICABLE)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_scenario_passes(node: str, lexical_local_api: ServedApi, scenario: str, tmp_path: Path) -> None:
    checks = run_scenario(node, lexical_local_api, scenario, tmp_path, bearer=lexical_local_api.token)

    assert checks, f"{scenario} made no check"
    assert [
        (check["id"], check["status"], check.get("errorMessage")) for check in checks if check["status"] != "SUCCESS"
    ] == []


def test_the_bearer_is_what_lets_the_suite_in(node: str, lexical_local_api: ServedApi, tmp_path: Path) -> None:
    """Without it the suite's initialize is refused (401): the passes above are the authenticated endpoint's."""
    checks = run_scenario(node, lexical_local_api, "server-initialize", tmp_path, bearer=None)

    (check,) = checks
    assert check["status"] == "FAILURE" and "401" in check["errorMessage"]
