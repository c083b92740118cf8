"""A KB's golden set, its evaluations, and applying an evaluation's recommendation.

Everything acts inside the caller's workspace: a KB or evaluation id is looked up with
the principal's tenant, so another workspace's reads as unknown (404 alike). Applying
writes the recommended settings through the normal KB path (`put_knowledge_base`) and
records each changed setting in the workspace's settings history with the key that
applied it and the evaluation it came from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec

from gateway.access.auth import Principal
from gateway.admin.knowledge import Knowledge, check_id, knowledge_base_of, put_knowledge_base
from gateway.calibration import runner
from gateway.calibration.report import EvaluationReport, Weights
from gateway.errors import ConflictError, InvalidInputError, NotFoundError
from gateway.telemetry import Telemetry
from settings.golden import Evaluation, EvaluationStatus, GoldenQuestion, GoldenSet
from settings.records import KnowledgeBase, SettingChange
from settings.store import SettingsStore
from settings.store_rules import apply_setting_changes


@dataclass(frozen=True, slots=True)
class Calibration:
    """What a KB's golden set, its evaluations and applying one use: their records in the
    store, the evaluations run in the background, the KB path `apply` writes through (and
    the measured lines a workspace's deletion forgets), and counts."""

    store: SettingsStore
    evaluations: runner.Evaluations
    knowledge: Knowledge
    telemetry: Telemetry


def _now() -> str:
    return datetime.now(UTC).isoformat()


# ---- golden sets ---------------------------------------------------------------------


async def put_golden_set(
    calibration: Calibration,
    principal: Principal,
    kb_id: str,
    questions: Sequence[GoldenQuestion],
    off_topic: Sequence[str],
) -> GoldenSet:
    """Store the KB's golden set (replacing any); InvalidInputError naming the first
    field that breaks a rule, before anything is stored."""
    kb = await knowledge_base_of(calibration.store, principal, kb_id)
    check_golden_set(questions, off_topic)
    golden = GoldenSet(
        tenant_id=principal.tenant_id,
        kb_id=kb.kb_id,
        questions=list(questions),
        off_topic=list(off_topic),
        updated_at=_now(),
        updated_by=principal.key_id,
    )
    await calibration.store.put_golden_set(golden)
    calibration.telemetry.count("golden_sets_stored")
    return golden


def check_golden_set(questions: Sequence[GoldenQuestion], off_topic: Sequence[str]) -> None:
    """InvalidInputError naming the first field of a golden set that breaks a rule the
    request body's schema cannot say (blank text, bad or repeated ids, grades)."""
    for position, question in enumerate(questions):
        _check_question(question, f"questions[{position}]")
    for position, text in enumerate(off_topic):
        if not text.strip():
            raise InvalidInputError("must not be blank", field=f"off_topic[{position}]")


def _check_question(question: GoldenQuestion, where: str) -> None:
    if not question.question.strip():
        raise InvalidInputError("must not be blank", field=f"{where}.question")
    for document_id in question.document_ids:
        check_id(document_id, f"{where}.document_ids")
    if len(set(question.document_ids)) != len(question.document_ids):
        raise InvalidInputError("a document is listed twice", field=f"{where}.document_ids")
    if question.grades is not None and len(question.grades) != len(question.document_ids):
        raise InvalidInputError("needs one grade per document id", field=f"{where}.grades")


async def golden_set_of(store: SettingsStore, principal: Principal, kb_id: str) -> GoldenSet:
    """The KB's golden set; NotFoundError when the KB is unknown or has none."""
    kb = await knowledge_base_of(store, principal, kb_id)
    golden = await store.get_golden_set(principal.tenant_id, kb.kb_id)
    if golden is None:
        raise NotFoundError("this knowledge base has no golden set", field="golden_set")
    return golden


# ---- evaluations ---------------------------------------------------------------------


async def start_evaluation(
    calibration: Calibration, principal: Principal, kb_id: str
) -> Evaluation:
    """Start evaluating the KB's golden set in the background; ConflictError when it has
    none, or while another evaluation of the workspace runs."""
    kb = await knowledge_base_of(calibration.store, principal, kb_id)
    golden = await calibration.store.get_golden_set(principal.tenant_id, kb.kb_id)
    if golden is None:
        raise ConflictError(
            "this knowledge base has no golden set: PUT one first", field="golden_set"
        )
    return await runner.start(calibration.evaluations, principal, kb, golden)


async def evaluation_of(
    store: SettingsStore, principal: Principal, kb_id: str, evaluation_id: str
) -> Evaluation:
    """One of the KB's evaluations; NotFoundError for unknown and foreign ids alike."""
    kb = await knowledge_base_of(store, principal, kb_id)
    found = await store.get_evaluation(principal.tenant_id, evaluation_id)
    if found is None or found.kb_id != kb.kb_id:
        raise NotFoundError("no such evaluation")
    return runner.shown(found)


async def evaluations(store: SettingsStore, principal: Principal, kb_id: str) -> list[Evaluation]:
    """The KB's evaluations, newest first."""
    kb = await knowledge_base_of(store, principal, kb_id)
    found = await store.list_evaluations(principal.tenant_id, kb.kb_id)
    return [runner.shown(evaluation) for evaluation in found]


def report_of(evaluation: Evaluation) -> EvaluationReport | None:
    """The evaluation's report (None until it is done)."""
    if evaluation.report is None:
        return None
    return msgspec.convert(evaluation.report, EvaluationReport)


async def forget(calibration: Calibration, tenant_id: str, kb_id: str | None = None) -> int:
    """Stop the KB's (None: the workspace's) running evaluations in this process, forget
    its measured off-topic lines and delete its golden sets, evaluations and kept lines;
    returns how many golden sets and evaluations went."""
    calibration.evaluations.background.cancel_where(runner.of_workspace(tenant_id, kb_id))
    calibration.knowledge.lines.forget(tenant_id, kb_id)
    return await calibration.store.delete_calibration(tenant_id, kb_id)


# ---- apply ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Applied:
    kb: KnowledgeBase
    evaluation: Evaluation
    changes: list[SettingChange]


async def apply(
    calibration: Calibration, principal: Principal, kb_id: str, evaluation_id: str
) -> Applied:
    """Write the evaluation's recommended settings to its KB; ConflictError unless it is
    done."""
    evaluation = await evaluation_of(calibration.store, principal, kb_id, evaluation_id)
    report = report_of(evaluation)
    if evaluation.status is not EvaluationStatus.DONE or report is None:
        raise ConflictError(
            f"the evaluation is {evaluation.status.value}: only a finished one can be applied",
            field="evaluation_id",
        )
    kb = await knowledge_base_of(calibration.store, principal, kb_id)
    recommended = {name: _stored(value) for name, value in report.recommendation.changes.items()}
    at = _now()
    settings, history = apply_setting_changes(
        kb.settings, recommended, key_id=principal.key_id, at=at
    )
    if history:
        kb, _ = await put_knowledge_base(
            calibration.knowledge,
            principal,
            kb.kb_id,
            name=kb.name,
            storage=kb.storage,
            settings=settings,
        )
    changes = [
        msgspec.structs.replace(change, knowledge_base_id=kb.kb_id, evaluation_id=evaluation_id)
        for change in history
    ]
    if changes:
        await calibration.store.append_settings_history(principal.tenant_id, changes)
    evaluation = msgspec.structs.replace(evaluation, applied_at=at, applied_by=principal.key_id)
    await calibration.store.update_evaluation(evaluation, lease_s=runner.LEASE_S)
    calibration.telemetry.count("evaluations_applied")
    return Applied(kb=kb, evaluation=evaluation, changes=changes)


def _stored(value: float | Weights) -> Any:
    """A recommended value as a KB's settings store it."""
    return msgspec.structs.asdict(value) if isinstance(value, Weights) else value
