"""A KB's model migration over HTTP on a real gateway (the real models, Qdrant Edge and
SQLite): from the bundled MiniLM to its integer re-quantization, built beside the old
vectors, validated on the golden set, switched, rolled back, switched again and the old
vectors retired, with turns of that KB and of another workspace answering throughout.
"""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from gateway.access.auth import Principal
from gateway.retrieval.plan import plan_turn
from ingest.embedder.embedding import MINILM_MODEL_NAME, MINILM_QUESTION_MODEL_NAME, Embedder
from ingest.index import DENSE_VECTOR, collection_for
from ingest.payload import Classification, Scope
from settings.migration import MigrationStatus
from settings.records import Role
from tests.api.conftest import Gateway, serving
from tests.api.tenants import Tenant, provision, tea_workspace
from tests.api.test_console import csrf_token, sign_in

pytestmark = pytest.mark.anyio

TARGET = MINILM_QUESTION_MODEL_NAME
PATH = "/v1/knowledge-bases/policies/model-migration"
DOCUMENTS = {
    "leave-policy": "Employees accrue 25 days of paid annual leave each year. Unused leave "
    "days carry over until the end of March. Requests for leave are approved by the team lead.",
    "parking": "Staff parking is on level two of the east garage. Visitors park on level one "
    "and register at the front desk. Bicycle racks stand next to the main entrance.",
    "expenses": "Travel expenses are reimbursed within thirty days of submitting receipts. "
    "Hotel costs above 150 euros a night need approval from finance.",
    "security": "Laptops must use full-disk encryption and lock the screen after five minutes. "
    "Report lost devices to the security team within one hour.",
}
GOLDEN: dict[str, Any] = {
    "questions": [
        {
            "question": "How many days of paid annual leave do I get?",
            "document_ids": ["leave-policy"],
        },
        {"question": "Where do staff park?", "document_ids": ["parking"]},
        {"question": "When are travel costs paid back?", "document_ids": ["expenses"]},
        {"question": "Who do I tell about a lost laptop?", "document_ids": ["security"]},
    ],
    "off_topic": [
        "What is the capital of Australia?",
        "How do I bake sourdough bread?",
        "Who won the football world cup in 1998?",
    ],
}


async def _policies(gw: Gateway) -> Tenant:
    tenant = await provision(gw, "acme", "migrating")
    await tenant.kb("policies")
    for doc_id, text in DOCUMENTS.items():
        await tenant.doc("policies", doc_id, text, title=doc_id)
    await tenant.agent("bot", ["policies"])
    return tenant


