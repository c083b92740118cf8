"""The filesystem connector and `kbgate ingest`: extraction, sync runs, both modes.

The embedded mode runs the real CLI on a provisioned data dir (Qdrant Edge, SQLite,
the real model). The HTTP mode starts a real `kbgate serve` on a free port and runs
the CLI against it. Corpora are five small files.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from io import StringIO
from pathlib import Path
from typing import Any

import docx
import httpx
import pptx
import pytest

from gateway.access.auth import Principal
from gateway.admin import knowledge, provisioning
from gateway.cli import main
from gateway.cli.progress import LineProgress, progress_line
from gateway.runtime.services import build_services
from gateway.telemetry import Telemetry, build_logger
from ingest.connector import (
    PutAnswer,
    PutResult,
    Upload,
    sync_directory,
)
from ingest.embedder.embedding import FastEmbedder
from ingest.engines.blocking import BlockingIndex
from ingest.engines.edge.index import EdgeIndex
from ingest.extract import ExtractionError, extract, html_text, markdown_title
from ingest.metadata import Schema
from ingest.payload import Classification, Scope
from ingest.sync import Target
from settings.config import load_config
from settings.records import Role
from tests.support.property_files import text_pdf

PLATFORM_KEY = "connector-test-platform-key-0123"
ORG, TENANT, KB = "acme", "t-docs", "handbook"
REPO_ROOT = Path(__file__).resolve().parents[2]


# ---- files ---------------------------------------------------------------------------


GOOD_FILES = {"leave.txt", "notes/onboarding.md", "policies/security.html", "scans/badges.pdf"}


def write_corpus(root: Path) -> Path:
    """Four good files (one per type), a corrupt PDF, an image and a hidden file."""
    (root / "notes").mkdir(parents=True)
    (root / "policies").mkdir()
    (root / "scans").mkdir()
    (root / "leave.txt").write_text(
        "Employees accrue two days of paid leave per month. Unused leave carries over "
        "into the first quarter of the next year.",
        encoding="utf-8",
    )
    (root / "notes" / "onboarding.md").write_text(
        "# Onboarding checklist\n\nNew hires receive a laptop on their first day. "
        "The buddy programme pairs each new hire with a mentor for six weeks.\n",
        encoding="utf-8",
    )
    (root / "policies" / "security.html").write_text(
        "<html><head><title>Security policy</title><style>p {color: red}</style>"
        "<script>var leaked = 'script text must not be indexed';</script></head>"
        "<body><h1>Passwords</h1><p>Passwords are rotated every ninety days.</p>"
        "<p>Lost badges must be reported to the front desk at once.</p></body></html>",
        encoding="utf-8",
    )
    (root / "scans" / "badges.pdf").write_bytes(
        text_pdf("Visitor badges are returned at reception before leaving.", "Badge rules")
    )
    (root / "scans" / "broken.pdf").write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog >>\ngarbage")
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (root / ".DS_Store").write_bytes(b"\x00\x01")
    return root


def write_varied_formats(root: Path) -> Path:
    """What a real documentation folder holds: a latin-1 HTML page declaring its charset, a
    UTF-16 note with a BOM, a .rst page, a Word file and a slide deck (all readable), a gzip
    archive named .txt (binary), and a legacy .doc and an image (types not read)."""
    root.mkdir(parents=True)
    (root / "menu.html").write_bytes(
        b'<html><head><meta charset="ISO-8859-1"><title>Caf\xe9 guide</title></head>'
        b"<body><p>The caf\xe9 serves a na\xefve cr\xe8me br\xfbl\xe9e on Fridays.</p>"
        b"</body></html>"
    )
    (root / "note.txt").write_bytes("\ufeffThe café opens at nine on weekdays.".encode("utf-16"))
    (root / "install.rst").write_text(
        "Installation\n============\n\nRun ``pip install kbgate`` and see :ref:`usage`.\n",
        encoding="utf-8",
    )
    document = docx.Document()
    document.core_properties.title = "Travel policy"
    document.add_paragraph("Book flights through the travel portal at least two weeks ahead.")
    document.save(str(root / "travel.docx"))
    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Quarterly review"
    slide.placeholders[1].text_frame.text = "Revenue grew by a tenth in the third quarter."
    deck.save(str(root / "review.pptx"))
    (root / "archive.txt").write_bytes(gzip.compress(b"old minutes " * 100, mtime=0))
    (root / "minutes.doc").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(64))
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    return root


VARIED_SKIPS = [
    {"path": "logo.png", "reason": "unsupported file type '.png'"},
    {"path": "minutes.doc", "reason": "unsupported file type '.doc'"},
]


# ---- extraction ----------------------------------------------------------------------


def test_extraction_reads_each_type_with_its_title(tmp_path: Path) -> None:
    """Text and title come from each type: file stem (.txt), first heading (.md), <title>
    without scripts or styles (.html), page text and info title (.pdf)."""
    root = write_corpus(tmp_path / "docs")
    txt = extract(root / "leave.txt")
    assert txt.title == "leave"
    assert txt.text.startswith("Employees accrue")
    md = extract(root / "notes" / "onboarding.md")
    assert md.title == "Onboarding checklist"
    html = extract(root / "policies" / "security.html")
    assert html.title == "Security policy"
    assert "Passwords are rotated every ninety days." in html.text
    assert "script text" not in html.text
    assert "color" not in html.text
    pdf = extract(root / "scans" / "badges.pdf")
    assert pdf.title == "Badge rules"
    assert "Visitor badges are returned at reception" in pdf.text


def test_extraction_failures_are_clear(tmp_path: Path) -> None:
    """A corrupt PDF, text that contradicts its byte-order mark and an unreadable file raise
    ExtractionError with a reason."""
    root = write_corpus(tmp_path / "docs")
    with pytest.raises(ExtractionError, match="not a readable PDF"):
        extract(root / "scans" / "broken.pdf")
    bad = tmp_path / "truncated.txt"
    bad.write_bytes("\ufeffcafé".encode("utf-16-le")[:-1])
    with pytest.raises(ExtractionError, match="not valid UTF-16-LE at byte 8, as its byte-order"):
        extract(bad)
    with pytest.raises(ExtractionError, match="cannot read"):
        extract(tmp_path / "missing.md")


def test_html_and_markdown_titles_fall_back() -> None:
    """HTML without <title> takes its first <h1> (its text keeps it as a heading);
    Markdown skips front matter and fenced code."""
    text, title = html_text("<body><h1>Only heading</h1><p>Body.</p><h1>Second</h1></body>")
    assert title == "Only heading"
    assert text.splitlines()[0] == "# Only heading"
    assert markdown_title("---\ntitle: meta\n---\n```\n# code\n```\nReal title\n===\n") == (
        "Real title"
    )
    assert markdown_title("no heading at all") == ""


# ---- the sync loop against a fake sink -------------------------------------------------


class MemorySink:
    """A fake KB: remembers documents by id and answers like the gateway does."""

    def __init__(self, documents: dict[str, str] | None = None) -> None:
        self.documents = dict(documents or {})
        self.refuse: set[str] = set()

    async def list_document_ids(self) -> set[str]:
        return set(self.documents)

    async def field_schema(self) -> Schema:
        return {}

    async def put_documents(self, uploads: Sequence[Upload]) -> AsyncIterator[PutResult]:
        for upload in uploads:
            if upload.document_id in self.refuse:
                yield PutResult(upload, None, "HTTP 413: too large")
                continue
            unchanged = self.documents.get(upload.document_id) == upload.text
            self.documents[upload.document_id] = upload.text
            yield PutResult(upload, PutAnswer("unchanged" if unchanged else "indexed", 1))

    async def delete_document(self, document_id: str) -> int:
        return 1 if self.documents.pop(document_id, None) is not None else 0


def test_sync_loop_counts_and_reports(tmp_path: Path) -> None:
    """Invalid file names and refused documents count as failed without stopping the run;
    documents of missing files are deleted, but a failing file's document is kept."""
    root = write_corpus(tmp_path / "docs")
    (root / "has space.txt").write_text("A file whose name is not a valid id.", encoding="utf-8")
    sink = MemorySink({"scans/broken.pdf": "old text", "retired.txt": "gone"})
    sink.refuse.add("leave.txt")
    summary = asyncio.run(sync_directory(root, sink, Classification.PUBLIC))
    assert (summary.added, summary.changed, summary.deleted) == (3, 0, 1)
    assert summary.failed == 3
    reasons = dict(summary.failures)
    assert "not a valid document id" in reasons["has space.txt"]
    assert "not a readable PDF" in reasons["scans/broken.pdf"]
    assert reasons["leave.txt"] == "HTTP 413: too large"
    assert "scans/broken.pdf" in sink.documents  # its file is still there
    assert "retired.txt" not in sink.documents
    assert summary.skipped == 1
    assert not summary.ok


