"""The synchronous client, written by `clients/python/codegen.py` from
`_async_client.py` (do not edit: regenerate; a test compares them)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import IO, Any, Literal, TypeVar

import httpx

from kbgate_client import operations as op
from kbgate_client._http import (
    Decoders,
    Prepared,
    Retries,
    ndjson,
    prepare,
    refusal,
    should_retry,
)
from kbgate_client._operation import Operation
from kbgate_client.errors import TransportError
from kbgate_client.models import (
    AdminChangesOut,
    AgentDeletedOut,
    AgentList,
    AgentOut,
    AppliedOut,
    BulkDocument,
    BulkDocumentResult,
    CitationIn,
    CreateKey,
    CreateOrg,
    CreateWorkspace,
    DeletedOut,
    DeletionHistoryOut,
    DocumentList,
    DocumentOut,
    EvaluationList,
    EvaluationOut,
    GoldenSetOut,
    GroundingIn,
    GroundingOut,
    HistoryOut,
    KeyHistoryOut,
    KeyList,
    KeyOut,
    KnowledgeBaseDeletedOut,
    KnowledgeBaseList,
    KnowledgeBaseOut,
    Live,
    MigrationOut,
    OrgDeletedOut,
    OrgOut,
    PatchWorkspaceSettings,
    PutAgent,
    PutDocument,
    PutGoldenSet,
    PutKnowledgeBase,
    Ready,
    RedactIn,
    RedactOut,
    RetrieveIn,
    RetrieveOut,
    RevokedOut,
    StartMigration,
    StatsOut,
    SwitchMigration,
    VerifyIn,
    VerifyOut,
    WorkspaceDeletedOut,
    WorkspaceImportedOut,
    WorkspaceOut,
    WorkspaceSettingsOut,
)

B = TypeVar("B")
R = TypeVar("R")
_CHUNK = 1 << 16


class Client:
    """kbgate's HTTP API with one key (`key`; `with_key` for another on the same
    connections). Answers are typed; refusals raise `ProblemError` subclasses; 429 and 503
    are retried as `retries` says; no answer raises `TransportError`.

    `transport` serves tests and in-process apps (`httpx.ASGITransport`); `http` is an
    httpx client to share (it is then not closed here)."""

    def __init__(
        self,
        base_url: str,
        key: str | None = None,
        *,
        timeout_s: float = 60.0,
        retries: Retries | None = None,
        transport: httpx.BaseTransport | None = None,
        http: httpx.Client | None = None,
    ) -> None:
        self._http = http or httpx.Client(
            base_url=base_url.rstrip("/"), timeout=timeout_s, transport=transport
        )
        self._owns_http = http is None
        self._key = key
        self.retries = retries or Retries()
        self._decoders = Decoders()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({str(self._http.base_url)!r}, key={'…' if self._key else None})"
        )

    def with_key(self, key: str | None) -> Client:
        """The same gateway and connections, calling with `key`."""
        return Client(str(self._http.base_url), key, retries=self.retries, http=self._http)

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    # ---- any operation -------------------------------------------------------------

    def call(
        self,
        operation: Operation[B, R],
        body: B | None = None,
        *,
        params: Mapping[str, str] | None = None,
        query: Mapping[str, str | None] | None = None,
    ) -> R:
        """Call one operation of `kbgate_client.operations`; its answer, typed."""
        prepared = prepare(operation, self._key, body, params or {}, query)
        response = self._send(prepared)
        return self._decoders.decode(operation.answer, response.content)

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """One raw request with this client's key, not retried and not raised: for
        callers that read the status and body themselves."""
        sent = {"Accept": "application/json", **(headers or {})}
        if self._key is not None:
            sent["Authorization"] = f"Bearer {self._key}"
        try:
            return self._http.request(method, path, json=json, content=content, headers=sent)
        except httpx.HTTPError as error:
            raise TransportError(
                f"{method} {path}: {type(error).__name__}: {error}",
                timed_out=isinstance(error, httpx.TimeoutException),
            ) from None

    def _send(self, prepared: Prepared) -> httpx.Response:
        attempt = 0
        while True:
            try:
                response = self._http.request(
                    prepared.method,
                    prepared.url,
                    content=prepared.content,
                    headers=prepared.headers,
                    params=prepared.query,
                )
            except httpx.ConnectError as error:
                wait = self.retries.delay(attempt, None) if self.retries.connect_errors else None
                if wait is None:
                    raise _unreachable(prepared, error) from None
            except httpx.HTTPError as error:
                raise _unreachable(prepared, error) from None
            else:
                if response.is_success:
                    return response
                wait = should_retry(self.retries, response, attempt)
                if wait is None:
                    raise refusal(response, response.content)
            attempt += 1
            time.sleep(wait)

    @contextmanager
    def _stream(self, prepared: Prepared) -> Iterator[httpx.Response]:
        """A successful answer, open for reading as it arrives."""
        attempt = 0
        while True:
            try:
                with self._http.stream(
                    prepared.method,
                    prepared.url,
                    content=prepared.content,
                    headers=prepared.headers,
                    params=prepared.query,
                ) as response:
                    if response.is_success:
                        yield response
                        return
                    body = response.read()
                    wait = should_retry(self.retries, response, attempt)
                    if wait is None:
                        raise refusal(response, body)
            except httpx.ConnectError as error:
                wait = self.retries.delay(attempt, None) if self.retries.connect_errors else None
                if wait is None:
                    raise _unreachable(prepared, error) from None
            except httpx.HTTPError as error:
                raise _unreachable(prepared, error) from None
            attempt += 1
            time.sleep(wait)

    # ---- a chat backend's calls ----------------------------------------------------

    def retrieve(
        self, agent_id: str, question: str, *, variations: Sequence[str] = ()
    ) -> RetrieveOut:
        """Evidence for a question: passages, and `context` fenced as untrusted."""
        body = RetrieveIn(agent_id=agent_id, question=question, variations=list(variations))
        return self.call(op.retrieve, body)

    def verify_citations(self, turn_id: str, citations: Sequence[CitationIn]) -> VerifyOut:
        """Which citations name a passage the turn returned (and quote it, when quoted)."""
        return self.call(op.verify_citations, VerifyIn(turn_id=turn_id, citations=list(citations)))

    def check_grounding(
        self, agent_id: str, answer: str, *, mode: Literal["whole", "sentences"] = "whole"
    ) -> GroundingOut:
        """Whether an answer is supported by the agent's knowledge bases."""
        return self.call(
            op.check_grounding, GroundingIn(agent_id=agent_id, answer=answer, mode=mode)
        )

    def redact(self, body: RedactIn) -> RedactOut:
        return self.call(op.redact, body)

    # ---- health --------------------------------------------------------------------

    def live(self) -> Live:
        return self.call(op.live)

    def ready(self) -> Ready:
        return self.call(op.ready)

    def metrics(self) -> bytes:
        return self.call(op.metrics)

    # ---- organizations, workspaces, keys (the platform key) ------------------------

    def create_org(self, org_id: str) -> OrgOut:
        return self.call(op.create_org, CreateOrg(org_id=org_id))

    def delete_org(self, org_id: str) -> OrgDeletedOut:
        return self.call(op.delete_org, params={"org_id": org_id})

    def create_workspace(
        self, org_id: str, tenant_id: str, *, created_at: str | None = None
    ) -> WorkspaceOut:
        body = CreateWorkspace(tenant_id=tenant_id, created_at=created_at)
        return self.call(op.create_workspace, body, params={"org_id": org_id})

    def delete_workspace(self, org_id: str, tenant_id: str) -> WorkspaceDeletedOut:
        params = {"org_id": org_id, "tenant_id": tenant_id}
        return self.call(op.delete_workspace, params=params)

    def list_deletions(self) -> DeletionHistoryOut:
        return self.call(op.list_deletions)

    def export_workspace(self, org_id: str, tenant_id: str, into: IO[bytes]) -> int:
        """Write the workspace's archive into `into`; how many bytes."""
        params = {"org_id": org_id, "tenant_id": tenant_id}
        prepared = prepare(op.export_workspace, self._key, None, params, None)
        written = 0
        try:
            with self._stream(prepared) as response:
                for chunk in response.iter_bytes(_CHUNK):
                    into.write(chunk)
                    written += len(chunk)
        except httpx.HTTPError as error:
            raise _unreachable(prepared, error) from None
        return written

    def import_workspace(self, org_id: str, tenant_id: str, archive: bytes) -> WorkspaceImportedOut:
        """Create the workspace from an archive `export_workspace` wrote."""
        params = {"org_id": org_id, "tenant_id": tenant_id}
        return self.call(op.import_workspace, archive, params=params)

    def create_key(self, body: CreateKey) -> KeyOut:
        return self.call(op.create_key, body)

    def list_keys(self, *, org_id: str | None = None, tenant_id: str | None = None) -> KeyList:
        query = {"org_id": org_id, "tenant_id": tenant_id}
        return self.call(op.list_keys, query=query)

    def get_key_history(
        self, *, org_id: str | None = None, tenant_id: str | None = None
    ) -> KeyHistoryOut:
        query = {"org_id": org_id, "tenant_id": tenant_id}
        return self.call(op.get_key_history, query=query)

    def revoke_key(self, key_id: str) -> RevokedOut:
        return self.call(op.revoke_key, params={"key_id": key_id})

    # ---- knowledge bases and documents ---------------------------------------------

    def put_knowledge_base(
        self, kb_id: str, body: PutKnowledgeBase | None = None
    ) -> KnowledgeBaseOut:
        body = body or PutKnowledgeBase()
        return self.call(op.put_knowledge_base, body, params={"kb_id": kb_id})

    def get_knowledge_base(self, kb_id: str) -> KnowledgeBaseOut:
        return self.call(op.get_knowledge_base, params={"kb_id": kb_id})

    def list_knowledge_bases(self) -> KnowledgeBaseList:
        return self.call(op.list_knowledge_bases)

    def delete_knowledge_base(self, kb_id: str) -> KnowledgeBaseDeletedOut:
        return self.call(op.delete_knowledge_base, params={"kb_id": kb_id})

    def get_knowledge_base_stats(self, kb_id: str) -> StatsOut:
        return self.call(op.get_knowledge_base_stats, params={"kb_id": kb_id})

    def list_documents(self, kb_id: str) -> DocumentList:
        return self.call(op.list_documents, params={"kb_id": kb_id})

    def put_document(self, kb_id: str, document_id: str, body: PutDocument) -> DocumentOut:
        params = {"kb_id": kb_id, "document_id": document_id}
        return self.call(op.put_document, body, params=params)

    def put_documents(
        self, kb_id: str, documents: Iterable[BulkDocument]
    ) -> Iterator[BulkDocumentResult]:
        """Write many documents in one request; each line's result as the gateway sends it
        (once that document is durable)."""
        prepared = prepare(op.put_documents, self._key, ndjson(documents), {"kb_id": kb_id}, None)
        try:
            with self._stream(prepared) as response:
                for line in response.iter_lines():
                    if line.strip():
                        yield self._decoders.decode(BulkDocumentResult, line.encode("utf-8"))
        except httpx.HTTPError as error:
            raise _unreachable(prepared, error) from None

    def delete_document(self, kb_id: str, document_id: str) -> DeletedOut:
        params = {"kb_id": kb_id, "document_id": document_id}
        return self.call(op.delete_document, params=params)

    # ---- agents --------------------------------------------------------------------

    def put_agent(self, agent_id: str, body: PutAgent) -> AgentOut:
        return self.call(op.put_agent, body, params={"agent_id": agent_id})

    def get_agent(self, agent_id: str) -> AgentOut:
        return self.call(op.get_agent, params={"agent_id": agent_id})

    def list_agents(self) -> AgentList:
        return self.call(op.list_agents)

    def delete_agent(self, agent_id: str) -> AgentDeletedOut:
        return self.call(op.delete_agent, params={"agent_id": agent_id})

    # ---- workspace settings and history --------------------------------------------

    def get_workspace_settings(self) -> WorkspaceSettingsOut:
        return self.call(op.get_workspace_settings)

    def patch_workspace_settings(self, body: PatchWorkspaceSettings) -> WorkspaceSettingsOut:
        return self.call(op.patch_workspace_settings, body)

    def get_workspace_settings_history(self) -> HistoryOut:
        return self.call(op.get_workspace_settings_history)

    def get_workspace_changes(
        self, *, kind: str | None = None, object_id: str | None = None
    ) -> AdminChangesOut:
        query = {"kind": kind, "object_id": object_id}
        return self.call(op.get_workspace_changes, query=query)

    # ---- calibration ---------------------------------------------------------------

    def put_golden_set(self, kb_id: str, body: PutGoldenSet) -> GoldenSetOut:
        return self.call(op.put_golden_set, body, params={"kb_id": kb_id})

    def get_golden_set(self, kb_id: str) -> GoldenSetOut:
        return self.call(op.get_golden_set, params={"kb_id": kb_id})

    def start_evaluation(self, kb_id: str) -> EvaluationOut:
        return self.call(op.start_evaluation, params={"kb_id": kb_id})

    def list_evaluations(self, kb_id: str) -> EvaluationList:
        return self.call(op.list_evaluations, params={"kb_id": kb_id})

    def get_evaluation(self, kb_id: str, evaluation_id: str) -> EvaluationOut:
        params = {"kb_id": kb_id, "evaluation_id": evaluation_id}
        return self.call(op.get_evaluation, params=params)

    def apply_evaluation(self, kb_id: str, evaluation_id: str) -> AppliedOut:
        params = {"kb_id": kb_id, "evaluation_id": evaluation_id}
        return self.call(op.apply_evaluation, params=params)

    # ---- a KB's model migration ----------------------------------------------------

    def start_model_migration(self, kb_id: str, body: StartMigration) -> MigrationOut:
        return self.call(op.start_model_migration, body, params={"kb_id": kb_id})

    def get_model_migration(self, kb_id: str) -> MigrationOut:
        return self.call(op.get_model_migration, params={"kb_id": kb_id})

    def validate_model_migration(self, kb_id: str) -> MigrationOut:
        return self.call(op.validate_model_migration, params={"kb_id": kb_id})

    def switch_model_migration(
        self, kb_id: str, body: SwitchMigration | None = None
    ) -> MigrationOut:
        body = body or SwitchMigration()
        return self.call(op.switch_model_migration, body, params={"kb_id": kb_id})

    def roll_back_model_migration(self, kb_id: str) -> MigrationOut:
        return self.call(op.roll_back_model_migration, params={"kb_id": kb_id})

    def retire_model_migration(self, kb_id: str) -> MigrationOut:
        return self.call(op.retire_model_migration, params={"kb_id": kb_id})

    def cancel_model_migration(self, kb_id: str) -> MigrationOut:
        return self.call(op.cancel_model_migration, params={"kb_id": kb_id})


def _unreachable(prepared: Prepared, error: httpx.HTTPError) -> TransportError:
    return TransportError(
        f"{prepared.method} {prepared.url}: {type(error).__name__}: {error}",
        timed_out=isinstance(error, httpx.TimeoutException),
    )
