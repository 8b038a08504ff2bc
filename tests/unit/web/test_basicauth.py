"""Basic auth under load (web/server.py `_WebGuard`, web/webconfig.py `BasicAuth`): bcrypt's set-up at
start, never at the first request; a good password not queued behind a flood of wrong ones; a cost
that would make each check take seconds refused; a named pipe for a file refused, not waited on."""

from __future__ import annotations

import asyncio
import base64
import os
import threading
import time
from pathlib import Path

import bcrypt
import httpx
import pytest
from prometheus_client.registry import CollectorRegistry
from support import TLSFiles, make_tls_files

from vllm_logwatch.errors import UsageError
from vllm_logwatch.web.server import create_app
from vllm_logwatch.web.webconfig import MAX_BCRYPT_COST, MAX_PENDING_CHECKS, WebConfig, load_web_config

pytestmark = pytest.mark.timeout(60)

COST = 8  # ~20 ms a check: 200 of them queued are seconds, one is nothing


def header(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def guarded_app(cost: int = COST) -> tuple[object, str]:
    hashed = bcrypt.hashpw(b"alice-password", bcrypt.gensalt(cost)).decode()
    web = WebConfig.model_validate({"basic_auth_users": {"alice": hashed}})
    return create_app(CollectorRegistry(), lambda: {"engines": {}}, web=web), hashed


def test_the_dummy_hash_is_made_at_start_not_at_the_first_request(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[bytes] = []
    real = bcrypt.hashpw

    def counted(password: bytes, salt: bytes) -> bytes:
        made.append(salt)
        return real(password, salt)

    hashed = bcrypt.hashpw(b"alice-password", bcrypt.gensalt(COST)).decode()
    monkeypatch.setattr(bcrypt, "hashpw", counted)
    app = create_app(CollectorRegistry(), lambda: {"engines": {}},
                     web=WebConfig.model_validate({"basic_auth_users": {"alice": hashed}}))
    assert len(made) == 1, "the unknown user's hash is made when the app is"

    async def first() -> int:
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return (await client.get("/healthz", headers=header("alice", "alice-password"))).status_code

    assert asyncio.run(first()) == 200
    assert len(made) == 1, "no bcrypt set-up on the event loop at the first request"


def test_a_good_password_is_not_queued_behind_a_flood_of_wrong_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    app, _ = guarded_app()
    checks: list[float] = []
    real = bcrypt.checkpw
    started = threading.Event()

    def counted(password: bytes, hashed: bytes) -> bool:
        checks.append(time.monotonic())
        started.set()
        return bool(real(password, hashed))

    monkeypatch.setattr(bcrypt, "checkpw", counted)

    async def scenario() -> tuple[list[int], int, float, int, float]:
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=30) as client:
            flood = [asyncio.create_task(client.get("/healthz", headers=header("alice", f"wrong{i}")))
                     for i in range(200)]
            while not started.is_set():  # the flood has reached bcrypt
                await asyncio.sleep(0.001)
            t0 = time.monotonic()
            good = await client.get("/healthz", headers=header("alice", "alice-password"))
            good_wait = time.monotonic() - t0
            statuses = [r.status_code for r in await asyncio.gather(*flood)]
            again = await client.get("/healthz", headers=header("alice", "alice-password"))
            t0 = time.monotonic()
            cached = await client.get("/healthz", headers=header("alice", "alice-password"))
            return statuses, good.status_code, good_wait, again.status_code + cached.status_code - 200, \
                time.monotonic() - t0

    statuses, good, good_wait, again, cached_wait = asyncio.run(scenario())
    assert set(statuses) == {401}
    # Answered within the few checks that may be under way (200 queued checks of ~20 ms: seconds).
    assert good in (200, 401) and good_wait < 0.5, (good, good_wait)
    assert again == 200, "once the flood is over the good password gets in, then is remembered"
    assert cached_wait < 0.1
    assert len(checks) < 50, f"{len(checks)} bcrypt checks for 200 wrong passwords"


def test_pending_checks_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    app, _ = guarded_app(4)
    release = threading.Event()
    running: list[int] = []

    def slow(password: bytes, hashed: bytes) -> bool:
        running.append(1)
        release.wait(10)
        return False

    monkeypatch.setattr(bcrypt, "checkpw", slow)

    async def scenario() -> list[int]:
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=30) as client:
            held = [asyncio.create_task(client.get("/healthz", headers=header("alice", f"w{i}")))
                    for i in range(MAX_PENDING_CHECKS)]
            while not running:
                await asyncio.sleep(0.001)
            t0 = time.monotonic()
            extra = await client.get("/healthz", headers=header("alice", "alice-password"))
            assert time.monotonic() - t0 < 0.5 and extra.status_code == 401, "refused at once, not queued"
            release.set()
            return [r.status_code for r in await asyncio.gather(*held)]

    assert asyncio.run(scenario()) == [401] * MAX_PENDING_CHECKS


def test_a_cost_above_the_maximum_is_refused(tmp_path: Path) -> None:
    salt = "$2b$13$" + "a" * 53
    path = tmp_path / "web.yml"
    path.write_text(f"basic_auth_users:\n  alice: '{salt}'\n")
    with pytest.raises(UsageError, match=rf"bcrypt cost 13 is above {MAX_BCRYPT_COST}"):
        load_web_config(str(path))
    path.write_text(f"basic_auth_users:\n  alice: '$2b${MAX_BCRYPT_COST}${'a' * 53}'\n")
    assert load_web_config(str(path)).basic_auth_users


def load_in_thread(path: str) -> BaseException | None:
    """load_web_config(path) in a thread: its error, or a failure if it does not return in 5 s."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            load_web_config(path)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(5)
    if not outcome:
        # Unblock the stuck open() with a writer, so the thread ends.
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        pytest.fail(f"load_web_config({path}) hangs")
    return outcome[0]


def test_a_named_pipe_as_the_web_config_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "web.yml"
    os.mkfifo(fifo)
    error = load_in_thread(str(fifo))
    assert isinstance(error, UsageError) and str(error) == "cannot read it (not a regular file)"


@pytest.mark.parametrize("which", ["cert_file", "key_file"])
def test_a_named_pipe_as_a_tls_file_is_refused(tmp_path: Path, which: str) -> None:
    tls: TLSFiles = make_tls_files(tmp_path / "tls")
    fifo = tmp_path / "pipe.pem"
    os.mkfifo(fifo)
    files = {"cert_file": tls.server_cert, "key_file": tls.server_key, which: fifo}
    web = tmp_path / "web.yml"
    web.write_text(f"tls_server_config:\n  cert_file: {files['cert_file']}\n"
                   f"  key_file: {files['key_file']}\n")
    error = load_in_thread(str(web))
    assert isinstance(error, UsageError)
    assert str(error) == f"tls_server_config: {which} {fifo}: cannot read it (not a regular file)"