def test_skipped_and_undecodable_files_are_reported_with_reasons(tmp_path: Path) -> None:
    """Files of unsupported types are skipped and listed with the reason (in the JSON and the
    human summary); a binary file named .txt fails with its reason; the rest are added."""
    root = write_varied_formats(tmp_path / "docs")
    sink = MemorySink()
    summary = asyncio.run(sync_directory(root, sink, Classification.PUBLIC))
    assert (summary.added, summary.failed, summary.skipped) == (5, 1, 2)
    assert summary.as_dict()["skipped_files"] == VARIED_SKIPS
    assert summary.failures == [("archive.txt", "binary data, not text (it holds NUL bytes)")]
    rendered = summary.render()
    assert "failed 1, skipped 2" in rendered
    assert "  skipped: minutes.doc: unsupported file type '.doc'" in rendered.splitlines()
    assert "naïve crème brûlée" in sink.documents["menu.html"]
    short = summary.render(max_skipped_lines=1).splitlines()
    assert short[-1] == "  ... and 1 more skipped (see --json)"


def test_empty_directory_never_wipes_the_kb(tmp_path: Path) -> None:
    """A directory with no supported files refuses to delete a KB's documents unless told to."""
    sink = MemorySink({"a.txt": "x", "b.txt": "y"})
    summary = asyncio.run(sync_directory(tmp_path, sink, Classification.PUBLIC))
    assert summary.aborted is not None
    assert "--allow-empty" in summary.aborted
    assert set(sink.documents) == {"a.txt", "b.txt"}
    summary = asyncio.run(sync_directory(tmp_path, sink, Classification.PUBLIC, allow_empty=True))
    assert summary.deleted == 2
    assert summary.ok


