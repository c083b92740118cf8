"""`kbgate probe` against a real `kbgate serve` process, over HTTP (stdlib urllib).

The command's entry (`gateway.tools.probe.command.main`, which `kbgate probe` runs)
provisions its own throwaway world on the served gateway, runs the probe catalogue, cleans
up and exits 0 when nothing leaked. Bad arguments, an unreachable gateway and a wrong
platform key exit 2 and touch nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import tempfile
import time
from pathlib import Path

import pytest

from gateway.tools.probe.command import add_probe_command
from gateway.tools.probe.command import main as probe_main
from ingest.embedder.embedding import Embedder
from tests.isolation.conftest import SUMMARIES
from tests.support.gateway_process import GatewayProcess
from tests.support.redis_server import free_port

#: The served run covers the first (widest) phase, then cleans up; the in-process suite
#: runs every phase on every engine. Set this to all phases to run them over HTTP too.
SERVED_PHASES = os.environ.get("KBGATE_ISOLATION_SERVED_PHASES", "strict-on")


@pytest.mark.ci
def test_kbgate_probe_passes_against_a_served_gateway(
    embedder: Embedder, model_dir: Path, fast_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The probe command provisions, probes every endpoint as every principal, finds no
    leak, deletes every document it planted (stats zero), then its organizations with
    everything in them, says so (nothing left behind), writes its JSON report and exits 0;
    the gateway's own log never names its tenants."""
    assert embedder.dense_dim > 0  # the model is assembled in model_dir before the server starts
    platform_key = "served-platform-key-" + secrets.token_hex(8)
    data_dir = Path(tempfile.mkdtemp(prefix="served-", dir=fast_root))
    report_path = data_dir.parent / f"{data_dir.name}-report.json"
    env = {
        "KBGATE_PLATFORM_KEY": platform_key,
        "KBGATE_MODEL_CACHE_DIR": str(model_dir),
        "KBGATE_EMBEDDING_THREADS": "1",
        # the probe presents forged keys on purpose, past the default failure budget
        "KBGATE_AUTH_FAILURES_PER_MIN": "1000000",
    }
    with GatewayProcess(data_dir, env=env) as served:
        started = time.perf_counter()
        code = probe_main(
            [
                "--url", served.url,
                "--platform-key", platform_key,
                "--phases", SERVED_PHASES,
                "--json", str(report_path),
            ]
        )  # fmt: skip
        seconds = time.perf_counter() - started
        out = capsys.readouterr().out
        wrong_key = probe_main(["--url", served.url, "--platform-key", "not-the-platform-key"])
        refused = capsys.readouterr().out
        log = served.log_path.read_text()

    assert code == 0, out[-6000:]
    assert "result: PASS (exit 0)" in out
    assert "cleaned up: 2 organizations, 2 collections, 4 workspaces" in out
    assert "left behind: nothing" in out
    report = json.loads(report_path.read_text())
    assert report["leaks"] == 0
    assert report["failures"] == 0
    assert report["distinct_probes"] > 500
    found = re.search(r"kbgate probe (probe-[0-9a-f]+) against", out)
    assert found is not None
    assert found.group(1) not in log, "the served gateway logged a probe tenant's id"
    assert wrong_key == 2
    assert "setup failed" in refused
    SUMMARIES.append(
        {
            "suite": "kbgate probe over HTTP",
            "line": (
                f"{report['distinct_probes']} distinct probes, {report['requests']} requests "
                f"(phases {SERVED_PHASES}), exit {code}, {seconds:.1f} s"
            ),
        }
    )


def test_kbgate_probe_refuses_bad_arguments_and_unreachable_gateways(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No platform key, an unknown or repeated phase or a non-HTTP URL exit 2 before any
    request; a gateway that does not answer exits 2 after the first request fails. The
    same holds through `add_probe_command`, the way `kbgate` registers the subcommand."""
    monkeypatch.delenv("KBGATE_PLATFORM_KEY", raising=False)
    parser = argparse.ArgumentParser(prog="kbgate")
    add_probe_command(parser.add_subparsers(required=True))
    args = parser.parse_args(["probe", "--url", "http://127.0.0.1:1", "--phases", "writes,writes"])
    assert args.run(args) == 2
    args = parser.parse_args(
        ["probe", "--url", "http://127.0.0.1:1", "--platform-key", "k", "--phases", "writes,writes"]
    )
    assert args.run(args) == 2
    assert probe_main(["--url", "http://127.0.0.1:1"]) == 2
    assert probe_main(["--url", "http://127.0.0.1:1", "--platform-key", "k", "--phases", "x"]) == 2
    assert probe_main(["--url", "ftp://example.com", "--platform-key", "k"]) == 2
    dead = f"http://127.0.0.1:{free_port()}"
    assert probe_main(["--url", dead, "--platform-key", "k", "--timeout", "2"]) == 2
    assert "setup failed" in capsys.readouterr().out
