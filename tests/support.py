"""Helpers for tests that run real processes: free ports, polling with a deadline, a real uvicorn, a
real `logwatch watch` subprocess, a real Prometheus. conftest.py turns them into fixtures; test modules
that need them outside a fixture import them from here (`from support import ...`: pytest puts this
folder on sys.path), never from conftest, whose name tests/e2e shares.

Subprocess output goes to files (never to pipes nobody reads, which would block the child).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, TypeVar

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

T = TypeVar("T")

TESTS = Path(__file__).resolve().parent
"""The tests folder: data/, golden/, help/, fake_vllm.py, whatever folder a test file sits in."""
ROOT = TESTS.parent
"""The repository."""



def free_port() -> int:
    """An unused TCP port on 127.0.0.1 (free when returned; bind it soon)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def poll_until(check: Callable[[], T | None], timeout: float = 10.0, what: str = "condition",
               interval: float = 0.02) -> T:
    """`check()`'s first truthy result; `pytest.fail` naming `what` once `timeout` seconds passed."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}; last result: {result!r}")
        time.sleep(interval)  # the pace of polling, not a synchronisation


@contextlib.contextmanager
def run_app(app: Any, *, startup_timeout: float = 10.0) -> Iterator[httpx.Client]:
    import threading

    import uvicorn

    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, log_level="warning",
                            access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
    thread.start()
    try:
        poll_until(lambda: server.started or not thread.is_alive(), startup_timeout, "uvicorn to start")
        assert server.started, "uvicorn did not start"
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5.0) as client:
            yield client
    finally:
        server.should_exit = True
        thread.join(10)


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


class WatchProcess:
    """A running `logwatch watch` subprocess and a small HTTP client for it."""

    def __init__(self, proc: subprocess.Popen[bytes], port: int, stderr_path: Path, *, scheme: str = "http",
                 client_options: Mapping[str, Any] | None = None) -> None:
        self.proc = proc
        self.port = port
        self.address = f"127.0.0.1:{port}"
        self.url = f"{scheme}://{self.address}"
        self.stderr_path = stderr_path
        self.client = httpx.Client(base_url=self.url, timeout=5.0, **(client_options or {}))

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.client.get(path, **kwargs)

    def status(self) -> dict[str, Any]:
        response = self.get("/api/v1/status")
        response.raise_for_status()
        result: dict[str, Any] = response.json()
        return result

    def samples(self) -> Samples:
        """Every sample of /metrics: (name, labels) -> value."""
        response = self.get("/metrics")
        response.raise_for_status()
        return {
            (s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(response.text)
            for s in family.samples
        }

    def sample(self, name: str, labels: Mapping[str, str] | None = None) -> float | None:
        """One sample's value (full name, `_total` included for counters), or None."""
        return self.samples().get((name, frozenset((labels or {}).items())))

    def wait_sample(self, name: str, labels: Mapping[str, str] | None = None,
                    expected: float | Callable[[float], bool] | None = None, timeout: float = 10.0) -> float:
        """Poll /metrics until the sample exists (and equals `expected`, or satisfies it); its value."""

        def check() -> float | None:
            value = self.sample(name, labels)
            if value is None:
                return None
            if expected is None:
                ok = True
            elif callable(expected):
                ok = expected(value)
            else:
                ok = math.isclose(value, expected, rel_tol=1e-9, abs_tol=1e-9)
            return value if ok else None

        result = poll_until(lambda: (found,) if (found := check()) is not None else None, timeout,
                             f"{name}{dict(labels or {})} == {expected!r}")
        return result[0]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def rss_bytes(self) -> int:
        """Resident memory of the process now (Linux /proc)."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int:
        """Send `sig` and wait; the exit code. Fails (after killing it) if it does not exit in time."""
        self.client.close()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                pytest.fail(f"logwatch watch did not exit within {timeout} s of signal {sig}")
        return self.proc.returncode


def drop_dac_capabilities() -> None:
    """In the child, before exec: give up root's power to read any file (CAP_DAC_OVERRIDE and
    CAP_DAC_READ_SEARCH leave the bounding set), so `chmod 000` makes a file unreadable even to root."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    pr_capbset_drop = 24
    for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(pr_capbset_drop, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


@contextlib.contextmanager
def run_watch(target: str | Path, *args: str, env: Mapping[str, str] | None = None,
              port: int | None = None, drop_root_read: bool = False, startup_timeout: float = 20.0,
              stop_timeout: float = 10.0, log_dir: Path | None = None, scheme: str = "http",
              client_options: Mapping[str, Any] | None = None,
              stdin: int | IO[bytes] = subprocess.DEVNULL,
              preexec: Callable[[], None] | None = None) -> Iterator[WatchProcess]:
    """`logwatch watch TARGET *args` on `port`; ready once /healthz answers 200. For a server behind
    --web-config, `scheme="https"` and `client_options` (httpx: `verify`, `auth`) reach it. `stdin`:
    what the child reads as standard input (`subprocess.PIPE`: write it through `watch.proc.stdin`);
    `preexec`: run in the child before exec (a resource limit)."""
    port = port or free_port()
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("LOGWATCH_")}
    child_env.update(env or {})
    child_env["PYTHONUNBUFFERED"] = "1"
    cmd = [sys.executable, "-m", "vllm_logwatch", "watch", str(target),
           "--listen", "127.0.0.1", "--port", str(port), *args]
    folder = log_dir or Path(os.environ.get("TMPDIR", "/tmp"))
    stderr_path = folder / f"logwatch-watch-{port}.stderr"
    with open(stderr_path, "wb") as err:
        proc = subprocess.Popen(
            cmd, stdin=stdin, stdout=err, stderr=err, env=child_env,
            preexec_fn=drop_dac_capabilities if drop_root_read else preexec,
        )
    watch = WatchProcess(proc, port, stderr_path, scheme=scheme, client_options=client_options)
    try:
        def ready() -> bool:
            if proc.poll() is not None:
                pytest.fail(f"logwatch watch exited with {proc.returncode}:\n{watch.stderr()}")
            try:
                return watch.get("/healthz").status_code == 200
            except httpx.TransportError:
                return False

        poll_until(ready, startup_timeout, "logwatch watch to answer /healthz")
        yield watch
    finally:
        watch.stop(timeout=stop_timeout)


