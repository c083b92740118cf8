"""kbgate_client is the OpenAPI document as Python: its generated modules are what the
generator writes from the document the gateway serves, and both clients offer every
operation with one signature."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import kbgate_client
import kbgate_client.models
import msgspec
from kbgate_client import AsyncClient, Client, operations
from kbgate_client._operation import Operation

from gateway.http.app import create_app
from settings.config import load_config

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "clients" / "python"
PACKAGE = CLIENT / "src" / "kbgate_client"
RUFF = Path(sys.executable).with_name("ruff")


def _tidy(source: str, name: str) -> str:
    """What `regenerate.sh` commits: imports sorted, then `ruff format`ted."""
    for command in (
        [str(RUFF), "check", "--fix", "--quiet", "--select", "I", "--stdin-filename", name, "-"],
        [str(RUFF), "format", "--quiet", "--stdin-filename", name, "-"],
    ):
        source = subprocess.run(  # noqa: S603 — the dev environment's ruff, fixed arguments
            command, input=source, capture_output=True, text=True, check=True, cwd=ROOT
        ).stdout
    return source


def _generated(source: Path, what: str, name: str) -> str:
    written = subprocess.run(  # noqa: S603 — the repository's generator, fixed arguments
        [sys.executable, str(CLIENT / "codegen.py"), str(source), what],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return _tidy(written, str(PACKAGE / name))


def test_the_committed_models_operations_and_sync_client_are_what_the_generator_writes(
    tmp_path: Path,
) -> None:
    """Regenerating from the document the gateway serves changes nothing: a schema or route
    changed without `clients/python/regenerate.sh` fails here."""
    document = create_app(load_config({}, platform_key="k" * 30)).openapi_schema.to_schema()
    spec = tmp_path / "openapi.json"
    spec.write_text(json.dumps(document))
    for what, name in (("models", "models.py"), ("operations", "operations.py")):
        assert _generated(spec, what, name) == (PACKAGE / name).read_text(), name
    synchronous = _generated(PACKAGE / "_async_client.py", "sync", "_sync_client.py")
    assert synchronous == (PACKAGE / "_sync_client.py").read_text()


def test_every_operation_of_the_document_has_a_method_of_its_name_on_both_clients() -> None:
    """Each of the 48 operations is a method of `Client` and of `AsyncClient`, with the same
    parameters; the async one is a coroutine (or an async iterator for a bulk write)."""
    document = create_app(load_config({}, platform_key="k" * 30)).openapi_schema.to_schema()
    ids = {
        item[method]["operationId"]
        for item in document["paths"].values()
        for method in ("get", "put", "post", "patch", "delete")
        if method in item
    }
    listed = {
        value.operation_id: name
        for name, value in vars(operations).items()
        if isinstance(value, Operation)
    }
    assert set(listed) == ids
    assert len(ids) == 48
    for name in listed.values():
        sync_method, async_method = getattr(Client, name), getattr(AsyncClient, name)
        sync_parameters = inspect.signature(sync_method).parameters
        assert sync_parameters == inspect.signature(async_method).parameters, name
        assert inspect.iscoroutinefunction(async_method) or inspect.isasyncgenfunction(
            async_method
        ), name


def test_the_client_installs_alone_without_the_gateway(tmp_path: Path) -> None:
    """The distribution declares anyio, httpx and msgspec only (extras apart), and its modules
    import nothing of the gateway's packages."""
    declared = (CLIENT / "pyproject.toml").read_text()
    runtime = '[\n    "anyio>=4",\n    "httpx>=0.27",\n    "msgspec>=0.18",\n]'
    assert f"dependencies = {runtime}" in declared
    for module in PACKAGE.glob("*.py"):
        text = module.read_text()
        for forbidden in ("gateway", "ingest", "grounding", "settings."):
            assert f"import {forbidden}" not in text, module
            assert f"from {forbidden}" not in text, module
    assert kbgate_client.__file__ is not None
    assert Path(kbgate_client.__file__).is_relative_to(CLIENT)


def test_every_problem_and_a_chat_backend_s_answers_have_examples_that_decode() -> None:
    """Each error response carries an example of its own status; the examples of retrieve,
    citation verification, grounding and redaction decode strictly into the gateway's
    response Structs and into the client's models."""
    from gateway.http import grounding_schemas, redaction_schemas, retrieval_schemas

    document = create_app(load_config({}, platform_key="k" * 30)).openapi_schema.to_schema()
    answers: dict[str, object] = {}
    for item in document["paths"].values():
        for method in ("get", "put", "post", "patch", "delete"):
            operation = item.get(method)
            if operation is None:
                continue
            for status, response in operation["responses"].items():
                problem = response.get("content", {}).get("application/problem+json")
                if problem is not None:
                    assert problem["example"]["status"] == int(status), operation["operationId"]
            example = operation["responses"].get("200", {}).get("content", {})
            found = example.get("application/json", {}).get("example")
            if found is not None:
                answers[operation["operationId"]] = found
    expected = {
        "retrieve": (retrieval_schemas, "RetrieveOut"),
        "verifyCitations": (retrieval_schemas, "VerifyOut"),
        "checkGrounding": (grounding_schemas, "GroundingOut"),
        "redact": (redaction_schemas, "RedactOut"),
    }
    assert set(answers) == set(expected)
    for operation_id, (schemas, name) in expected.items():
        raw = msgspec.json.encode(answers[operation_id])
        msgspec.json.decode(raw, type=getattr(schemas, name), strict=True)
        msgspec.json.decode(raw, type=getattr(kbgate_client.models, name), strict=True)