def test_progress_lines_come_every_interval_with_rate_and_eta() -> None:
    """Off a terminal, a progress line comes once per interval (not per file) and when the
    last file is done, each with the passages' rate and, before the end, the ETA."""
    now = [0.0]
    stream = StringIO()
    report = LineProgress(stream, every_s=10.0, clock=lambda: now[0])
    for done in range(1, 201):
        now[0] = done * 0.25  # 4 files a second, 3 passages each: 50 s in all
        report(done, 200, done * 3)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 5  # at 10, 20, 30, 40 s, and the last file
    assert lines[0] == (
        "kbgate ingest: 40/200 files (20%), 120 passages, 12.0 passages/s, ETA 0:40"
    )
    assert lines[-1] == "kbgate ingest: 200/200 files (100%), 600 passages, 12.0 passages/s"
    assert progress_line(1, 4000, 2, 1.0).endswith("ETA 1:06:39")


# ---- embedded mode: the CLI on a data dir ------------------------------------------------


@dataclass
class Embedded:
    data_dir: Path
    docs: Path

    def argv(self, *extra: str) -> list[str]:
        return [
            "ingest",
            str(self.docs),
            "--kb",
            KB,
            "--classification",
            "internal",
            "--data-dir",
            str(self.data_dir),
            "--tenant",
            TENANT,
            "--json",
            *extra,
        ]


