"""The deployed path: start-up refusals, one process per data dir, drain on SIGTERM, and the
container image's start conditions reproduced without Docker."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import httpx
import pytest

from gateway.runtime.healthcheck import is_ready
from ingest.engines.blocking import BlockingIndex
from ingest.engines.server.index import CollectionLayout, ServerIndex
from ingest.index import IncompatibleServerError, IndexUnavailableError
from ingest.payload import Classification, Scope
from tests.support.fake_qdrant import FakeQdrant
from tests.support.gateway_process import GatewayProcess
from tests.support.redis_server import free_port
from tests.support.services import missing_service

pytestmark = pytest.mark.ci

PLATFORM_KEY = "deployment-test-platform-key"
KBGATE = Path(sys.executable).with_name("kbgate")
REPO = Path(__file__).resolve().parents[2]


def _env(data_dir: Path, port: int, model_dir: Path, **extra: str) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("KBGATE_")},
        "KBGATE_DATA_DIR": str(data_dir),
        "KBGATE_PORT": str(port),
        "KBGATE_HOST": "127.0.0.1",
        "KBGATE_MODEL_CACHE_DIR": str(model_dir),
        "KBGATE_PLATFORM_KEY": PLATFORM_KEY,
        **extra,
    }


def _run_serve(env: Mapping[str, str], timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 — our own console script, fixed arguments
        [str(KBGATE), "serve"],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def _bound(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _wait_ready(url: str, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if is_ready(url, 1.0):
            return
        time.sleep(0.3)
    raise AssertionError(f"{url} not ready within {timeout_s} s")


@pytest.fixture
def gateway_env(model_dir: Path) -> dict[str, str]:
    """Environment for a gateway process that reuses the session's assembled model."""
    return {"KBGATE_MODEL_CACHE_DIR": str(model_dir), "KBGATE_PLATFORM_KEY": PLATFORM_KEY}


# ---- the Qdrant server's version -----------------------------------------------------


@pytest.mark.slow
def test_serve_refuses_a_qdrant_server_older_than_supported(
    tmp_path: Path, model_dir: Path
) -> None:
    """`kbgate serve` against a Qdrant reporting 1.16.0 exits non-zero, naming that version
    and the one it needs, without ever binding its port."""
    port = free_port()
    with FakeQdrant("1.16.0") as qdrant:
        done = _run_serve(_env(tmp_path / "data", port, model_dir, KBGATE_QDRANT_URL=qdrant.url))
    assert done.returncode != 0
    assert "1.16.0" in done.stderr
    assert "1.19.0" in done.stderr
    assert "serving on" not in done.stdout
    assert not _bound(port)


@pytest.mark.slow
def test_serve_starts_on_a_supported_qdrant_server(
    tmp_path: Path, gateway_env: dict[str, str]
) -> None:
    """Against a Qdrant reporting 1.20.0 the gateway starts and reports ready, its index
    engine the Qdrant server."""
    with (
        FakeQdrant("1.20.0") as qdrant,
        GatewayProcess(tmp_path / "data", {**gateway_env, "KBGATE_QDRANT_URL": qdrant.url}) as gw,
    ):
        _wait_ready(gw.url, 30)
        ready = httpx.get(f"{gw.url}/health/ready", timeout=10).json()
    assert ready["dependencies"]["index"] == {"status": "up", "engine": "qdrant-server"}


