"""Static scanners on template.yaml, so its operational and security properties cannot regress:
cfn-lint with its informational rules included, and checkov with an explicit skip list.

checkov pins old versions of boto3/botocore, packaging and networkx, so it lives in its own virtual
environment (`make venv` creates `.venv/tools/checkov`; the `CHECKOV` environment variable may
name another executable) and runs as a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_knowledge_dev.template import TEMPLATE_PATH

# Every check we do not act on, and why (docs/DESIGN.md §12). The test runs checkov without skips and
# requires its failures to be exactly these, so the list can neither hide a new finding nor go stale.
CHECKOV_SKIPS = {
    # A function DLQ receives failed *asynchronous* invocations. API Gateway invokes the query
    # functions synchronously (the caller gets the error); SQS-triggered functions get their
    # dead-letter queue on the source queue (redrive policy), which is where AWS applies it.
    "CKV_AWS_116": "Lambda DLQ: only for asynchronous invocations",
    # The functions reach only AWS APIs (DynamoDB, S3, Secrets Manager) over TLS with IAM. A VPC
    # would add NAT gateways or interface endpoints (a fixed monthly cost per AZ) and cold-start
    # latency without narrowing what the functions can reach.
    "CKV_AWS_117": "Lambda in a VPC: no private resources to reach",
    # Tables are encrypted at rest (SSESpecification, AWS managed key). A customer-managed key
    # adds a key policy to run and KMS requests to pay for, and protects nothing more against the
    # functions, which must decrypt anyway; an operator who needs one sets it on the tables.
    "CKV_AWS_119": "DynamoDB customer-managed KMS key: AWS managed encryption is on",
    # Logs hold no bodies, tokens or references (tests/leakcheck.py checks every log line of the
    # suite) and CloudWatch Logs encrypts at rest by default.
    "CKV_AWS_158": "Log group KMS key: logs carry no secrets or document text",
    # The environment holds resource names and flags only; the one secret stays in Secrets
    # Manager and is read at run time. Lambda encrypts environment variables at rest by default.
    "CKV_AWS_173": "Lambda environment encryption with a customer key: no secrets in the environment",
    # Server access logs need a second bucket per stack (which would itself fail this check).
    # Only our functions read these buckets, and every such request is in the API access log and
    # the function logs; object-level audit, where required, is CloudTrail S3 data events,
    # configured once per account or organization.
    "CKV_AWS_18": "S3 server access logging: reads are the functions' own, audited by CloudTrail if needed",
    # The queues are encrypted at rest with SQS-managed keys (SqsManagedSseEnabled); the check
    # accepts only a KMS key. A KMS key on the source queue would need a key policy letting S3
    # publish to it, and KMS requests on every message; the messages hold object keys and
    # document ids, never document text.
    "CKV_AWS_27": "SQS encryption with KMS: SQS-managed encryption is on, messages hold keys and ids only",
}


def _checkov() -> Path:
    configured = os.environ.get("CHECKOV")
    path = Path(configured) if configured else Path(sys.prefix) / "tools" / "checkov" / "bin" / "checkov"
    if not path.is_file():
        pytest.fail(f"checkov not found at {path}: run `make venv` (it installs checkov into .venv/tools/checkov)")
    return path


def test_checkov_fails_only_the_documented_skips(tmp_path):
    """checkov runs without a skip list; what it reports failed must be exactly CHECKOV_SKIPS:
    a new finding fails the test, and so does a skip nothing needs any more."""
    result = subprocess.run(
        [str(_checkov()), "--file", str(TEMPLATE_PATH), "--framework", "cloudformation", "--skip-download"]
        + ["--output", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "BC_SKIP_MAPPING": "TRUE", "LOG_LEVEL": "WARNING"},
    )
    assert result.returncode in (0, 1), result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert report["summary"]["parsing_errors"] == 0
    failed = report["results"]["failed_checks"]
    unexpected = sorted(
        f"{c['check_id']} {c['resource']}: {c['check_name']}" for c in failed if c["check_id"] not in CHECKOV_SKIPS
    )
    assert unexpected == []
    assert {c["check_id"] for c in failed} == set(CHECKOV_SKIPS), "remove skips that no longer match anything"
    assert report["summary"]["passed"] >= 30


def test_cfn_lint_reports_nothing_informational_rules_included():
    from cfnlint.api import ManualArgs, lint

    matches = lint(
        TEMPLATE_PATH.read_text(encoding="utf-8"),
        config=ManualArgs(include_checks=["I"], regions=["us-east-1"]),
    )
    assert [f"{m.rule.id} line {m.linenumber}: {m.message}" for m in matches] == []
