"""Property-based API fuzzing with schemathesis against a real `kbgate serve` process.

Cases are generated from the gateway's own OpenAPI document (bounded: a few dozen
per operation). Every response must be free of server errors and match the schema
where the schema documents it.
"""

from __future__ import annotations

import gzip
import json
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
)

from gateway.http.app import create_app
from settings.config import load_config
from tests.support.gateway_process import GatewayProcess

PLATFORM_KEY = "schemathesis-platform-key-0001"
PLATFORM_PATHS = ("/v1/orgs", "/v1/keys")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
SCHEMA = schemathesis.openapi.from_dict(
    create_app(load_config({}, platform_key=PLATFORM_KEY)).openapi_schema.to_schema()
)


@schemathesis.serializer("application/x-ndjson")
def _ndjson(_context: Any, value: Any) -> bytes:
    """A generated bulk-write line, sent as a one-line NDJSON body."""
    return json.dumps(value).encode() + b"\n"


@schemathesis.serializer("application/gzip")
def _gzip(_context: Any, value: Any) -> bytes:
    """A generated archive body, gzip-compressed (its content is whatever was generated)."""
    raw = value if isinstance(value, bytes) else json.dumps(value, default=str).encode()
    return gzip.compress(raw)


@pytest.fixture(scope="module")
def live() -> Iterator[tuple[str, str]]:
    """A gateway with one provisioned workspace (KB, agent, a document); yields url and key."""
    with tempfile.TemporaryDirectory() as scratch:
        gateway = GatewayProcess(
            Path(scratch) / "data",
            {
                "KBGATE_PLATFORM_KEY": PLATFORM_KEY,
                "KBGATE_RATE_LIMIT_PER_S": "100000",
                "KBGATE_RATE_LIMIT_BURST": "100000",
                "KBGATE_RATE_LIMIT_WORKSPACE_PER_S": "100000",
                "KBGATE_RATE_LIMIT_WORKSPACE_BURST": "100000",
            },
        )
        with gateway:
            yield gateway.url, _provision(gateway.url)


def _provision(url: str) -> str:
    platform = {"Authorization": f"Bearer {PLATFORM_KEY}"}
    with httpx.Client(base_url=url, timeout=30) as client:
        client.post("/v1/orgs", json={"org_id": "acme"}, headers=platform).raise_for_status()
        client.post(
            "/v1/orgs/acme/workspaces", json={"tenant_id": "ws"}, headers=platform
        ).raise_for_status()
        key = str(
            client.post(
                "/v1/keys",
                json={
                    "org_id": "acme",
                    "tenant_id": "ws",
                    "roles": ["admin", "ingest", "retrieve"],
                },
                headers=platform,
            ).json()["key"]
        )
        auth = {"Authorization": f"Bearer {key}"}
        client.put("/v1/knowledge-bases/kb", json={}, headers=auth).raise_for_status()
        client.put(
            "/v1/knowledge-bases/kb/documents/doc",
            json={"text": "Lighthouses guide ships past the reef.", "classification": "public"},
            headers=auth,
        ).raise_for_status()
        client.put(
            "/v1/agents/bot", json={"knowledge_base_ids": ["kb"]}, headers=auth
        ).raise_for_status()
    return key


@pytest.fixture(scope="module")
def tally() -> Iterator[Counter[str]]:
    """Counts the generated requests by operation and status class; written to
    test-artifacts/schemathesis.json at the end of the module (for the run's report)."""
    counts: Counter[str] = Counter()
    yield counts
    ARTIFACTS.mkdir(exist_ok=True)
    summary = {
        "requests": sum(v for k, v in counts.items() if k.startswith("status ")),
        "by_status_class": {k: v for k, v in sorted(counts.items()) if k.startswith("status ")},
        "method_path_pairs": len([k for k in counts if not k.startswith("status ")]),
        "by_operation": {k: v for k, v in sorted(counts.items()) if not k.startswith("status ")},
    }
    (ARTIFACTS / "schemathesis.json").write_text(json.dumps(summary, indent=2) + "\n")


@SCHEMA.parametrize()
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_no_server_errors_and_schema_conformance(
    case: Any, live: tuple[str, str], tally: Counter[str]
) -> None:
    """Any generated request gets a non-5xx answer whose body matches the documented schema."""
    url, key = live
    secret = PLATFORM_KEY if case.path.startswith(PLATFORM_PATHS) else key
    response = case.call_and_validate(
        base_url=url,
        headers={"Authorization": f"Bearer {secret}"},
        checks=[not_a_server_error, response_schema_conformance, content_type_conformance],
        timeout=30,
    )
    tally[f"{case.method.upper()} {case.path}"] += 1
    tally[f"status {response.status_code // 100}xx"] += 1
