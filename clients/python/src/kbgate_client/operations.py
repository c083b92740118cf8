"""Every operation of kbgate's HTTP API: method, path, body and answer, written by
`clients/python/codegen.py` from the OpenAPI document (do not edit: regenerate).
"""

from __future__ import annotations

from kbgate_client._operation import Operation
from kbgate_client.models import (
    AdminChangesOut,
    AgentDeletedOut,
    AgentList,
    AgentOut,
    AppliedOut,
    BulkDocument,
    BulkDocumentResult,
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

apply_evaluation: Operation[None, AppliedOut] = Operation(
    "applyEvaluation",
    "POST",
    "/v1/knowledge-bases/{kb_id}/evaluations/{evaluation_id}/apply",
    body=None,
    answer=AppliedOut,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

cancel_model_migration: Operation[None, MigrationOut] = Operation(
    "cancelModelMigration",
    "DELETE",
    "/v1/knowledge-bases/{kb_id}/model-migration",
    body=None,
    answer=MigrationOut,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

check_grounding: Operation[GroundingIn, GroundingOut] = Operation(
    "checkGrounding",
    "POST",
    "/v1/grounding/check",
    body=GroundingIn,
    answer=GroundingOut,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

create_key: Operation[CreateKey, KeyOut] = Operation(
    "createKey",
    "POST",
    "/v1/keys",
    body=CreateKey,
    answer=KeyOut,
    status=201,
    media_type="application/json",
    query=(),
    keyed=True,
)

create_org: Operation[CreateOrg, OrgOut] = Operation(
    "createOrg",
    "POST",
    "/v1/orgs",
    body=CreateOrg,
    answer=OrgOut,
    status=201,
    media_type="application/json",
    query=(),
    keyed=True,
)

create_workspace: Operation[CreateWorkspace, WorkspaceOut] = Operation(
    "createWorkspace",
    "POST",
    "/v1/orgs/{org_id}/workspaces",
    body=CreateWorkspace,
    answer=WorkspaceOut,
    status=201,
    media_type="application/json",
    query=(),
    keyed=True,
)

delete_agent: Operation[None, AgentDeletedOut] = Operation(
    "deleteAgent",
    "DELETE",
    "/v1/agents/{agent_id}",
    body=None,
    answer=AgentDeletedOut,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

delete_document: Operation[None, DeletedOut] = Operation(
    "deleteDocument",
    "DELETE",
    "/v1/knowledge-bases/{kb_id}/documents/{document_id}",
    body=None,
    answer=DeletedOut,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

delete_knowledge_base: Operation[None, KnowledgeBaseDeletedOut] = Operation(
    "deleteKnowledgeBase",
    "DELETE",
    "/v1/knowledge-bases/{kb_id}",
    body=None,
    answer=KnowledgeBaseDeletedOut,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

delete_org: Operation[None, OrgDeletedOut] = Operation(
    "deleteOrg",
    "DELETE",
    "/v1/orgs/{org_id}",
    body=None,
    answer=OrgDeletedOut,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

delete_workspace: Operation[None, WorkspaceDeletedOut] = Operation(
    "deleteWorkspace",
    "DELETE",
    "/v1/orgs/{org_id}/workspaces/{tenant_id}",
    body=None,
    answer=WorkspaceDeletedOut,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

export_workspace: Operation[None, bytes] = Operation(
    "exportWorkspace",
    "GET",
    "/v1/orgs/{org_id}/workspaces/{tenant_id}/export",
    body=None,
    answer=bytes,
    status=200,
    media_type="application/gzip",
    query=(),
    keyed=True,
)

get_agent: Operation[None, AgentOut] = Operation(
    "getAgent",
    "GET",
    "/v1/agents/{agent_id}",
    body=None,
    answer=AgentOut,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

get_evaluation: Operation[None, EvaluationOut] = Operation(
    "getEvaluation",
    "GET",
    "/v1/knowledge-bases/{kb_id}/evaluations/{evaluation_id}",
    body=None,
    answer=EvaluationOut,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

get_golden_set: Operation[None, GoldenSetOut] = Operation(
    "getGoldenSet",
    "GET",
    "/v1/knowledge-bases/{kb_id}/golden-set",
    body=None,
    answer=GoldenSetOut,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

get_key_history: Operation[None, KeyHistoryOut] = Operation(
    "getKeyHistory",
    "GET",
    "/v1/keys/history",
    body=None,
    answer=KeyHistoryOut,
    status=200,
    media_type="application/json",
    query=("org_id", "tenant_id"),
    keyed=True,
)

get_knowledge_base: Operation[None, KnowledgeBaseOut] = Operation(
    "getKnowledgeBase",
    "GET",
    "/v1/knowledge-bases/{kb_id}",
    body=None,
    answer=KnowledgeBaseOut,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

get_knowledge_base_stats: Operation[None, StatsOut] = Operation(
    "getKnowledgeBaseStats",
    "GET",
    "/v1/knowledge-bases/{kb_id}/stats",
    body=None,
    answer=StatsOut,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

get_model_migration: Operation[None, MigrationOut] = Operation(
    "getModelMigration",
    "GET",
    "/v1/knowledge-bases/{kb_id}/model-migration",
    body=None,
    answer=MigrationOut,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

get_workspace_changes: Operation[None, AdminChangesOut] = Operation(
    "getWorkspaceChanges",
    "GET",
    "/v1/workspace/changes",
    body=None,
    answer=AdminChangesOut,
    status=200,
    media_type="application/json",
    query=("kind", "object_id"),
    keyed=True,
)

get_workspace_settings: Operation[None, WorkspaceSettingsOut] = Operation(
    "getWorkspaceSettings",
    "GET",
    "/v1/workspace/settings",
    body=None,
    answer=WorkspaceSettingsOut,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

get_workspace_settings_history: Operation[None, HistoryOut] = Operation(
    "getWorkspaceSettingsHistory",
    "GET",
    "/v1/workspace/settings/history",
    body=None,
    answer=HistoryOut,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

import_workspace: Operation[bytes, WorkspaceImportedOut] = Operation(
    "importWorkspace",
    "POST",
    "/v1/orgs/{org_id}/workspaces/{tenant_id}/import",
    body=bytes,
    answer=WorkspaceImportedOut,
    status=201,
    media_type="application/json",
    query=(),
    keyed=True,
)

list_agents: Operation[None, AgentList] = Operation(
    "listAgents",
    "GET",
    "/v1/agents",
    body=None,
    answer=AgentList,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

list_deletions: Operation[None, DeletionHistoryOut] = Operation(
    "listDeletions",
    "GET",
    "/v1/deletions",
    body=None,
    answer=DeletionHistoryOut,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

list_documents: Operation[None, DocumentList] = Operation(
    "listDocuments",
    "GET",
    "/v1/knowledge-bases/{kb_id}/documents",
    body=None,
    answer=DocumentList,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

list_evaluations: Operation[None, EvaluationList] = Operation(
    "listEvaluations",
    "GET",
    "/v1/knowledge-bases/{kb_id}/evaluations",
    body=None,
    answer=EvaluationList,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

list_keys: Operation[None, KeyList] = Operation(
    "listKeys",
    "GET",
    "/v1/keys",
    body=None,
    answer=KeyList,
    status=200,
    media_type="application/json",
    query=("org_id", "tenant_id"),
    keyed=True,
)

list_knowledge_bases: Operation[None, KnowledgeBaseList] = Operation(
    "listKnowledgeBases",
    "GET",
    "/v1/knowledge-bases",
    body=None,
    answer=KnowledgeBaseList,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

live: Operation[None, Live] = Operation(
    "live",
    "GET",
    "/health/live",
    body=None,
    answer=Live,
    status=200,
    media_type="application/json",
    query=(),
    keyed=False,
)

metrics: Operation[None, bytes] = Operation(
    "metrics",
    "GET",
    "/metrics",
    body=None,
    answer=bytes,
    status=200,
    media_type="text/plain; version=0.0.4; charset=utf-8",
    query=(),
    keyed=True,
)

patch_workspace_settings: Operation[PatchWorkspaceSettings, WorkspaceSettingsOut] = Operation(
    "patchWorkspaceSettings",
    "PATCH",
    "/v1/workspace/settings",
    body=PatchWorkspaceSettings,
    answer=WorkspaceSettingsOut,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

put_agent: Operation[PutAgent, AgentOut] = Operation(
    "putAgent",
    "PUT",
    "/v1/agents/{agent_id}",
    body=PutAgent,
    answer=AgentOut,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

put_document: Operation[PutDocument, DocumentOut] = Operation(
    "putDocument",
    "PUT",
    "/v1/knowledge-bases/{kb_id}/documents/{document_id}",
    body=PutDocument,
    answer=DocumentOut,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

put_documents: Operation[BulkDocument, BulkDocumentResult] = Operation(
    "putDocuments",
    "POST",
    "/v1/knowledge-bases/{kb_id}/documents",
    body=BulkDocument,
    answer=BulkDocumentResult,
    status=200,
    media_type="application/x-ndjson",
    query=(),
    keyed=True,
)

put_golden_set: Operation[PutGoldenSet, GoldenSetOut] = Operation(
    "putGoldenSet",
    "PUT",
    "/v1/knowledge-bases/{kb_id}/golden-set",
    body=PutGoldenSet,
    answer=GoldenSetOut,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

put_knowledge_base: Operation[PutKnowledgeBase, KnowledgeBaseOut] = Operation(
    "putKnowledgeBase",
    "PUT",
    "/v1/knowledge-bases/{kb_id}",
    body=PutKnowledgeBase,
    answer=KnowledgeBaseOut,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

ready: Operation[None, Ready] = Operation(
    "ready",
    "GET",
    "/health/ready",
    body=None,
    answer=Ready,
    status=200,
    media_type="application/json",
    query=(),
    keyed=False,
)

redact: Operation[RedactIn, RedactOut] = Operation(
    "redact",
    "POST",
    "/v1/redact",
    body=RedactIn,
    answer=RedactOut,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

retire_model_migration: Operation[None, MigrationOut] = Operation(
    "retireModelMigration",
    "POST",
    "/v1/knowledge-bases/{kb_id}/model-migration/retire",
    body=None,
    answer=MigrationOut,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

retrieve: Operation[RetrieveIn, RetrieveOut] = Operation(
    "retrieve",
    "POST",
    "/v1/retrieve",
    body=RetrieveIn,
    answer=RetrieveOut,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

revoke_key: Operation[None, RevokedOut] = Operation(
    "revokeKey",
    "DELETE",
    "/v1/keys/{key_id}",
    body=None,
    answer=RevokedOut,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

roll_back_model_migration: Operation[None, MigrationOut] = Operation(
    "rollBackModelMigration",
    "POST",
    "/v1/knowledge-bases/{kb_id}/model-migration/rollback",
    body=None,
    answer=MigrationOut,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

start_evaluation: Operation[None, EvaluationOut] = Operation(
    "startEvaluation",
    "POST",
    "/v1/knowledge-bases/{kb_id}/evaluations",
    body=None,
    answer=EvaluationOut,
    status=202,
    media_type="application/json",
    query=(),
    keyed=True,
)

start_model_migration: Operation[StartMigration, MigrationOut] = Operation(
    "startModelMigration",
    "POST",
    "/v1/knowledge-bases/{kb_id}/model-migration",
    body=StartMigration,
    answer=MigrationOut,
    status=202,
    media_type="application/json",
    query=(),
    keyed=True,
)

switch_model_migration: Operation[SwitchMigration, MigrationOut] = Operation(
    "switchModelMigration",
    "POST",
    "/v1/knowledge-bases/{kb_id}/model-migration/switch",
    body=SwitchMigration,
    answer=MigrationOut,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)

validate_model_migration: Operation[None, MigrationOut] = Operation(
    "validateModelMigration",
    "POST",
    "/v1/knowledge-bases/{kb_id}/model-migration/validate",
    body=None,
    answer=MigrationOut,
    status=202,
    media_type="application/json",
    query=(),
    keyed=True,
)

verify_citations: Operation[VerifyIn, VerifyOut] = Operation(
    "verifyCitations",
    "POST",
    "/v1/citations/verify",
    body=VerifyIn,
    answer=VerifyOut,
    status=200,
    media_type="application/json",
    query=(),
    keyed=True,
)
