"""bench/layer_image.py rebuilds the deployed layer from this environment for the cold-start figure."""

from __future__ import annotations

import importlib.machinery

from bench import layer_image


def test_the_image_holds_the_requirements_and_what_they_pull_in():
    names = {dist.metadata["Name"].lower().replace("_", "-") for dist in layer_image.distributions()}
    # shared/requirements.txt, Powertools' tracer extra (aws-xray-sdk, which requires botocore),
    # and pydantic's own dependencies; nothing of the development environment.
    assert {"aws-lambda-powertools", "pydantic", "pydantic-core", "tantivy", "aws-xray-sdk", "botocore"} <= names
    assert not names & {"moto", "pytest", "boto3", "hypothesis", "matplotlib"}


def test_the_built_image_imports_our_layer_from_itself_with_or_without_bytecode(tmp_path):
    for bytecode in (True, False):
        python = layer_image.build(tmp_path / str(bytecode), bytecode=bytecode)
        assert (python / "agent_knowledge" / "__init__.py").is_file()
        compiled = list(python.rglob("*.pyc"))
        assert bool(compiled) is bytecode
        if bytecode:
            # unchecked-hash bytecode: flags word 0b01 (hash based, source never checked).
            header = (python / "agent_knowledge" / "__pycache__").glob("__init__.*.pyc")
            assert int.from_bytes(next(header).read_bytes()[4:8], "little") == 1
        spec = importlib.machinery.PathFinder.find_spec("pydantic", [str(python)])
        assert spec is not None and spec.origin.startswith(str(python))