async def provision(data_dir: Path, embedder: FastEmbedder, *, legacy_org: bool = False) -> None:
    """An org, a workspace and an empty KB in a fresh data dir, through the gateway's core."""
    config = load_config({}, data_dir=data_dir, platform_key=PLATFORM_KEY)
    services = await build_services(
        config, Telemetry(build_logger("WARNING", StringIO())), embedder=embedder
    )
    try:
        await provisioning.create_org(services.store, services.index, ORG)
        created = "2026-01-01T00:00:00+00:00" if legacy_org else None
        await provisioning.create_workspace(services.store, ORG, TENANT, created)
        admin = Principal(
            key_id="test", roles=frozenset({Role.ADMIN}), org_id=ORG, tenant_id=TENANT
        )
        await knowledge.put_knowledge_base(
            services.knowledge, admin, KB, name="Handbook", storage="org", settings={}
        )
    finally:
        await services.close()


@pytest.fixture
def embedded(
    tmp_path: Path,
    embedder: FastEmbedder,
    model_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Embedded:
    for name in list(os.environ):
        if name.startswith("KBGATE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("KBGATE_MODEL_CACHE_DIR", str(model_dir))
    data_dir = tmp_path / "data"
    asyncio.run(provision(data_dir, embedder))
    return Embedded(data_dir=data_dir, docs=write_corpus(tmp_path / "docs"))


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(argv)
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip().startswith("{") else {"text": out}


def stored(data_dir: Path) -> dict[str, list[tuple[str, str, str]]]:
    """(title, indexedAt, text) of every stored passage, by document id."""
    index = BlockingIndex(EdgeIndex(data_dir))
    target = Target(org_id=ORG, tenant_id=TENANT, kb_id=KB, storage="org")
    try:
        ids = index.document_ids(target.collection, target.write_scope())
        return {
            doc: [
                (p.payload.title, p.payload.indexed_at, p.payload.text)
                for p in index.scroll_document(target.collection, target.write_scope(), doc)
            ]
            for doc in ids
        }
    finally:
        index.close()


@pytest.mark.slow
def test_embedded_runs_add_leave_alone_change_and_delete(
    embedded: Embedded, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a data dir: the first run adds the four good files and reports the corrupt PDF as
    failed (exit 1); the second leaves all four unchanged, rewriting nothing; after editing
    one file, deleting another and removing the corrupt one, the run reports changed 1,
    deleted 1 and exits 0."""
    code, first = run_cli(embedded.argv(), capsys)
    assert code == 1
    assert (first["added"], first["changed"], first["unchanged"], first["failed"]) == (4, 0, 0, 1)
    assert first["failures"][0]["document"] == "scans/broken.pdf"
    assert "not a readable PDF" in first["failures"][0]["reason"]
    assert first["skipped"] == 1
    after_first = stored(embedded.data_dir)
    assert set(after_first) == GOOD_FILES
    titles = {doc: passages[0][0] for doc, passages in after_first.items()}
    assert titles == {
        "leave.txt": "leave",
        "notes/onboarding.md": "Onboarding checklist",
        "policies/security.html": "Security policy",
        "scans/badges.pdf": "Badge rules",
    }
    assert all("script text" not in p[2] for p in after_first["policies/security.html"])

    code, second = run_cli(embedded.argv(), capsys)
    assert code == 1
    assert (second["added"], second["changed"], second["unchanged"]) == (0, 0, 4)
    assert stored(embedded.data_dir) == after_first  # same points, same indexedAt: no rewrite

    (embedded.docs / "leave.txt").write_text(
        "Employees accrue three days of paid leave per month.", encoding="utf-8"
    )
    (embedded.docs / "notes" / "onboarding.md").unlink()
    (embedded.docs / "scans" / "broken.pdf").unlink()
    code, third = run_cli(embedded.argv(), capsys)
    assert code == 0
    assert (third["added"], third["changed"], third["unchanged"], third["deleted"]) == (0, 1, 2, 1)
    assert third["failed"] == 0
    after_third = stored(embedded.data_dir)
    assert set(after_third) == GOOD_FILES - {"notes/onboarding.md"}
    assert "three days" in after_third["leave.txt"][0][2]


@pytest.mark.slow
def test_embedded_run_leaves_the_store_indexed(
    embedded: Embedded, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run on a data dir ends by indexing what it wrote (no gateway serves the data dir
    meanwhile, and Edge indexes only when asked): with the threshold at 1 KB, nothing is
    left for the next start to index, and the documents are still all there."""
    monkeypatch.setenv("KBGATE_EDGE_INDEXING_THRESHOLD_KB", "1")
    code, summary = run_cli(embedded.argv(), capsys)
    assert (code, summary["added"]) == (1, 4)
    index = BlockingIndex(EdgeIndex(embedded.data_dir, indexing_threshold_kb=1))
    try:
        assert index.optimize() == []
    finally:
        index.close()
    assert set(stored(embedded.data_dir)) == GOOD_FILES


@pytest.mark.slow
def test_embedded_run_reads_varied_formats(
    embedded: Embedded, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a data dir, a folder of varied formats is indexed with the right text and titles
    (latin-1 HTML with its accents, UTF-16, .rst, .docx, .pptx); the binary .txt fails and
    the unsupported files are listed as skipped, each with its reason (exit 1)."""
    varied = Embedded(data_dir=embedded.data_dir, docs=write_varied_formats(tmp_path / "varied"))
    code, summary = run_cli(varied.argv(), capsys)
    assert code == 1
    assert (summary["added"], summary["failed"], summary["skipped"]) == (5, 1, 2)
    assert summary["failures"] == [
        {"document": "archive.txt", "reason": "binary data, not text (it holds NUL bytes)"}
    ]
    assert summary["skipped_files"] == VARIED_SKIPS
    passages = stored(embedded.data_dir)
    assert {doc: found[0][0] for doc, found in passages.items()} == {
        "menu.html": "Café guide",
        "note.txt": "note",
        "install.rst": "Installation",
        "travel.docx": "Travel policy",
        "review.pptx": "Quarterly review",
    }
    assert "naïve crème brûlée" in passages["menu.html"][0][2]
    assert "The café opens at nine" in passages["note.txt"][0][2]
    assert "Revenue grew by a tenth" in passages["review.pptx"][0][2]


@pytest.mark.slow
def test_embedded_summary_is_readable(
    embedded: Embedded, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --json the summary names every count and each failure on its own line."""
    argv = [arg for arg in embedded.argv() if arg != "--json"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "added 4, changed 0, unchanged 0, deleted 0, held back 0, failed 1" in out
    assert "failed: scans/broken.pdf: not a readable PDF" in out


@pytest.mark.slow
def test_unknown_label_is_refused_before_anything_is_written(
    embedded: Embedded, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown --classification exits 2 naming the labels, and nothing is indexed (every
    file would have been held back: a typo must not silently index nothing)."""
    argv = embedded.argv()
    argv[argv.index("internal")] = "secret"
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert "unknown label 'secret'" in capsys.readouterr().err
    assert stored(embedded.data_dir) == {}


@pytest.mark.slow
def test_missing_kb_or_workspace_exits_2(
    embedded: Embedded, capsys: pytest.CaptureFixture[str]
) -> None:
    """A KB or workspace that does not exist is a setup error (exit 2) with a clear message;
    the connector never creates one."""
    argv = embedded.argv()
    argv[argv.index(KB)] = "no-such-kb"
    assert main(argv) == 2
    assert "no knowledge base 'no-such-kb'" in capsys.readouterr().err
    argv = embedded.argv()
    argv[argv.index(TENANT)] = "nobody"
    assert main(argv) == 2
    assert "no workspace 'nobody'" in capsys.readouterr().err


# ---- backfill-org --------------------------------------------------------------------


@pytest.mark.slow
def test_backfill_org_cli_counts_then_is_idempotent(
    tmp_path: Path,
    embedder: FastEmbedder,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`kbgate backfill-org` sets orgId on the workspace's legacy points so a strict Scope
    sees them, reports how many, and a second run reports 0."""
    from ingest.sync import Document, DocumentWriter

    for name in list(os.environ):
        if name.startswith("KBGATE_"):
            monkeypatch.delenv(name)
    data_dir = tmp_path / "data"
    asyncio.run(provision(data_dir, embedder, legacy_org=True))
    target = Target(org_id=ORG, tenant_id=TENANT, kb_id=KB, storage="org")
    index = BlockingIndex(EdgeIndex(data_dir))
    try:
        writer = DocumentWriter(index, embedder)
        written = writer.put(
            target,
            Document(
                "old.txt", "Archived minutes of the 2019 board meeting.", Classification.PUBLIC
            ),
            legacy=True,
        )
    finally:
        index.close()
    strict = Scope.of(org_id=ORG, tenant_id=TENANT, kb_ids=[KB], clearance="restricted")

    argv = ["backfill-org", "--org", ORG, "--tenant", TENANT, "--data-dir", str(data_dir)]
    assert main([*argv, "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["updated"] == written.passages
    assert main(argv) == 0
    assert "set orgId on 0 legacy points" in capsys.readouterr().out
    index = BlockingIndex(EdgeIndex(data_dir))
    try:
        assert index.count(target.collection, strict) == written.passages
    finally:
        index.close()
    assert (
        main(["backfill-org", "--org", "globex", "--tenant", TENANT, "--data-dir", str(data_dir)])
        == 2
    )
    assert "does not belong to organization 'globex'" in capsys.readouterr().err


# ---- HTTP mode: a real gateway process ---------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Server:
    url: str
    data_dir: Path
    process: subprocess.Popen[bytes]


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, model_dir: Path, embedder: FastEmbedder
) -> Iterator[Server]:
    """`kbgate serve` on a free port with a temp data dir (one per module); the model folder
    is shared with the tests."""
    del embedder  # only to make sure the model folder is assembled before the server starts
    tmp_path = tmp_path_factory.mktemp("server")
    port = free_port()
    data_dir = tmp_path / "served"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KBGATE_")}
    env.update(
        KBGATE_PLATFORM_KEY=PLATFORM_KEY,
        KBGATE_DATA_DIR=str(data_dir),
        KBGATE_MODEL_CACHE_DIR=str(model_dir),
        KBGATE_LOG_LEVEL="WARNING",
    )
    log = (tmp_path / "server.log").open("wb")
    process = subprocess.Popen(  # noqa: S603 — our own entry point, fixed argv
        [str(Path(sys.executable).parent / "kbgate"), "serve", "--port", str(port)],
        env=env,
        cwd=REPO_ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if process.poll() is not None:
                pytest.fail((tmp_path / "server.log").read_text(errors="replace"))
            try:
                if httpx.get(f"{url}/health/ready", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        else:
            pytest.fail("kbgate serve did not become ready")
        yield Server(url=url, data_dir=data_dir, process=process)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log.close()
    output = (tmp_path / "server.log").read_text(errors="replace")
    assert "Traceback" not in output, output[-3000:]


def provision_over_http(url: str) -> str:
    """Org, workspace, an admin+ingest key and a KB, through the API; returns the key."""
    platform = {"Authorization": f"Bearer {PLATFORM_KEY}"}
    with httpx.Client(base_url=url, timeout=30) as client:
        assert client.post("/v1/orgs", json={"org_id": ORG}, headers=platform).status_code == 201
        workspace = client.post(
            f"/v1/orgs/{ORG}/workspaces", json={"tenant_id": TENANT}, headers=platform
        )
        assert workspace.status_code == 201
        issued = client.post(
            "/v1/keys",
            json={"org_id": ORG, "tenant_id": TENANT, "roles": ["admin", "ingest"]},
            headers=platform,
        )
        assert issued.status_code == 201
        key = str(issued.json()["key"])
        kb = client.put(
            f"/v1/knowledge-bases/{KB}",
            json={"storage": "org"},
            headers={"Authorization": f"Bearer {key}"},
        )
        assert kb.status_code == 201
    return key


@pytest.fixture(scope="module")
def ingest_key(server: Server) -> str:
    """An admin+ingest key of a workspace provisioned on the module's gateway."""
    return provision_over_http(server.url)


@pytest.mark.slow
def test_http_mode_against_a_running_gateway(
    server: Server,
    ingest_key: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Against `kbgate serve`: the first run adds four and fails the corrupt PDF, the second
    leaves all unchanged, an embedded run on the served data dir is refused (exit 2) and leaves
    the gateway working, an edit and a removal give changed 1 / deleted 1 (the key read from
    KBGATE_KEY), and the KB's stats and listing agree."""
    key = ingest_key
    docs = write_corpus(tmp_path / "docs")
    base = ["ingest", str(docs), "--kb", KB, "--classification", "internal", "--json"]
    http = [*base, "--url", server.url]

    code, first = run_cli([*http, "--key", key], capsys)
    assert code == 1
    assert (first["added"], first["failed"]) == (4, 1)
    assert first["failures"][0]["document"] == "scans/broken.pdf"
    code, second = run_cli([*http, "--key", key], capsys)
    assert (code, second["unchanged"], second["added"], second["changed"]) == (1, 4, 0, 0)

    # The embedded mode on the served data dir is refused without touching the gateway's
    # shards (a second process opening them would damage them).
    embedded_argv = [*base, "--data-dir", str(server.data_dir), "--tenant", TENANT]
    assert main(embedded_argv) == 2
    assert "in use by another process" in capsys.readouterr().err

    (docs / "policies" / "security.html").write_text(
        "<title>Security policy</title><p>Passwords are rotated every sixty days.</p>",
        encoding="utf-8",
    )
    (docs / "leave.txt").unlink()
    (docs / "scans" / "broken.pdf").unlink()
    monkeypatch.setenv("KBGATE_KEY", key)
    code, third = run_cli(http, capsys)
    assert code == 0
    assert (third["changed"], third["deleted"], third["unchanged"], third["added"]) == (1, 1, 2, 0)

    stats = httpx.get(
        f"{server.url}/v1/knowledge-bases/{KB}/stats",
        headers={"Authorization": f"Bearer {key}"},
        timeout=10,
    ).json()
    assert stats["documents"] == 3
    listed = httpx.get(
        f"{server.url}/v1/knowledge-bases/{KB}/documents",
        headers={"Authorization": f"Bearer {key}"},
        timeout=10,
    ).json()
    assert {d["document_id"] for d in listed["documents"]} == GOOD_FILES - {"leave.txt"}


@pytest.mark.slow
def test_http_mode_refuses_a_bad_key_and_an_unreachable_gateway(
    server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A key the gateway does not know, and a port nobody listens on, exit 2 with the reason."""
    docs = write_corpus(tmp_path / "docs")
    base = ["ingest", str(docs), "--kb", KB, "--classification", "public"]
    assert main([*base, "--url", server.url, "--key", "kbg_not-a-key"]) == 2
    assert "refused the key" in capsys.readouterr().err
    started = datetime.now(UTC)
    assert main([*base, "--url", f"http://127.0.0.1:{free_port()}", "--key", "kbg_x"]) == 2
    assert "cannot reach the gateway" in capsys.readouterr().err
    assert (datetime.now(UTC) - started).total_seconds() < 30


@pytest.mark.slow
def test_http_mode_reports_oversized_files_and_goes_on(
    server: Server, ingest_key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file over the gateway's text limit (413) and one over its body limit (413, the
    connection closed unread) are each reported as failed; the other files are indexed."""
    created = httpx.put(
        f"{server.url}/v1/knowledge-bases/bulk",
        json={},
        headers={"Authorization": f"Bearer {ingest_key}"},
        timeout=10,
    )
    assert created.status_code == 201
    docs = tmp_path / "bulk"
    docs.mkdir()
    (docs / "small.txt").write_text("A short note about the cafeteria menu.", encoding="utf-8")
    (docs / "over-text-limit.txt").write_text("Some text here. " * 400_000, encoding="utf-8")
    (docs / "over-body-limit.txt").write_text("word " * 1_900_000, encoding="utf-8")
    argv = ["ingest", str(docs), "--kb", "bulk", "--classification", "public", "--json"]
    code, summary = run_cli([*argv, "--url", server.url, "--key", ingest_key], capsys)
    assert code == 1
    assert (summary["added"], summary["failed"]) == (1, 2)
    reasons = {item["document"]: item["reason"] for item in summary["failures"]}
    assert reasons["over-text-limit.txt"].startswith("HTTP 413")
    # the gateway answers 413 and closes the connection: the client reads the answer when
    # it arrives before the write fails, else it reports the closed connection
    over_body = reasons["over-body-limit.txt"]
    assert over_body.startswith("HTTP 413") or "closed the connection" in over_body, over_body
