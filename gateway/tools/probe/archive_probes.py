"""The archive check (phase `archive`): a workspace archive is untrusted input.

On an organization of its own (`<run>-arc`, deleted when done), the check plants a
workspace with one document, exports it, and imports tampered copies as new workspaces:

- an email and a phone number added to a passage whose stored PII analysis is emptied
  under the analyzer's own name: the import may succeed, but a turn on the copy must show
  placeholders, never the raw values (a raw value is a leak);
- a passage over the default document size limit (6 MB): refused, 413;
- a NaN in a passage's dense vector: refused, 422;
- a KB `top_k` of 10^9 (beyond the API's bound): refused, 422;
- a decompression bomb (a few hundred KB holding one 400 MiB line): refused, 413, fast.

A refused import must leave no workspace behind (issuing a key for it answers 404).
"""

from __future__ import annotations

import base64
import gzip
import json
import time
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from gateway.tools.probe.base import CampaignBase
from gateway.tools.probe.client import Reply
from gateway.tools.probe.report import Finding, Issue, Probe, SetupError, _list, _obj
from gateway.tools.probe.world import KB_SETTINGS, ProbeKey, new_token

EMAIL = "archive.probe@example.com"
PHONE = "+1 415 555 0132"
#: the raw values a turn on the tampered copy must never show
RAW_VALUES = (EMAIL, "415 555 0132")
_IMPORT = "POST /v1/orgs/{org_id}/workspaces/{tenant_id}/import"
_KB = "kb-archive"
_AGENT = "agent-archive"
#: a bomb refused later than this is refused too late
BOMB_SECONDS = 10.0

Edit = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]


def _lines(archive: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in gzip.decompress(archive).splitlines()]


def _archive(lines: list[dict[str, Any]]) -> bytes:
    return gzip.compress(b"".join(json.dumps(line).encode() + b"\n" for line in lines))


def _passage(lines: list[dict[str, Any]]) -> dict[str, Any]:
    return next(line for line in lines if line.get("kind") == "passage")


