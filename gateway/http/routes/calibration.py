"""A KB's golden set and its evaluations (admin role, own workspace only)."""

from __future__ import annotations

from litestar import Controller, Request, Response, get, post, put
from litestar.datastructures import State
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromPath, JSONBody

from gateway.access.auth import Principal
from gateway.admin import calibration as admin
from gateway.admin.calibration import Calibration
from gateway.http.bodies import golden_questions
from gateway.http.calibration_schemas import (
    AppliedOut,
    EvaluationList,
    EvaluationOut,
    EvaluationSummary,
    GoldenQuestionOut,
    GoldenSetOut,
    ProgressOut,
    PutGoldenSet,
)
from gateway.http.dependencies import Injected
from gateway.http.openapi import BEARER, BODY, KEYED, problems
from gateway.http.routes.knowledge import knowledge_base_out
from gateway.http.security import requires
from gateway.http.workspace_schemas import SettingChangeOut
from gateway.retrieval.plan import Planning
from settings.golden import Evaluation, GoldenSet
from settings.records import Role
from settings.store import SettingsStore

AnyRequest = Request[Principal, str, State]
KB = "/knowledge-bases/{kb_id:str}"
EVALUATION = KB + "/evaluations/{evaluation_id:str}"


def golden_set_out(golden: GoldenSet) -> GoldenSetOut:
    return GoldenSetOut(
        kb_id=golden.kb_id,
        questions=[
            GoldenQuestionOut(
                question=question.question,
                document_ids=question.document_ids,
                grades=question.grades,
            )
            for question in golden.questions
        ],
        off_topic=golden.off_topic,
        updated_at=golden.updated_at,
        updated_by=golden.updated_by,
    )


def _progress(evaluation: Evaluation) -> ProgressOut:
    return ProgressOut(stage=evaluation.stage, done=evaluation.done, total=evaluation.total)


def evaluation_out(evaluation: Evaluation) -> EvaluationOut:
    return EvaluationOut(
        evaluation_id=evaluation.evaluation_id,
        kb_id=evaluation.kb_id,
        status=evaluation.status,
        created_at=evaluation.created_at,
        updated_at=evaluation.updated_at,
        key_id=evaluation.key_id,
        progress=_progress(evaluation),
        error=evaluation.error,
        report=admin.report_of(evaluation),
        applied_at=evaluation.applied_at,
        applied_by=evaluation.applied_by,
    )


class CalibrationController(Controller):
    path = "/v1"
    guards = [requires(Role.ADMIN)]  # noqa: RUF012 — Litestar configuration
    tags = ["calibration"]  # noqa: RUF012 — Litestar configuration
    security = BEARER

    @put(
        KB + "/golden-set",
        operation_id="putGoldenSet",
        summary="Store (replace) a KB's golden set",
        responses=problems(*KEYED, *BODY, 404),
    )
    async def put_golden_set(
        self,
        request: AnyRequest,
        calibration: Injected[Calibration],
        kb_id: FromPath[str],
        data: JSONBody[PutGoldenSet],
    ) -> GoldenSetOut:
        golden = await admin.put_golden_set(
            calibration, request.user, kb_id, golden_questions(data), data.off_topic
        )
        return golden_set_out(golden)

    @get(
        KB + "/golden-set",
        operation_id="getGoldenSet",
        summary="A KB's golden set",
        responses=problems(*KEYED, 404),
    )
    async def get_golden_set(
        self, request: AnyRequest, store: Injected[SettingsStore], kb_id: FromPath[str]
    ) -> GoldenSetOut:
        return golden_set_out(await admin.golden_set_of(store, request.user, kb_id))

    @post(
        KB + "/evaluations",
        status_code=202,
        operation_id="startEvaluation",
        summary="Evaluate the KB's golden set in the background; poll the answer's id",
        responses={
            202: ResponseSpec(data_container=EvaluationOut, description="Accepted"),
            **problems(*KEYED, 404, 409),
        },
    )
    async def start_evaluation(
        self, request: AnyRequest, calibration: Injected[Calibration], kb_id: FromPath[str]
    ) -> Response[EvaluationOut]:
        evaluation = await admin.start_evaluation(calibration, request.user, kb_id)
        location = f"/v1/knowledge-bases/{kb_id}/evaluations/{evaluation.evaluation_id}"
        return Response(evaluation_out(evaluation), status_code=202, headers={"Location": location})

    @get(
        KB + "/evaluations",
        operation_id="listEvaluations",
        summary="A KB's evaluations, newest first",
        responses=problems(*KEYED, 404),
    )
    async def list_evaluations(
        self, request: AnyRequest, store: Injected[SettingsStore], kb_id: FromPath[str]
    ) -> EvaluationList:
        found = await admin.evaluations(store, request.user, kb_id)
        return EvaluationList(
            evaluations=[
                EvaluationSummary(
                    evaluation_id=evaluation.evaluation_id,
                    status=evaluation.status,
                    created_at=evaluation.created_at,
                    updated_at=evaluation.updated_at,
                    progress=_progress(evaluation),
                    applied_at=evaluation.applied_at,
                )
                for evaluation in found
            ]
        )

    @get(
        EVALUATION,
        operation_id="getEvaluation",
        summary="An evaluation: its progress, then its figures and recommendation",
        responses=problems(*KEYED, 404),
    )
    async def get_evaluation(
        self,
        request: AnyRequest,
        store: Injected[SettingsStore],
        kb_id: FromPath[str],
        evaluation_id: FromPath[str],
    ) -> EvaluationOut:
        found = await admin.evaluation_of(store, request.user, kb_id, evaluation_id)
        return evaluation_out(found)

    @post(
        EVALUATION + "/apply",
        status_code=200,
        operation_id="applyEvaluation",
        summary="Write a finished evaluation's recommended settings to its KB",
        responses=problems(*KEYED, 404, 409),
    )
    async def apply(
        self,
        request: AnyRequest,
        calibration: Injected[Calibration],
        planning: Injected[Planning],
        kb_id: FromPath[str],
        evaluation_id: FromPath[str],
    ) -> AppliedOut:
        applied = await admin.apply(calibration, request.user, kb_id, evaluation_id)
        return AppliedOut(
            kb_id=applied.kb.kb_id,
            evaluation_id=evaluation_id,
            changes=[
                SettingChangeOut(
                    at=change.at,
                    key_id=change.key_id,
                    setting=change.setting,
                    old=change.old,
                    new=change.new,
                    knowledge_base_id=change.knowledge_base_id,
                    evaluation_id=change.evaluation_id,
                )
                for change in applied.changes
            ],
            knowledge_base=await knowledge_base_out(planning, request.user, applied.kb),
        )
