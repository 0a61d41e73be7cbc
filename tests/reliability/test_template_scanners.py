"""Static scanners on template.yaml, so its operational and security properties cannot regress:
cfn-lint with its informational rules included, and checkov with the skips template.yaml declares
(each with its reason) and no others.

checkov pins old versions of boto3/botocore, packaging and networkx, so it lives in its own virtual
environment (`make venv` creates `.venv/tools/checkov`; the `CHECKOV` environment variable may
name another executable) and runs as a subprocess.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_knowledge_dev.template import TEMPLATE_PATH

# Every check we do not act on is skipped on its resource in template.yaml, with the reason
# (`Metadata: checkov: skip: [{id, comment}]`), so an operator running checkov on the template sees
# the reasons, not failures (docs/DESIGN.md §12).


def checkov_skips() -> dict[tuple[str, str], str]:
    """(check id, logical id) → the reason the template gives."""
    from agent_knowledge_dev.template import template

    skips = {}
    for logical_id, resource in template()["Resources"].items():
        for skip in resource.get("Metadata", {}).get("checkov", {}).get("skip", []):
            skips[(skip["id"], logical_id)] = skip.get("comment", "")
    return skips


def _run_checkov(path: Path, cwd: Path) -> dict[str, Any]:
    result = subprocess.run(
        [str(_checkov()), "--file", str(path), "--framework", "cloudformation", "--skip-download"]
        + ["--output", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, "BC_SKIP_MAPPING": "TRUE", "LOG_LEVEL": "WARNING"},
    )
    assert result.returncode in (0, 1), result.stderr[-2000:]
    report: dict[str, Any] = json.loads(result.stdout)
    assert report["summary"]["parsing_errors"] == 0
    return report


def _checkov() -> Path:
    configured = os.environ.get("CHECKOV")
    path = Path(configured) if configured else Path(sys.prefix) / "tools" / "checkov" / "bin" / "checkov"
    if not path.is_file():
        pytest.fail(f"checkov not found at {path}: run `make venv` (it installs checkov into .venv/tools/checkov)")
    return path


def test_checkov_passes_the_template_and_every_skip_says_why(tmp_path):
    """checkov on template.yaml as an operator runs it: nothing failed, every skip with its reason."""
    skips = checkov_skips()
    assert skips and all(len(reason) > 40 for reason in skips.values()), "every skip needs a comment saying why"
    report = _run_checkov(TEMPLATE_PATH, tmp_path)
    assert report["results"]["failed_checks"] == [] and report["summary"]["failed"] == 0
    assert report["summary"]["skipped"] == len(skips)
    assert report["summary"]["passed"] >= 30


def test_checkov_skips_are_exactly_what_fails_without_them(tmp_path):
    """The same template without its skips fails exactly the skipped (check, resource) pairs: a new
    finding cannot hide behind a skip of another resource, and a skip nothing needs any more fails."""
    from agent_knowledge_dev.template import template

    bare = copy.deepcopy(template())
    for resource in bare["Resources"].values():
        resource.get("Metadata", {}).pop("checkov", None)
    path = tmp_path / "template.json"
    path.write_text(json.dumps(bare), encoding="utf-8")
    report = _run_checkov(path, tmp_path)
    failed = {(c["check_id"], c["resource"].split(".", 1)[1]) for c in report["results"]["failed_checks"]}
    assert sorted(failed - set(checkov_skips())) == [], "new findings: fix them or skip them with a reason"
    assert sorted(set(checkov_skips()) - failed) == [], "remove skips that no longer match anything"


def test_cfn_lint_reports_nothing_informational_rules_included():
    from cfnlint.api import ManualArgs, lint

    matches = lint(
        TEMPLATE_PATH.read_text(encoding="utf-8"),
        config=ManualArgs(include_checks=["I"], regions=["us-east-1"]),
    )
    assert [f"{m.rule.id} line {m.linenumber}: {m.message}" for m in matches] == []
