"""Bodies nested at any depth are answered with 4xx problem details, never a 500."""

from __future__ import annotations

import pytest

from tests.api.conftest import Gateway
from tests.api.tenants import Tenant, provision

pytestmark = pytest.mark.anyio

DEPTHS = [300, 1_000, 100_000]


def _nested_body(field: str, depth: int, agent: str = '"bot"') -> bytes:
    """`{"agent_id": ..., field: [[[...]]]}`, written out by hand: the JSON encoder of the
    test client recurses, and gives up long before 100,000 levels."""
    value = b"[" * depth + b"]" * depth
    return b'{"agent_id": ' + agent.encode() + b', "' + field.encode() + b'": ' + value + b"}"


async def _tenant(gw: Gateway) -> Tenant:
    tenant = await provision(gw, "acme", "support")
    await tenant.kb("kb")
    await tenant.doc("kb", "tea", "Green tea contains catechins and some caffeine.")
    await tenant.agent("bot", ["kb"])
    return tenant


async def _post(tenant: Tenant, path: str, body: bytes) -> tuple[int, str, dict[str, object]]:
    headers = {**tenant.headers(), "Content-Type": "application/json"}
    response = await tenant.gw.client.post(path, content=body, headers=headers)
    return response.status_code, response.headers["content-type"], response.json()


@pytest.mark.parametrize("depth", DEPTHS)
async def test_redact_value_nested_at_any_depth_is_422(gateway: Gateway, depth: int) -> None:
    """A `/v1/redact` value nested 300, 1,000 or 100,000 levels deep answers 422 problem
    details (not a 500 from the decoder's recursion limit), and the gateway goes on serving."""
    tenant = await _tenant(gateway)
    status, content_type, problem = await _post(tenant, "/v1/redact", _nested_body("value", depth))
    assert status == 422, problem
    assert content_type.startswith("application/problem+json")
    assert "nests JSON deeper" in str(problem["detail"])
    ok = await tenant.gw.client.post(
        "/v1/redact", json={"agent_id": "bot", "text": "hello"}, headers=tenant.headers()
    )
    assert ok.status_code == 200, ok.text


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize(
    ("path", "field"), [("/v1/retrieve", "question"), ("/v1/grounding/check", "answer")]
)
async def test_other_json_routes_answer_deep_bodies_with_4xx(
    gateway: Gateway, path: str, field: str, depth: int
) -> None:
    """Retrieval and the grounding check answer a deeply nested field with a 4xx problem
    details document, at every depth."""
    tenant = await _tenant(gateway)
    status, content_type, problem = await _post(tenant, path, _nested_body(field, depth))
    assert 400 <= status < 500, problem
    assert content_type.startswith("application/problem+json")


@pytest.mark.parametrize("depth", DEPTHS)
async def test_a_deep_unknown_field_is_4xx(gateway: Gateway, depth: int) -> None:
    """A deeply nested value under a field the body does not declare is a 4xx too."""
    tenant = await _tenant(gateway)
    status, content_type, _ = await _post(tenant, "/v1/retrieve", _nested_body("extra", depth))
    assert 400 <= status < 500
    assert content_type.startswith("application/problem+json")