def test_serve_prints_its_url_only_once_the_url_answers(tmp_path: Path, model_dir: Path) -> None:
    """`kbgate serve` says it is starting at once, and prints "serving on <url>" only when
    that URL already answers: a newcomer who pastes the next command on seeing it is not
    refused."""
    port = free_port()
    process = subprocess.Popen(  # noqa: S603 — our own console script, fixed arguments
        [str(KBGATE), "serve"],
        env=_env(tmp_path / "data", port, model_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines = []
        for line in process.stdout:
            lines.append(line)
            if "serving on" in line:
                response = httpx.get(f"http://127.0.0.1:{port}/health/live", timeout=5)
                assert response.status_code == 200
                break
        else:
            raise AssertionError(f"no 'serving on' line: {lines}")
        assert "starting" in lines[0]
        assert f"http://127.0.0.1:{port}" in lines[-1]
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_a_server_reached_only_later_is_checked_before_use() -> None:
    """A server that does not answer at connect time is checked by the first call that
    reaches it: a too-old one makes that call, and every later one, fail as unavailable
    (never run against it), naming its version."""
    port = free_port()
    index = BlockingIndex.opening(lambda: ServerIndex.connect(f"http://127.0.0.1:{port}", None, 1))
    scope = Scope.of(
        org_id="acme", tenant_id="t1", kb_ids=["kb"], clearance=Classification.RESTRICTED
    )
    with pytest.raises(IndexUnavailableError):
        index.ping()
    with FakeQdrant("1.18.2", port=port):
        for call in (index.ping, lambda: index.count("kb_shared", scope)):
            with pytest.raises(IndexUnavailableError, match=r"1\.18\.2"):
                call()
    index.close()


def test_version_check_accepts_newer_and_refuses_older_versions() -> None:
    """1.19.0, 1.20.0-rc1 and 2.0 are accepted; 1.18.9 and a nonsense version are refused."""
    for version in ("1.19.0", "v1.20.0-rc1", "2.0"):
        with FakeQdrant(version) as qdrant:
            BlockingIndex.opening(lambda: ServerIndex.connect(qdrant.url, None, 2)).close()
    for version in ("1.18.9", "dev"):
        with FakeQdrant(version) as qdrant, pytest.raises(IncompatibleServerError):
            BlockingIndex.opening(lambda: ServerIndex.connect(qdrant.url, None, 2))


def test_collections_get_the_configured_shards_replicas_and_write_consistency() -> None:
    """A collection kbgate creates on a server asks for the layout's shard number,
    replication factor and write consistency factor."""
    with FakeQdrant("1.20.0") as qdrant:
        index = BlockingIndex.opening(
            lambda: ServerIndex.connect(qdrant.url, None, 2, layout=CollectionLayout(3, 2, 2))
        )
        with pytest.raises(Exception):  # noqa: B017, PT011 — the fake stops after creation
            index.ensure_collection("kb_shared")
        index.close()
    created = qdrant.created["kb_shared"]
    assert (
        created["shard_number"],
        created["replication_factor"],
        created["write_consistency_factor"],
    ) == (3, 2, 2)


# ---- one process per embedded data dir ----------------------------------------------


@pytest.mark.slow
def test_a_second_process_on_a_held_data_dir_is_refused_before_it_binds(
    tmp_path: Path, gateway_env: dict[str, str], model_dir: Path
) -> None:
    """While a gateway serves a fresh data dir (no shard written yet), a second `serve`
    exits 2 naming the holder without binding its port, `backfill-org` and `eval
    --data-dir` exit 2 too, and the first gateway stays ready."""
    data_dir = tmp_path / "data"
    with GatewayProcess(data_dir, gateway_env) as first:
        _wait_ready(first.url, 30)
        port = free_port()
        second = _run_serve(_env(data_dir, port, model_dir))
        assert second.returncode == 2
        assert "in use by another process" in second.stderr
        assert f"pid {first.pid}, kbgate serve" in second.stderr
        assert not _bound(port)
        env = _env(data_dir, free_port(), model_dir)
        backfill = subprocess.run(  # noqa: S603 — our own console script, fixed arguments
            [str(KBGATE), "backfill-org", "--org", "acme", "--tenant", "t1"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert backfill.returncode == 2
        assert "in use by another process" in backfill.stderr
        dataset = tmp_path / "beir"
        dataset.mkdir()
        (dataset / "corpus.jsonl").write_text('{"_id": "d1", "text": "Leave is 25 days."}\n')
        (dataset / "queries.jsonl").write_text('{"_id": "q1", "text": "How much leave?"}\n')
        (dataset / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
        evaluation = subprocess.run(  # noqa: S603 — our own console script, fixed arguments
            [str(KBGATE), "eval", "--dataset", str(dataset), "--data-dir", str(data_dir)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert evaluation.returncode == 2
        assert "in use by another process" in evaluation.stderr
        assert is_ready(first.url)
    # Once the holder is gone the data dir is free again.
    with GatewayProcess(data_dir, gateway_env) as again:
        _wait_ready(again.url, 30)


# ---- graceful shutdown ------------------------------------------------------------------


def _start_slow_request(port: int) -> socket.socket:
    """A platform call whose body arrives in two parts: in flight until the second."""
    body = b'{"org_id": "drain-org"}'
    head = (
        f"POST /v1/orgs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {PLATFORM_KEY}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    connection = socket.create_connection(("127.0.0.1", port), timeout=30)
    connection.sendall(head + body[:5])
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return connection


@pytest.mark.slow
def test_sigterm_finishes_requests_in_flight_and_refuses_new_ones(
    tmp_path: Path, gateway_env: dict[str, str]
) -> None:
    """After SIGTERM, a request already in flight completes (201), new requests and
    readiness answer 503 with Retry-After while it runs, liveness stays 200, and the
    process then exits 0 by itself."""
    env = {**gateway_env, "KBGATE_SHUTDOWN_TIMEOUT_S": "30"}
    gw = GatewayProcess(tmp_path / "data", env)
    gw.start()
    try:
        _wait_ready(gw.url, 30)
        slow = _start_slow_request(gw.port)
        time.sleep(0.5)  # the request is in the app, waiting for its body
        os.kill(gw.pid, signal.SIGTERM)
        time.sleep(0.5)
        with httpx.Client(base_url=gw.url, timeout=10) as client:
            ready = client.get("/health/ready")
            refused = client.post(
                "/v1/orgs",
                json={"org_id": "late-org"},
                headers={"Authorization": f"Bearer {PLATFORM_KEY}"},
            )
            live = client.get("/health/live")
        assert ready.status_code == 503
        assert refused.status_code == 503
        assert refused.headers["retry-after"] == "1"
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert live.status_code == 200
        slow.sendall(b'{"org_id": "drain-org"}'[5:])
        answer = slow.recv(4096).decode()
        slow.close()
        assert answer.startswith("HTTP/1.1 201"), answer[:200]
        assert gw._process is not None
        assert gw._process.wait(timeout=15) == 0
    finally:
        gw.stop()


@pytest.mark.slow
def test_sigterm_stops_waiting_for_a_request_after_the_shutdown_bound(
    tmp_path: Path, gateway_env: dict[str, str]
) -> None:
    """A request that never completes holds the exit back by at most
    KBGATE_SHUTDOWN_TIMEOUT_S (2 s here) plus a second of the server's own shutdown."""
    gw = GatewayProcess(tmp_path / "data", {**gateway_env, "KBGATE_SHUTDOWN_TIMEOUT_S": "2"})
    gw.start()
    try:
        _wait_ready(gw.url, 30)
        stuck = _start_slow_request(gw.port)
        time.sleep(0.5)
        started = time.monotonic()
        os.kill(gw.pid, signal.SIGTERM)
        assert gw._process is not None
        gw._process.wait(timeout=15)
        assert time.monotonic() - started < 5
        stuck.close()
    finally:
        gw.stop()


# ---- the container image's start conditions ---------------------------------------------

_IMAGE_UID = 1000


def _blocked_ancestors(paths: list[Path]) -> list[Path]:
    """Directories on the way to `paths` that other users cannot traverse."""
    blocked: set[Path] = set()
    for path in paths:
        for ancestor in [*reversed(path.parents), path]:
            if ancestor.is_dir() and not os.stat(ancestor).st_mode & 0o001:
                blocked.add(ancestor)
    return sorted(blocked, key=lambda p: len(p.parts))


_CONTAINER_SCRIPT = r"""
set -euo pipefail
stage=$(mktemp -d /dev/shm/kbgate-image.XXXXXX)
i=0
for dir in $BLOCKED; do   # let the unprivileged user traverse the interpreter's parents
  i=$((i + 1)); mkdir -p "$stage/u$i" "$stage/w$i"; chmod 755 "$stage/u$i"
  mount -t overlay overlay -o "lowerdir=$dir,upperdir=$stage/u$i,workdir=$stage/w$i" "$dir"
done
mount --bind "$DATA" "$DATA"       # the data volume stays writable
mount -o remount,bind,ro /         # the image's root filesystem, read-only
cd /
exec setpriv --reuid="$UID_IMAGE" --regid="$UID_IMAGE" --clear-groups \
  env -i PATH=/usr/bin:/bin HOME=/nonexistent KBGATE_DATA_DIR="$DATA" \
  KBGATE_MODEL_CACHE_DIR="$MODELS" KBGATE_HOST=127.0.0.1 KBGATE_PORT="$PORT" \
  KBGATE_PLATFORM_KEY="$PLATFORM_KEY" "$KBGATE" serve
"""


def _image_conditions_available() -> None:
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("setpriv"):
        missing_service("root with unshare and setpriv (to reproduce the image's start)")
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True, check=False)  # noqa: S607 — util-linux from PATH
    if probe.returncode != 0:
        missing_service("mount namespaces (unshare --mount)")


@pytest.mark.slow
def test_the_image_start_conditions_reach_ready(tmp_path: Path) -> None:
    """As in the container image: the installed `kbgate` run as uid 1000 with an unwritable
    HOME, a read-only root filesystem and a model folder assembled beforehand (read-only),
    against a data dir it owns, reaches ready, writes its store there (owned by that user),
    serves a platform call, and exits 0 on SIGTERM."""
    _image_conditions_available()
    base = Path(tempfile.mkdtemp(prefix="kbgate-image-", dir="/tmp"))
    try:
        os.chmod(base, 0o755)  # noqa: S103 — the unprivileged user must reach its data dir
        models, data = base / "models", base / "data"
        prepared = subprocess.run(  # noqa: S603 — our own console script, fixed arguments
            [str(KBGATE), "prepare-model", "--model-dir", str(models)],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        assert Path(prepared.stdout.strip()).is_dir()
        subprocess.run(["chmod", "-R", "a+rX,a-w", str(models)], check=True)  # noqa: S603, S607 — coreutils on our own path
        data.mkdir()
        os.chown(data, _IMAGE_UID, _IMAGE_UID)
        port = free_port()
        needed = [Path(sys.base_prefix).resolve(), Path(sys.prefix), REPO, models, data]
        env = {
            "PATH": os.environ["PATH"],
            "BLOCKED": " ".join(map(str, _blocked_ancestors(needed))),
            "DATA": str(data),
            "MODELS": str(models),
            "PORT": str(port),
            "UID_IMAGE": str(_IMAGE_UID),
            "PLATFORM_KEY": PLATFORM_KEY,
            "KBGATE": str(KBGATE),
        }
        log = (tmp_path / "image.log").open("wb")
        process = subprocess.Popen(  # noqa: S603 — fixed script, our own paths
            ["unshare", "--mount", "--propagation", "private", "bash", "-c", _CONTAINER_SCRIPT],  # noqa: S607 — util-linux from PATH
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            try:
                _wait_ready(url, 90)
            except AssertionError:
                log.flush()
                raise AssertionError((tmp_path / "image.log").read_text()[-3000:]) from None
            created = httpx.post(
                f"{url}/v1/orgs",
                json={"org_id": "image-org"},
                headers={"Authorization": f"Bearer {PLATFORM_KEY}"},
                timeout=10,
            )
            assert created.status_code == 201, created.text
            store = data / "kbgate.sqlite3"
            assert store.stat().st_uid == _IMAGE_UID
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=30) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)
            log.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)


# ---- the compose topology's proxy --------------------------------------------------------


def _local_proxy_config(gateway_ports: list[int], listen_port: int) -> str:
    """deploy/haproxy.cfg with its Docker-DNS gateway template replaced by local gateways
    (and the Qdrant front and Docker's resolver, which need Docker's network, dropped)."""
    text = (REPO / "deploy" / "haproxy.cfg").read_text()
    head, _, _ = text.partition("frontend qdrant_api")
    head = head.replace("bind :8080", f"bind 127.0.0.1:{listen_port}")
    head = head.replace(" resolvers docker", "")
    before, _, after = head.partition("resolvers docker\n")
    head = before + after.split("\n\n", 1)[1]
    servers = "\n".join(
        f"    server gateway{n} 127.0.0.1:{port} check" for n, port in enumerate(gateway_ports)
    )
    template = "    server-template gateway 16 gateway:8080 check"
    assert template in head
    return head.replace(template, servers) + "\n"


@pytest.mark.slow
def test_the_proxy_routes_around_a_draining_and_a_stopped_replica(
    tmp_path: Path, gateway_env: dict[str, str]
) -> None:
    """Behind the compose topology's HAProxy configuration, two replicas serve; while one
    drains after SIGTERM (a request held in flight) and after it has exited, every call
    through the proxy still succeeds, answered by the other."""
    haproxy = shutil.which("haproxy")
    if haproxy is None:
        missing_service("haproxy not installed (apt-get install haproxy)")
        return
    env = {**gateway_env, "KBGATE_SHUTDOWN_TIMEOUT_S": "30"}
    first = GatewayProcess(tmp_path / "one", env)
    second = GatewayProcess(tmp_path / "two", env)
    proxy_port = free_port()
    config = tmp_path / "haproxy.cfg"
    with first, second:
        config.write_text(_local_proxy_config([first.port, second.port], proxy_port))
        proxy = subprocess.Popen(  # noqa: S603 — the installed haproxy, our own config
            [haproxy, "-db", "-f", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            url = f"http://127.0.0.1:{proxy_port}"
            _wait_ready(url, 30)
            time.sleep(4.5)  # both replicas marked up (rise 2, every 2 s)
            headers = {"Authorization": f"Bearer {PLATFORM_KEY}"}

            def calls(tag: str) -> list[int]:
                with httpx.Client(base_url=url, timeout=10) as client:
                    return [
                        client.post(
                            "/v1/orgs", json={"org_id": f"{tag}-{n}"}, headers=headers
                        ).status_code
                        for n in range(12)
                    ] + [client.get("/health/ready").status_code for _ in range(12)]

            assert set(calls("both")) == {200, 201}
            held = _start_slow_request(first.port)
            time.sleep(0.3)
            os.kill(first.pid, signal.SIGTERM)
            time.sleep(0.3)
            draining = calls("draining")
            assert set(draining) == {200, 201}, draining
            held.sendall(b'{"org_id": "drain-org"}'[5:])
            held.recv(4096)
            held.close()
            assert first._process is not None
            assert first._process.wait(timeout=15) == 0
            assert set(calls("stopped")) == {200, 201}
        finally:
            proxy.terminate()
            proxy.wait(timeout=10)


def test_compose_pins_a_supported_qdrant_and_scales_the_gateway() -> None:
    """compose.yaml pins every Qdrant service to a version the adapter accepts, publishes
    no fixed port on the gateway (so it can be scaled), and gives it a stop grace period
    above the shutdown bound it sets."""
    import yaml  # type: ignore[import-untyped]  # PyYAML ships no type hints (it comes with litestar)

    from ingest.engines.server.requests import MIN_SERVER_VERSION, parse_version

    compose = yaml.safe_load((REPO / "compose.yaml").read_text())
    services = compose["services"]
    qdrants = [s for s in services.values() if str(s.get("image", "")).startswith("qdrant/")]
    assert len(qdrants) == 3
    for service in qdrants:
        tag = service["image"].split(":")[1]
        assert parse_version(tag) >= MIN_SERVER_VERSION, tag
    gateway = services["gateway"]
    assert "ports" not in gateway
    assert gateway["read_only"] is True
    grace = int(gateway["stop_grace_period"].removesuffix("s"))
    assert grace > float(gateway["environment"]["KBGATE_SHUTDOWN_TIMEOUT_S"])
    assert "haproxy" in services["proxy"]["image"]


def test_the_proxy_forwards_the_client_address_and_the_gateways_trust_only_it() -> None:
    """Issue 57 #5: HAProxy adds X-Forwarded-For (and sets X-Forwarded-Proto itself); the
    gateways trust forwarding headers from the proxy's fixed address, and no other."""
    import yaml

    from settings.config import load_config

    config = (REPO / "deploy" / "haproxy.cfg").read_text()
    front = config.partition("frontend kbgate_api")[2].partition("backend gateways")[0]
    assert "option forwardfor" in front
    assert "http-request set-header X-Forwarded-Proto" in front
    compose = yaml.safe_load((REPO / "compose.yaml").read_text())
    services = compose["services"]
    trusted = services["gateway"]["environment"]["KBGATE_TRUSTED_PROXIES"]
    proxy_address = services["proxy"]["networks"]["default"]["ipv4_address"]
    assert trusted == proxy_address
    default = trusted.partition(":-")[2].rstrip("}")
    assert load_config({"KBGATE_TRUSTED_PROXIES": default}).trusted_proxies == (f"{default}/32",)