@contextlib.contextmanager
def run_demo(folder: Path, speed: float = 100, *, wait: bool = True) -> Iterator[str]:
    """A real `logwatch demo --speed SPEED` on a free loopback port (its stderr in `folder`); its base
    URL, once /healthz answers (`wait=False`: at once, for a caller that waits for more anyway)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOGWATCH_")}
    env.update(PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT))
    err = folder / f"demo-{port}.err"
    with open(err, "wb") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "vllm_logwatch", "demo", "--speed", str(speed),
                                 "--port", str(port)], stdout=subprocess.DEVNULL, stderr=stderr, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        def up() -> bool:
            try:
                return httpx.get(f"{base}/healthz", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        if wait:
            poll_until(up, 20, "demo serving")
        yield base
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0, err.read_text()


class PrometheusServer:
    """A running Prometheus and a client for its HTTP API."""

    def __init__(self, proc: subprocess.Popen[bytes], port: int, log_path: Path) -> None:
        self.proc = proc
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = log_path
        self.client = httpx.Client(base_url=self.url, timeout=5.0)

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector of `expr` now: a list of `{"metric": {...}, "value": [t, "v"]}`."""
        response = self.client.get("/api/v1/query", params={"query": expr})
        response.raise_for_status()
        body = response.json()
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def value(self, expr: str) -> float | None:
        """The single value of `expr` now, or None when it has no sample."""
        result = self.query(expr)
        if not result:
            return None
        assert len(result) == 1, result
        return float(result[0]["value"][1])

    def wait_value(self, expr: str, expected: float, timeout: float = 15.0, rel: float = 1e-9) -> float:
        """Poll the API until `expr` has a sample equal to `expected` (relative tolerance `rel`)."""

        def check() -> tuple[float] | None:
            value = self.value(expr)
            if value is not None and math.isclose(value, expected, rel_tol=rel, abs_tol=1e-12):
                return (value,)
            return None

        return poll_until(check, timeout, f"Prometheus: {expr} == {expected}")[0]

    def targets_up(self) -> bool:
        return any(r["value"][1] == "1" for r in self.query("up"))

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")