async def _until(
    read: Callable[[], Awaitable[dict[str, Any]]], done: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    for _ in range(1500):
        body = await read()
        if done(body):
            return body
        await asyncio.sleep(0.1)
    raise AssertionError(f"never reached: {body}")


def _reader(tenant: Tenant) -> Callable[[], Awaitable[dict[str, Any]]]:
    async def read() -> dict[str, Any]:
        response = await tenant.gw.client.get(PATH, headers=tenant.headers())
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    return read


class _Turns:
    """Turns of the migrating KB and of another workspace, asked in a loop while the
    migration goes on: every one must answer 200 with passages."""

    def __init__(self, mine: Tenant, theirs: Tenant) -> None:
        self.mine, self.theirs = mine, theirs
        self.answers: list[tuple[str, int, int, str | None]] = []
        self._stop = asyncio.Event()

    async def run(self) -> None:
        while not self._stop.is_set():
            for name, tenant, question in (
                ("mine", self.mine, "How many days of annual leave do employees get?"),
                ("theirs", self.theirs, "Which tea has catechins?"),
            ):
                response = await tenant.retrieve("bot", question)
                body = response.json()
                passages = body.get("passages", []) if response.status_code == 200 else []
                top = passages[0]["document_id"] if passages else None
                self.answers.append((name, response.status_code, len(passages), top))
            await asyncio.sleep(0.05)

    def stop(self) -> None:
        self._stop.set()


def _scope(tenant: Tenant) -> Scope:
    return Scope.of(
        org_id=tenant.org_id,
        tenant_id=tenant.tenant_id,
        kb_ids=["policies"],
        clearance=Classification.RESTRICTED,
        strict=False,
    )


async def test_a_kb_migrates_to_the_requantized_model_with_turns_answering_throughout(
    tmp_path: Path, embedder: Embedder
) -> None:
    """Build, validate, switch, roll back, switch, retire, all over HTTP: the new vectors
    are built beside the old (progress reaches every passage, a document written meanwhile
    gets both), a switch is refused until the golden set validated both sets side by side
    (nDCG@10, recall, abstention, recommended floors), each switch and roll back takes
    effect on the next turn, retiring removes the old vectors only from this KB, every step
    is in the KB's history with the acting key, and every turn of this KB and of another
    workspace answered 200 with its passages throughout."""
    async with serving(tmp_path, embedder) as gw:
        mine = await _policies(gw)
        theirs = await tea_workspace(gw, "neighbour")
        turns = _Turns(mine, theirs)
        asking = asyncio.create_task(turns.run())
        try:
            await _refuses_bad_starts(gw, mine)
            await _builds(gw, mine)
            await _validates(gw, mine)
            await _switches_and_rolls_back(gw, mine)
            retired = await _retires(gw, mine)
        finally:
            turns.stop()
            await asyncio.wait_for(asking, 30)
        await _in_history(gw, mine, retired)

    assert len([a for a in turns.answers if a[0] == "mine"]) >= 5
    assert all(status == 200 and passages > 0 for _, status, passages, _ in turns.answers), [
        a for a in turns.answers if a[1] != 200 or a[2] == 0
    ]
    assert {top for name, _, _, top in turns.answers if name == "mine"} == {"leave-policy"}


async def _refuses_bad_starts(gw: Gateway, mine: Tenant) -> None:
    """No migration yet: 404; a model this deployment cannot load offline, or the one the
    KB answers from: 422 `model`."""
    assert (await gw.client.get(PATH, headers=mine.headers())).status_code == 404
    unknown = await gw.client.post(PATH, json={"model": "no/such-model"}, headers=mine.headers())
    assert unknown.status_code == 422
    assert unknown.json()["field"] == "model"
    same = await gw.client.post(PATH, json={"model": MINILM_MODEL_NAME}, headers=mine.headers())
    assert same.status_code == 422


async def _builds(gw: Gateway, mine: Tenant) -> None:
    started = await gw.client.post(PATH, json={"model": TARGET}, headers=mine.headers())
    assert started.status_code == 202, started.text
    assert started.json()["status"] == "building"
    assert {s["model"] for s in started.json()["vector_sets"]} == {MINILM_MODEL_NAME, TARGET}
    again = await gw.client.post(PATH, json={"model": TARGET}, headers=mine.headers())
    assert again.status_code == 409
    # A document written while both sets are kept is embedded with both.
    await mine.doc("policies", "payroll", "Salaries are paid on the last working day.")
    built = await _until(_reader(mine), lambda b: b["status"] == "built")
    assert built["progress"]["done"] == built["progress"]["total"] >= 4
    assert await _holding(gw, mine, gw.services.models.vector(TARGET)) == 5
    assert await _holding(gw, mine, DENSE_VECTOR) == 5


async def _validates(gw: Gateway, mine: Tenant) -> None:
    """No switch without validation; no validation without a golden set; then both sets'
    figures side by side."""
    refused = await gw.client.post(PATH + "/switch", json={}, headers=mine.headers())
    assert refused.status_code == 409
    assert refused.json()["field"] == "validation"
    no_golden = await gw.client.post(PATH + "/validate", headers=mine.headers())
    assert no_golden.status_code == 409
    assert no_golden.json()["field"] == "golden_set"
    stored = await gw.client.put(
        "/v1/knowledge-bases/policies/golden-set", json=GOLDEN, headers=mine.headers()
    )
    assert stored.status_code == 200
    validating = await gw.client.post(PATH + "/validate", headers=mine.headers())
    assert validating.status_code == 202, validating.text
    checked = await _until(
        _reader(mine), lambda b: (b["validation"] or {}).get("status") != "running"
    )
    validation = checked["validation"]
    assert validation["status"] == "done", validation
    for side, model in (("old", MINILM_MODEL_NAME), ("new", TARGET)):
        figures = validation[side]
        assert figures["model"] == model
        assert 0.0 <= figures["ndcg_10"] <= 1.0
        assert figures["recall_100"] >= figures["recall_10"]
        assert set(figures["abstention"]) == {"answerable", "off_topic"}
        assert set(figures["recommended"]) == {
            "score_threshold",
            "keyword_floor",
            "grounding_floor",
        }
    # Each side found every question's document on this small KB.
    assert validation["old"]["recall_100"] == validation["new"]["recall_100"] == 1.0
    assert validation["ndcg_10_change"] == pytest.approx(
        validation["new"]["ndcg_10"] - validation["old"]["ndcg_10"], abs=1e-3
    )


async def _switches_and_rolls_back(gw: Gateway, mine: Tenant) -> None:
    """Each takes effect on the next turn's plan (the settings cache read fresh)."""
    vector = gw.services.models.vector(TARGET)
    switched = await gw.client.post(PATH + "/switch", json={}, headers=mine.headers())
    assert switched.status_code == 200, switched.text
    assert switched.json()["status"] == "switched"
    kb = await gw.services.store.get_knowledge_base("migrating", "policies")
    assert kb is not None
    assert kb.embedding_model == TARGET
    assert await _plan_vector(gw, mine) == vector
    assert await _turn_vector(mine) == vector
    rolled = await gw.client.post(PATH + "/rollback", headers=mine.headers())
    assert rolled.status_code == 200
    assert rolled.json()["status"] == "rolled_back"
    assert await _plan_vector(gw, mine) == DENSE_VECTOR
    assert await _turn_vector(mine) == DENSE_VECTOR
    twice = await gw.client.post(PATH + "/rollback", headers=mine.headers())
    assert twice.status_code == 409
    again = await gw.client.post(
        PATH + "/switch", json={"max_ndcg_drop": 1.0}, headers=mine.headers()
    )
    assert again.status_code == 200, again.text


async def _retires(gw: Gateway, mine: Tenant) -> dict[str, Any]:
    """The old vectors go from this KB only; new writes get the new model's only; turns and
    grounding checks answer from the new vectors."""
    vector = gw.services.models.vector(TARGET)
    retired = await gw.client.post(PATH + "/retire", headers=mine.headers())
    assert retired.status_code == 200
    assert retired.json()["status"] == "retired"
    assert retired.json()["vector_sets"] == [{"model": TARGET, "vector": vector, "answering": True}]
    assert await _holding(gw, mine, DENSE_VECTOR) == 0
    assert await _holding(gw, mine, vector) == 5
    theirs = Scope.of(
        org_id="acme",
        tenant_id="neighbour",
        kb_ids=["kb"],
        clearance=Classification.RESTRICTED,
        strict=False,
    )
    collection = collection_for("org", "acme")
    assert await gw.services.index.count_vector(collection, theirs, DENSE_VECTOR) == 1
    await mine.doc("policies", "canteen", "The canteen serves lunch from noon to two.")
    assert await _holding(gw, mine, vector) == 6
    assert await _holding(gw, mine, DENSE_VECTOR) == 0
    answer = (await mine.retrieve("bot", "How many days of annual leave?")).json()
    assert answer["passages"][0]["document_id"] == "leave-policy"
    assert answer["passages"][0]["dense_score"] is not None
    grounded = await gw.client.post(
        "/v1/grounding/check",
        json={"agent_id": "bot", "answer": "Employees accrue 25 days of paid leave."},
        headers=mine.headers(),
    )
    assert grounded.status_code == 200
    assert grounded.json()["matches"] > 0
    body: dict[str, Any] = retired.json()
    return body


async def _in_history(gw: Gateway, mine: Tenant, retired: dict[str, Any]) -> None:
    changes = await gw.client.get(
        "/v1/workspace/changes?kind=knowledge_base&object_id=policies", headers=mine.headers()
    )
    listed = changes.json()["changes"]
    actions = [c["action"] for c in listed if "embedding_model" in c["fields"]]
    assert actions == [
        "model_migration_started",
        "model_migration_switched",
        "model_migration_rolled_back",
        "model_migration_switched",
        "model_migration_retired",
    ]
    assert {c["key_id"] for c in listed} == {await _key_id(gw, mine)}
    steps = [s["action"] for s in retired["steps"]]
    assert steps[0] == "started"
    assert "built" in steps
    assert steps[-1] == "retired"


async def _holding(gw: Gateway, tenant: Tenant, vector: str) -> int:
    """The KB's passages holding the dense vector set `vector`."""
    collection = collection_for("org", "acme")
    return await gw.services.index.count_vector(collection, _scope(tenant), vector)


async def test_a_migration_left_building_resumes_after_a_restart(
    tmp_path: Path, embedder: Embedder
) -> None:
    """A migration whose gateway stopped before every passage had the new vectors is
    resumed by the next gateway on the same data dir: it embeds the passages still lacking
    them, and only those, and reports them all done. A KB without a golden set switches
    only with an explicit override, and the override is its own step."""
    async with serving(tmp_path, embedder) as gw:
        mine = await _policies(gw)
        started = await gw.client.post(PATH, json={"model": TARGET}, headers=mine.headers())
        assert started.status_code == 202
        await _until(_reader(mine), lambda b: b["status"] == "built")
        # As a gateway stopped midway leaves it: half the new vectors, the record building.
        vector = gw.services.models.vector(TARGET)
        collection = collection_for("org", "acme")
        half = Scope.of(
            org_id="acme",
            tenant_id="migrating",
            kb_ids=["policies"],
            clearance=Classification.INTERNAL,
            strict=False,
        )
        await gw.services.index.drop_dense_vectors(collection, half, vector)
        migration = await gw.services.store.get_migration("migrating", "policies")
        assert migration is not None
        await gw.services.store.put_migration(
            msgspec.structs.replace(migration, status=MigrationStatus.BUILDING, done=0)
        )
    async with serving(tmp_path, embedder) as gw:
        mine.gw = gw
        built = await _until(_reader(mine), lambda b: b["status"] == "built")
        assert built["progress"]["done"] == built["progress"]["total"] == 4
        assert await gw.services.index.count_vector(collection, _scope(mine), vector) == 4
        refused = await gw.client.post(PATH + "/switch", json={}, headers=mine.headers())
        assert refused.status_code == 409
        forced = await gw.client.post(
            PATH + "/switch", json={"override": True}, headers=mine.headers()
        )
        assert forced.status_code == 200, forced.text
        assert forced.json()["steps"][-1]["action"] == "switched_with_override"
        answer = (await mine.retrieve("bot", "Where is staff parking?")).json()
        assert answer["passages"][0]["document_id"] == "parking"
        await _evaluated_on_new_vectors(gw, mine)


async def _evaluated_on_new_vectors(gw: Gateway, mine: Tenant) -> None:
    """With the old vectors retired, an evaluation of the KB ranks and checks grounding
    on the new set with the new model's questions: every document found first."""
    retired = await gw.client.post(PATH + "/retire", headers=mine.headers())
    assert retired.status_code == 200
    stored = await gw.client.put(
        "/v1/knowledge-bases/policies/golden-set", json=GOLDEN, headers=mine.headers()
    )
    assert stored.status_code == 200
    started = await gw.client.post(
        "/v1/knowledge-bases/policies/evaluations", headers=mine.headers()
    )
    assert started.status_code == 202, started.text
    path = f"/v1/knowledge-bases/policies/evaluations/{started.json()['evaluation_id']}"

    async def read() -> dict[str, Any]:
        body: dict[str, Any] = (await gw.client.get(path, headers=mine.headers())).json()
        return body

    done = await _until(read, lambda b: b["status"] != "running")
    assert done["status"] == "done", done
    report = done["report"]
    assert report["channels"]["dense"]["ndcg_10"] == 1.0
    assert report["counts"]["grounding_answers"] > 0
    assert report["recommendation"]["grounding"] is not None


async def _plan_vector(gw: Gateway, tenant: Tenant) -> str:
    """The dense vector set the KB's next turn searches (the settings cache read fresh)."""
    principal = await _principal(gw, tenant)
    context = await plan_turn(gw.services.planning, principal, "bot")
    return context.plans[0].dense_vector


async def _turn_vector(tenant: Tenant) -> str:
    """The vector set the next turn's dense leg searched, as its answer reports it."""
    answer = (await tenant.retrieve("bot", "Where do staff park?")).json()
    return str(answer["effective"]["per_knowledge_base"]["policies"]["dense_vector"])


async def _principal(gw: Gateway, tenant: Tenant) -> Principal:
    return Principal(
        key_id="test",
        roles=frozenset({Role.RETRIEVE}),
        org_id=tenant.org_id,
        tenant_id=tenant.tenant_id,
        clearance=Classification.RESTRICTED,
    )


async def _key_id(gw: Gateway, tenant: Tenant) -> str:
    listed = await gw.client.get(
        f"/v1/keys?org_id={tenant.org_id}&tenant_id={tenant.tenant_id}", headers=tenant.headers()
    )
    return str(listed.json()["keys"][0]["key_id"])


async def test_an_archive_carries_each_vector_sets_model(
    tmp_path: Path, embedder: Embedder
) -> None:
    """A workspace whose KB switched to the new model, the old vectors kept, exports both
    vector sets with the model of each (the manifest names the second set's model and
    size, the KB record the model it answers from); another deployment imports it with
    the same vectors in both sets, its KB answering from the new model's."""
    async with serving(tmp_path / "a", embedder) as source:
        mine = await _policies(source)
        started = await source.client.post(PATH, json={"model": TARGET}, headers=mine.headers())
        assert started.status_code == 202
        await _until(_reader(mine), lambda b: b["status"] == "built")
        switched = await source.client.post(
            PATH + "/switch", json={"override": True}, headers=mine.headers()
        )
        assert switched.status_code == 200
        vector = source.services.models.vector(TARGET)
        exported = await source.client.get(
            "/v1/orgs/acme/workspaces/migrating/export", headers=source.platform
        )
        assert exported.status_code == 200
        before = await _stored(source, "acme", "migrating")
    lines = [json.loads(line) for line in gzip.decompress(exported.content).splitlines()]
    manifest = lines[0]
    assert manifest["vector_sets"] == {vector: {"model": TARGET, "dense_dim": 384}}
    (kb_line,) = [line for line in lines if line["kind"] == "knowledge_base"]
    assert kb_line["embedding_model"] == TARGET
    async with serving(tmp_path / "b", embedder) as target:
        await target.client.post("/v1/orgs", json={"org_id": "beta"}, headers=target.platform)
        imported = await target.client.post(
            "/v1/orgs/beta/workspaces/moved/import",
            content=exported.content,
            headers={**target.platform, "Content-Type": "application/gzip"},
        )
        assert imported.status_code == 201, imported.text
        moved = Tenant(target, "beta", "moved")
        await moved.issue("all", ["admin", "ingest", "retrieve"], "restricted")
        kb = await target.services.store.get_knowledge_base("moved", "policies")
        assert kb is not None
        assert kb.embedding_model == TARGET
        assert await _stored(target, "beta", "moved") == before
        answer = (await moved.retrieve("bot", "Where do staff park?")).json()
        assert answer["passages"][0]["document_id"] == "parking"


async def _stored(gw: Gateway, org_id: str, tenant_id: str) -> list[Any]:
    """Each passage's document, its `dense` vector and its other sets' vectors."""
    scope = Scope.of(
        org_id=org_id,
        tenant_id=tenant_id,
        kb_ids=["policies"],
        clearance=Classification.RESTRICTED,
        strict=False,
    )
    page, _ = await gw.services.index.passages_page(collection_for("org", org_id), scope, None, 100)
    return sorted((p.payload.document_id, p.dense, p.dense_sets) for p in page)


async def test_the_console_shows_a_migrations_progress_and_takes_its_steps(
    tmp_path: Path, embedder: Embedder
) -> None:
    """The calibration page of a KB names the model it answers from; starting a migration
    there shows its status and progress (the page reloading while it builds), an unknown
    model is refused beside its field, switching without a validation needs the override
    box, and after switch and retire the page names the new model."""
    async with serving(tmp_path, embedder) as gw:
        tenant = await _policies(gw)
        signed = await sign_in(gw, tenant.keys["all"])
        assert signed.status_code == 303
        page = (await gw.client.get("/console/calibration?kb_id=policies")).text
        assert f'data-answering="{MINILM_MODEL_NAME}"' in page

        async def step(**form: str) -> str:
            token = await csrf_token(gw)
            posted = await gw.client.post(
                "/console/calibration/migration",
                data={"kb_id": "policies", "csrf_token": token, **form},
                follow_redirects=True,
            )
            return posted.text

        refused = await step(action="start", model="no/such-model")
        assert 'id="migration-model-error"' in refused
        started = await step(action="start", model=TARGET)
        assert 'data-migration="' in started
        await _until(_reader(tenant), lambda b: b["status"] == "built")
        built = (await gw.client.get("/console/calibration?kb_id=policies")).text
        assert 'data-migration="built"' in built
        assert "<strong data-progress>4 / 4</strong>" in built
        assert 'http-equiv="refresh"' not in built
        blocked = await step(action="switch")
        assert "override" in blocked
        assert 'data-migration="built"' in blocked
        switched = await step(action="switch", override="on")
        assert 'data-migration="switched"' in switched
        retired = await step(action="retire")
        assert f'data-answering="{TARGET}"' in retired
        assert 'data-migration="retired"' in retired


async def test_a_switch_policy_validates_and_switches_once_built(
    tmp_path: Path, embedder: Embedder
) -> None:
    """Started with `switch_when_not_worse_by`, a built migration validates the golden set
    as the key that started it and switches when the new set is not worse by more (a step
    and a history entry of its own); without a golden set it says so and leaves the KB on
    its old vectors; a policy outside 0..1 is refused."""
    async with serving(tmp_path, embedder) as gw:
        mine = await _policies(gw)
        await mine.kb("bare")
        await mine.doc("bare", "note", "The canteen serves lunch from noon to two.")
        stored = await gw.client.put(
            "/v1/knowledge-bases/policies/golden-set", json=GOLDEN, headers=mine.headers()
        )
        assert stored.status_code == 200
        wrong = await gw.client.post(
            PATH, json={"model": TARGET, "switch_when_not_worse_by": 2.0}, headers=mine.headers()
        )
        assert wrong.status_code == 422
        assert wrong.json()["field"] == "switch_when_not_worse_by"
        policy = {"model": TARGET, "switch_when_not_worse_by": 1.0}
        for path in (PATH, PATH.replace("policies", "bare")):
            started = await gw.client.post(path, json=policy, headers=mine.headers())
            assert started.status_code == 202, started.text
            assert started.json()["switch_when_not_worse_by"] == 1.0
        switched = await _until(_reader(mine), lambda b: b["status"] != "building" and any(
            s["action"] in {"switched_by_policy", "policy_kept_old"} for s in b["steps"]
        ))  # fmt: skip
        assert switched["status"] == "switched"
        assert switched["steps"][-1]["action"] == "switched_by_policy"
        assert switched["validation"]["status"] == "done"

        async def bare() -> dict[str, Any]:
            response = await gw.client.get(PATH.replace("policies", "bare"), headers=mine.headers())
            body: dict[str, Any] = response.json()
            return body

        skipped = await _until(bare, lambda b: b["steps"][-1]["action"].startswith("policy"))
        assert skipped["status"] == "built"
        assert skipped["steps"][-1]["action"] == "policy_skipped_no_golden_set"
        changes = await gw.client.get(
            "/v1/workspace/changes?kind=knowledge_base&object_id=policies",
            headers=mine.headers(),
        )
        actions = [c["action"] for c in changes.json()["changes"]]
        assert actions[-1] == "model_migration_switched_by_policy"


async def test_a_migrating_kb_keeps_fields_filters_validity_and_keywords_on_both_sets(
    tmp_path: Path, embedder: Embedder
) -> None:
    """A document written while a KB migrates gets both models' vectors and the payload
    any write gives it (its fields, validity, language and page) and its keyword analysis;
    once the KB answers from the new set, a turn's filter and validity still narrow inside
    its Scope there, a code word finds its document by the keyword legs, and the turn
    reports the new set."""
    async with serving(tmp_path, embedder) as gw:
        mine = await provision(gw, "acme", "migrating")
        await mine.kb("policies", metadata_fields={"region": "string"})
        for number, (doc_id, text) in enumerate(DOCUMENTS.items()):
            await _put_described(mine, doc_id, text, {"region": ["eu", "us"][number % 2]})
        await mine.agent("bot", ["policies"])
        started = await gw.client.post(PATH, json={"model": TARGET}, headers=mine.headers())
        assert started.status_code == 202, started.text
        await _put_described(
            mine,
            "old-garage",
            "Garage rules for staff.\n\n\fStaff used to park in the west garage basement "
            "with permit code PERMIT_WEST_7731 until the garage closed.",
            {"region": "eu"},
            valid_until="2020-01-01T00:00:00Z",
        )
        await _until(_reader(mine), lambda b: b["status"] == "built")
        vector = gw.services.models.vector(TARGET)
        page, _ = await gw.services.index.passages_page(
            collection_for("org", "acme"), _scope(mine), None, 100
        )
        (written,) = [p for p in page if p.payload.document_id == "old-garage"]
        assert written.dense
        assert dict(written.dense_sets).keys() == {vector}
        assert written.payload.metadata == {"region": "eu"}
        assert written.payload.valid_until == "2020-01-01T00:00:00Z"
        assert written.payload.language == "en"
        assert written.payload.page in {1, 2}
        switched = await gw.client.post(
            PATH + "/switch", json={"override": True}, headers=mine.headers()
        )
        assert switched.status_code == 200, switched.text
        question = "When are travel costs paid back?"
        mixed = (await mine.retrieve("bot", question)).json()
        assert mixed["effective"]["per_knowledge_base"]["policies"]["dense_vector"] == vector
        assert mixed["passages"][0]["document_id"] == "expenses"
        parking_question = "Where do staff park?"
        narrowed = (await mine.retrieve("bot", parking_question, filter={"region": "us"})).json()
        assert narrowed["effective"]["filtered"] is True
        assert narrowed["passages"][0]["document_id"] == "parking"
        assert {p["metadata"]["region"] for p in narrowed["passages"]} == {"us"}
        elsewhere = (await mine.retrieve("bot", parking_question, filter={"region": "eu"})).json()
        assert "parking" not in {p["document_id"] for p in elsewhere["passages"]}
        parking = (await mine.retrieve("bot", "Where do staff park in the garage?")).json()
        assert "old-garage" not in {p["document_id"] for p in parking["passages"]}
        assert parking["counts"]["passages_expired"] == 1
        then = (await mine.retrieve("bot", "PERMIT_WEST_7731", as_of="2019-06-01T00:00:00Z")).json()
        assert then["passages"][0]["document_id"] == "old-garage"


async def _put_described(
    tenant: Tenant, doc_id: str, text: str, metadata: dict[str, Any], **validity: str
) -> None:
    response = await tenant.gw.client.put(
        f"/v1/knowledge-bases/policies/documents/{doc_id}",
        json={"text": text, "classification": "internal", "metadata": metadata, **validity},
        headers=tenant.headers(),
    )
    assert response.status_code == 200, response.text
