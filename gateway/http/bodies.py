"""What each write request's body stores: the settings a KB, agent or workspace write
keeps, the questions a golden set PUT stores. The routes, the admin console's forms, an
archive import's record rules (`gateway.http.archive_records`) and the CLI share them."""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.http.calibration_schemas import PutGoldenSet
from gateway.http.knowledge_schemas import PutAgent, PutKnowledgeBase
from gateway.http.workspace_schemas import PatchWorkspaceSettings
from settings.golden import GoldenQuestion


def knowledge_base_settings(data: PutKnowledgeBase) -> dict[str, Any]:
    """The settings a KB's PUT stores (None: not set here)."""
    return {
        "top_k": data.top_k,
        "score_threshold": data.score_threshold,
        "keyword_floor": data.keyword_floor,
        "grounding_floor": data.grounding_floor,
        "fusion": None
        if data.fusion is None
        else {"dense": data.fusion.dense, "keyword": data.fusion.keyword},
        "drop_copies": data.drop_copies,
        "metadata_fields": None if data.metadata_fields is None else dict(data.metadata_fields),
        "language": None
        if data.language is None
        else {
            key: value
            for key, value in msgspec.structs.asdict(data.language).items()
            if value is not None
        },
    }


def agent_settings(data: PutAgent) -> dict[str, Any]:
    """The settings an agent PUT stores (None: not set here)."""
    return {
        "top_k": data.top_k,
        "score_threshold": data.score_threshold,
        "pii_redaction": data.pii_redaction,
        "filter": data.filter,
    }


def settings_changes(data: PatchWorkspaceSettings) -> dict[str, Any]:
    """The workspace settings a PATCH sent (None resets)."""
    return {
        name: value
        for name, value in msgspec.structs.asdict(data).items()
        if value is not msgspec.UNSET
    }


def golden_questions(data: PutGoldenSet) -> list[GoldenQuestion]:
    """The questions a golden set's PUT stores."""
    return [
        GoldenQuestion(
            question=question.question,
            document_ids=list(question.document_ids),
            grades=None if question.grades is None else list(question.grades),
        )
        for question in data.questions
    ]
