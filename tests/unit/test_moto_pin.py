"""The local stack patches moto internals only on the moto version pyproject.toml pins."""

from __future__ import annotations

import tomllib

import pytest

from agent_knowledge_dev import moto_pin
from agent_knowledge_dev.handlers import PROJECT_ROOT


def test_the_pin_is_read_from_the_installed_requirements_and_matches_pyproject():
    project = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]
    pinned = [requirement for requirement in project["dependencies"] if requirement.startswith("moto")]
    assert len(pinned) == 1 and pinned[0].endswith("==" + moto_pin.pinned_moto_version())


def test_the_installed_moto_is_the_pinned_one():
    moto_pin.require_pinned_moto()


def test_another_moto_version_is_refused_loudly(monkeypatch):
    monkeypatch.setattr(moto_pin, "version", lambda name: "5.0.0")
    with pytest.raises(moto_pin.MotoVersionMismatch, match=r"moto 5\.0\.0 is installed.*written against moto"):
        moto_pin.require_pinned_moto()


def test_every_patch_module_refuses_another_moto_version(monkeypatch):
    from agent_knowledge_dev import moto_dynamodb, moto_s3, moto_sqs

    monkeypatch.setattr(moto_pin, "version", lambda name: "0.0.1")
    for module in (moto_dynamodb, moto_sqs, moto_s3):
        with pytest.raises(moto_pin.MotoVersionMismatch):
            module.install()


def test_unpatched_names_only_installed_patches():
    with pytest.raises(ValueError, match="not installed"), moto_pin.unpatched("dynamodb.no-such-patch"):
        pass


def test_the_benchmark_switch_skips_only_the_named_patches(monkeypatch):
    monkeypatch.setenv(moto_pin.SKIP_VARIABLE, "dynamodb.copy, s3.events")
    assert moto_pin.skipped("dynamodb.copy") and moto_pin.skipped("s3.events")
    assert not moto_pin.skipped("dynamodb.lock")