def required_tool(name: str, package: str, require_env: str) -> str:
    """The path of program `name` (on PATH, else in /usr/bin); without it the test is skipped, or
    fails when `require_env` is set (CI sets it: there the Debian `package` must be installed)."""
    binary = shutil.which(name) or (f"/usr/bin/{name}" if os.path.exists(f"/usr/bin/{name}") else None)
    if binary is None:
        missing(f"{name} is missing (apt-get install {package})", require_env)
    assert binary is not None
    return binary


@dataclasses.dataclass(frozen=True)
class TLSFiles:
    """PEM files made for a test: a CA, a server certificate it signed (for 127.0.0.1 and localhost),
    and a client certificate it signed."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def make_tls_files(folder: Path) -> TLSFiles:
    """A throw-away CA with a server and a client certificate in `folder`, made with the `cryptography`
    package when it is installed, else with the `openssl` command."""
    folder.mkdir(parents=True, exist_ok=True)
    names = ("ca.pem", "server.pem", "server.key", "client.pem", "client.key")
    files = TLSFiles(*(folder / name for name in names))
    try:
        import cryptography  # noqa: F401
    except ImportError:
        _openssl_tls_files(folder, files)
    else:
        _cryptography_tls_files(files)
    return files


def _cryptography_tls_files(files: TLSFiles) -> None:
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)

    def write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
        path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))

    def build(name: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Name,
              signer: ec.EllipticCurvePrivateKey) -> x509.CertificateBuilder:
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=2)))

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "logwatch test CA")])
    ca = (build("logwatch test CA", ca_key, ca_name, ca_key)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(
              digital_signature=False, content_commitment=False, key_encipherment=False,
              data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
              encipher_only=False, decipher_only=False),
              critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    files.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    for cert_path, key_path, name, usage in (
            (files.server_cert, files.server_key, "127.0.0.1", ExtendedKeyUsageOID.SERVER_AUTH),
            (files.client_cert, files.client_key, "scraper", ExtendedKeyUsageOID.CLIENT_AUTH)):
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (build(name, key, ca_name, ca_key)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                                  critical=False))
        if usage == ExtendedKeyUsageOID.SERVER_AUTH:
            names = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert_path.write_bytes(builder.sign(ca_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM))
        write_key(key, key_path)
    write_key(ca_key, files.ca.with_suffix(".key"))


def _openssl_tls_files(folder: Path, files: TLSFiles) -> None:
    openssl = required_tool("openssl", "openssl", "LOGWATCH_REQUIRE_OPENSSL")
    ca_key = files.ca.with_suffix(".key")

    def run(*args: str | Path) -> None:
        subprocess.run([openssl, *map(str, args)], check=True, capture_output=True, timeout=60)

    curve = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    run("req", "-x509", *curve, "-keyout", ca_key, "-out", files.ca, "-days", "2",
        "-subj", "/CN=logwatch test CA", "-addext", "basicConstraints=critical,CA:TRUE,pathlen:0",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    for cert, key, name, ext in (
            (files.server_cert, files.server_key, "127.0.0.1", "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
             "extendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n"),
            (files.client_cert, files.client_key, "scraper",
             "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n")):
        csr, extfile = folder / f"{name}.csr", folder / f"{name}.ext"
        extfile.write_text(ext, encoding="ascii")
        run("req", *curve, "-keyout", key, "-out", csr, "-subj", f"/CN={name}")
        run("x509", "-req", "-in", csr, "-CA", files.ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert,
            "-days", "2", "-extfile", extfile)


def missing(reason: str, require_env: str) -> None:
    """Skip for `reason`, or fail when `require_env` says the thing must be there."""
    if os.environ.get(require_env):
        pytest.fail(f"{reason}, and {require_env} is set")
    pytest.skip(reason)


def prometheus_binary() -> str:
    return required_tool("prometheus", "prometheus", "LOGWATCH_REQUIRE_PROMETHEUS")


@contextlib.contextmanager
def run_prometheus(folder: Path, targets: Sequence[str], *, scrape_interval: str = "500ms",
                   startup_timeout: float = 30.0) -> Iterator[PrometheusServer]:
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "prometheus.yml"
    quoted = ", ".join(f'"{t}"' for t in targets)
    config.write_text(
        "global:\n"
        f"  scrape_interval: {scrape_interval}\n"
        f"  scrape_timeout: {scrape_interval}\n"
        "scrape_configs:\n"
        "  - job_name: logwatch\n"
        "    static_configs:\n"
        f"      - targets: [{quoted}]\n",
        encoding="utf-8",
    )
    with serve_prometheus(config, folder, startup_timeout) as server:
        yield server


@contextlib.contextmanager
def serve_prometheus(
    config: Path, folder: Path, startup_timeout: float = 30.0, *, tsdb: Path | None = None,
    extra_args: Sequence[str] = (), agent: bool = False,
) -> Iterator[PrometheusServer]:
    """A real Prometheus with `config`, its log in `folder` and its data in `tsdb` (default
    `folder/data`), on a free loopback port; ready when /-/ready answers (polled with a deadline);
    terminated (then killed) on exit. `agent`: in agent mode (scrape and remote-write, no queries)."""
    binary = prometheus_binary()
    port = free_port()
    log_path = folder / "prometheus.log"
    storage = (["--enable-feature=agent", f"--storage.agent.path={tsdb or folder / 'data'}"] if agent
               else [f"--storage.tsdb.path={tsdb or folder / 'data'}"])
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(
            [binary, f"--config.file={config}", *storage,
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn", *extra_args],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out,
        )
    server = PrometheusServer(proc, port, log_path)
    try:
        def ready() -> bool:
            if proc.poll() is not None:
                pytest.fail(f"prometheus exited with {proc.returncode}:\n{server.log()}")
            try:
                return server.client.get("/-/ready").status_code == 200
            except httpx.TransportError:
                return False

        poll_until(ready, startup_timeout, "Prometheus /-/ready", interval=0.05)
        yield server
    finally:
        server.client.close()
        stop_process(proc)


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, up to 15 s to exit, then SIGKILL."""
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def outputs_each(script: str, groups: list[list[str]], *args: int) -> list[str]:
    """`script`'s output (`python -c script *args groups-as-JSON`) for each group of inputs, one
    interpreter for all of them: the script ends each group's output with a record separator."""
    import json
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", script, *map(str, args), json.dumps(groups)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    outputs = proc.stdout.split("\x1e")
    assert outputs.pop() == "" and len(outputs) == len(groups)
    return outputs


