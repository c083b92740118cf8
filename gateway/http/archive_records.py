"""The API's write validation, for an imported archive's records
(`gateway.admin.archive_check.RecordRules`): the same request Structs (strict: unknown
fields and out-of-bound values refused) and the same rules the PATCH and PUT routes apply,
returning the settings as those routes would store them. An archive is untrusted input:
what the API would refuse in a request, the import refuses in an archive."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec

from gateway.admin.calibration import check_golden_set
from gateway.admin.workspace import check_allow_list
from gateway.errors import InvalidInputError
from gateway.http.bodies import (
    agent_settings,
    golden_questions,
    knowledge_base_settings,
    settings_changes,
)
from gateway.http.calibration_schemas import PutGoldenSet
from gateway.http.knowledge_schemas import PutAgent, PutKnowledgeBase
from gateway.http.workspace_schemas import PatchWorkspaceSettings
from settings.golden import GoldenQuestion

S = TypeVar("S", bound=msgspec.Struct)

#: msgspec's place of a fault: "... - at `$.fusion.dense`", or a field it names
_AT = re.compile(r" - at `\$\.?([^`]*)`")
_NAMED = re.compile(r"(?:unknown|missing required) field `([^`]+)`")
#: the golden set record's own fields besides what `PutGoldenSet` takes
_GOLDEN_RECORD = ("kb_id", "updated_at", "updated_by", "tenant_id")


def _strict(kind: type[S], values: Mapping[str, Any]) -> S:
    """`values` as a `kind` request body; InvalidInputError naming the field."""
    try:
        return msgspec.convert(dict(values), type=kind, strict=True)
    except msgspec.ValidationError as error:
        message = str(error)
        named = _NAMED.search(message) or _AT.search(message)
        raise InvalidInputError(message, field=named.group(1) if named else None) from None


def _settings_only(settings: Mapping[str, Any], record_fields: tuple[str, ...]) -> None:
    """A stored settings mapping never holds the record's own fields."""
    for name in record_fields:
        if name in settings:
            raise InvalidInputError(f"unknown setting `{name}`", field=name)


class ApiRecordRules:
    """`gateway.admin.archive_check.RecordRules` by the API's request bodies."""

    def workspace_settings(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        data = _strict(PatchWorkspaceSettings, settings)
        changes = {k: v for k, v in settings_changes(data).items() if v is not None}
        check_allow_list(changes.get("pii_allow_list"))
        stored: dict[str, Any] = msgspec.to_builtins(changes)
        return stored

    def knowledge_base_settings(
        self, name: str, storage: str, settings: Mapping[str, Any]
    ) -> dict[str, Any]:
        _settings_only(settings, ("name", "storage"))
        data = _strict(PutKnowledgeBase, {**settings, "name": name, "storage": storage})
        return {k: v for k, v in knowledge_base_settings(data).items() if v is not None}

    def agent_settings(
        self, knowledge_base_ids: list[str], settings: Mapping[str, Any]
    ) -> dict[str, Any]:
        _settings_only(settings, ("knowledge_base_ids",))
        data = _strict(PutAgent, {**settings, "knowledge_base_ids": knowledge_base_ids})
        return {k: v for k, v in agent_settings(data).items() if v is not None}

    def golden_set(self, golden: Mapping[str, Any]) -> tuple[list[GoldenQuestion], list[str]]:
        body = {k: v for k, v in golden.items() if k not in _GOLDEN_RECORD}
        data = _strict(PutGoldenSet, body)
        questions = golden_questions(data)
        check_golden_set(questions, data.off_topic)
        return questions, list(data.off_topic)


RULES = ApiRecordRules()