def with_raw_pii(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An email and a phone number in the first passage, its analysis emptied."""
    payload = _passage(lines)["payload"]
    payload["text"] += f" Write to {EMAIL} or call {PHONE}."
    pii = payload.get("pii") or {"analyzer": "unknown"}
    payload["pii"] = {**pii, "text": []}
    return lines


def oversized(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first passage 6 MB long (documents are 5 MB at most by default)."""
    _passage(lines)["payload"]["text"] = "harbour " * (6 * 1024 * 1024 // 8)
    return lines


def nan_vector(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    passage = _passage(lines)
    dense = np.frombuffer(base64.b64decode(passage["dense"]), dtype="<f4").copy()
    dense[0] = np.nan
    passage["dense"] = base64.b64encode(dense.tobytes()).decode("ascii")
    return lines


def huge_top_k(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    next(line for line in lines if line.get("kind") == "knowledge_base")["settings"]["top_k"] = (
        10**9
    )
    return lines


def bomb(lines: list[dict[str, Any]], expanded: int = 400 * 1024 * 1024) -> bytes:
    """The archive's manifest, then one line of `expanded` bytes: a few hundred KB."""
    zipper = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = [zipper.compress(json.dumps(lines[0]).encode() + b"\n")]
    step = b"A" * (1024 * 1024)
    out += [zipper.compress(step) for _ in range(expanded // len(step))]
    out.append(zipper.flush())
    return b"".join(out)


class ArchiveProbes(CampaignBase):
    """Tampered archives through the import: no raw PII, no oversized content, no bomb."""

    async def archive_check(self) -> None:
        org_id = f"{self.run}-arc"
        await self.setup_call(
            self._probe("POST /v1/orgs", self.platform, "/v1/orgs", {"org_id": org_id}, 201)
        )
        try:
            archive = await self._planted(org_id, f"{self.run}-arc-source")
            await self._tampered_analysis(org_id, archive)
            refused: list[tuple[str, bytes, int]] = [
                ("oversized", _archive(oversized(_lines(archive))), 413),
                ("nan-vector", _archive(nan_vector(_lines(archive))), 422),
                ("top-k", _archive(huge_top_k(_lines(archive))), 422),
            ]
            for mode, body, status in refused:
                await self._refused(org_id, mode, body, status)
            await self._bomb(org_id, bomb(_lines(archive)))
        except SetupError as error:
            self.report.findings.append(
                Finding("failure", "archive check", self.platform.label, "archive", str(error))
            )
        finally:
            await self._delete_org(org_id)

    async def _planted(self, org_id: str, tenant_id: str) -> bytes:
        """A workspace with one KB, one document and one agent; its archive."""
        await self.setup_call(
            self._probe(
                "POST /v1/orgs/{org_id}/workspaces",
                self.platform,
                f"/v1/orgs/{org_id}/workspaces",
                {"tenant_id": tenant_id},
                201,
            )
        )
        owner = await self._archive_key(org_id, tenant_id)
        steps: list[tuple[str, str, dict[str, Any], int]] = [
            (
                "PUT /v1/knowledge-bases/{kb_id}",
                f"/v1/knowledge-bases/{_KB}",
                {"storage": "org", **KB_SETTINGS},
                201,
            ),
            (
                "PUT /v1/knowledge-bases/{kb_id}/documents/{document_id}",
                f"/v1/knowledge-bases/{_KB}/documents/doc-archive",
                {
                    "text": f"The harbour ledger {new_token()} records each storm at the reef.",
                    "classification": "internal",
                    "title": "Harbour ledger",
                },
                200,
            ),
            (
                "PUT /v1/agents/{agent_id}",
                f"/v1/agents/{_AGENT}",
                {"knowledge_base_ids": [_KB]},
                201,
            ),
        ]
        for endpoint, path, body, expect in steps:
            await self.setup_call(self._probe(endpoint, owner, path, body, expect, mode="setup"))
        path = f"/v1/orgs/{org_id}/workspaces/{tenant_id}/export"
        reply = await self.execute(
            self._probe(
                "GET /v1/orgs/{org_id}/workspaces/{tenant_id}/export",
                self.platform,
                path,
                mode="setup",
            )
        )
        if reply is None or reply.status != 200 or not reply.content:
            raise SetupError(f"GET {path}: {reply.status if reply else 'no answer'}")
        return reply.content

    async def _archive_key(self, org_id: str, tenant_id: str, expect: int = 201) -> ProbeKey:
        body = {
            "org_id": org_id,
            "tenant_id": tenant_id,
            "roles": ["admin", "ingest", "retrieve"],
            "clearance": "restricted",
        }
        answer = await self.setup_call(
            self._probe("POST /v1/keys", self.platform, "/v1/keys", body, expect, mode="setup")
        )
        return ProbeKey(
            f"{tenant_id}/owner",
            None,
            frozenset({"admin", "ingest", "retrieve"}),
            "restricted",
            secret=str(_obj(answer).get("key")),
        )

    def _import(self, org_id: str, tenant_id: str, body: bytes, expect: int, mode: str) -> Probe:
        return self._probe(
            _IMPORT,
            self.platform,
            f"/v1/orgs/{org_id}/workspaces/{tenant_id}/import",
            body,
            expect,
            mode=mode,
        )

    async def _tampered_analysis(self, org_id: str, archive: bytes) -> None:
        """Raw PII under an emptied analysis: imported, then a turn shows none of it."""
        tenant_id = f"{self.run}-arc-pii"
        tampered = _archive(with_raw_pii(_lines(archive)))
        reply = await self.execute(self._import(org_id, tenant_id, tampered, 201, "pii"))
        if reply is None or reply.status != 201:
            return
        reader = await self._archive_key(org_id, tenant_id)

        def check(answer: Reply) -> list[Issue]:
            texts = " ".join(
                str(_obj(p).get("text")) for p in _list(_obj(answer.json()).get("passages"))
            )
            issues = [
                Issue("leak", f"a turn on an imported archive returned the raw value {raw!r}")
                for raw in RAW_VALUES
                if raw in texts
            ]
            if "harbour ledger" not in texts:
                issues.append(Issue("failure", "the imported passage did not come back"))
            return issues

        await self.execute(
            self._probe(
                "POST /v1/retrieve",
                reader,
                "/v1/retrieve",
                {"agent_id": _AGENT, "question": "What does the harbour ledger record?"},
                mode="pii",
                check=check,
            )
        )

    async def _refused(self, org_id: str, mode: str, body: bytes, status: int) -> None:
        """Refused with `status`, and no workspace left behind."""
        tenant_id = f"{self.run}-arc-{mode}"
        await self.execute(self._import(org_id, tenant_id, body, status, mode))
        await self.execute(
            self._probe(
                "POST /v1/keys",
                self.platform,
                "/v1/keys",
                {"org_id": org_id, "tenant_id": tenant_id, "roles": ["retrieve"]},
                404,
                mode=f"{mode}:nothing-written",
            )
        )

    async def _bomb(self, org_id: str, body: bytes) -> None:
        started = time.perf_counter()
        await self._refused(org_id, "bomb", body, 413)
        seconds = time.perf_counter() - started
        self.report.notes.append(
            f"archive check: a {len(body) // 1024} KB archive expanding to 400 MiB was "
            f"answered in {seconds:.1f} s"
        )
        if seconds > BOMB_SECONDS:
            detail = f"a decompression bomb took {seconds:.1f} s to refuse"
            self.report.findings.append(
                Finding("failure", _IMPORT, self.platform.label, "archive:bomb", detail)
            )

    async def _delete_org(self, org_id: str) -> None:
        reply = await self.execute(
            self._probe(
                "DELETE /v1/orgs/{org_id}", self.platform, f"/v1/orgs/{org_id}", mode="setup"
            )
        )
        if reply is None or reply.status != 200:
            self.report.left_behind.append(
                f"organization {org_id} of the archive check, with its workspaces"
            )