# -- following: the lines of a follower's blocks, one by one, and a waker stepped by hand -------------


@dataclasses.dataclass(frozen=True)
class LogLine:
    """One line of a `LineBlock`: its file, byte offset and number, its text (`\\n` and a trailing `\\r`
    removed, bad UTF-8 replaced); `cut`: longer than the cap and cut to it."""

    source: str
    offset: int
    number: int
    text: str
    cut: bool = False


def lines_of(blocks: Sequence[Any]) -> list[LogLine]:
    """Every line of `blocks` (`following.openfile.LineBlock`), in order."""
    out: list[LogLine] = []
    for block in blocks:
        if block.cut:
            out.append(LogLine(block.source, block.offset, block.number,
                               block.data[:-1].decode("utf-8", "replace"), True))
            continue
        offset = block.offset
        for number, raw in enumerate(block.data.split(b"\n")[:-1], block.number):
            text = (raw[:-1] if raw.endswith(b"\r") else raw).decode("utf-8", "replace")
            out.append(LogLine(block.source, offset, number, text))
            offset += len(raw) + 1
    return out


def poll(source: Any) -> list[LogLine]:
    """One `poll_blocks()` of a follower (or a stream), line by line."""
    return lines_of(source.poll_blocks())


def save(source: Any) -> bool:
    """Write the follower's state file at its `checkpoint()`, as the pipeline does; True if written."""
    state = source.checkpoint().state
    return state is not None and bool(source.write_checkpoint(state))


class ManualWaker:
    """A waker whose `wait` never blocks, so a test steps a follower with explicit polls. It records
    `waits`, `wakes`, `watched` (the last folders asked for) and `closed`; `wait` is True if `wake()`
    came since the last wait."""

    def __init__(self) -> None:
        self.waits = self.wakes = 0
        self.watched: frozenset[str] = frozenset()
        self.closed = self._pending = False
        self.degraded_reason: str | None = None

    def take_changed(self) -> None:
        return None

    def wait(self, timeout: float | None) -> bool:
        self.waits += 1
        woke, self._pending = self._pending, False
        return woke

    def watch(self, paths: Any) -> None:
        self.watched = frozenset(os.path.abspath(p) for p in paths)

    def wake(self) -> None:
        self.wakes += 1
        self._pending = True

    def close(self) -> None:
        self.closed = True
