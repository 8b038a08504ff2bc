"""`--web-config FILE` (web/webconfig.py): exporter-toolkit's web configuration format, each bad file a
one-line usage error, basic-auth checks, and the option's place in the settings (CLI > env > default)."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import bcrypt
import pytest
from support import TLSFiles, make_tls_files

from vllm_logwatch.config import DemoSettings, RunSettings, WatchSettings, load_settings
from vllm_logwatch.errors import UsageError
from vllm_logwatch.web.webconfig import BasicAuth, load_web_config

pytestmark = pytest.mark.timeout(60)

ALICE = bcrypt.hashpw(b"alice-password", bcrypt.gensalt(4)).decode()


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


def write(folder: Path, text: str, name: str = "web.yml") -> str:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def good_text(tls: TLSFiles) -> str:
    return (f"tls_server_config:\n  cert_file: {tls.server_cert}\n  key_file: {tls.server_key}\n"
            f"  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: {tls.ca}\n  min_version: TLS13\n"
            f"http_server_config:\n  http2: false\n  headers:\n    X-Frame-Options: deny\n"
            f"    Strict-Transport-Security: max-age=31536000\nbasic_auth_users:\n  alice: {ALICE}\n")


def test_a_good_file(tmp_path: Path, tls: TLSFiles) -> None:
    import ssl

    web = load_web_config(write(tmp_path, good_text(tls)))
    assert web.tls is not None
    assert (web.tls.cert_file, web.tls.key_file, web.tls.client_ca_file) == (
        str(tls.server_cert), str(tls.server_key), str(tls.ca))
    assert web.tls.cert_reqs == ssl.CERT_OPTIONAL
    assert web.tls.minimum_version == ssl.TLSVersion.TLSv1_3
    assert web.headers == {"X-Frame-Options": "deny", "Strict-Transport-Security": "max-age=31536000"}
    assert web.basic_auth_users == {"alice": ALICE}
    assert web.scheme == "https"


def test_defaults_and_relative_paths(tmp_path: Path, tls: TLSFiles) -> None:
    """Paths are relative to the file's folder (exporter-toolkit); TLS 1.2 and no client certificate
    by default; an empty file turns nothing on."""
    import ssl

    (tmp_path / "certs").mkdir()
    for src, name in ((tls.server_cert, "s.pem"), (tls.server_key, "s.key")):
        (tmp_path / "certs" / name).write_bytes(src.read_bytes())
    text = "tls_server_config:\n  cert_file: certs/s.pem\n  key_file: certs/s.key\n"
    web = load_web_config(write(tmp_path, text))
    assert web.tls is not None
    assert web.tls.cert_file == str(tmp_path / "certs" / "s.pem")
    assert (web.tls.cert_reqs, web.tls.minimum_version) == (ssl.CERT_NONE, ssl.TLSVersion.TLSv1_2)
    empty = load_web_config(write(tmp_path, "", "empty.yml"))
    assert (empty.tls, empty.basic_auth_users, empty.headers, empty.scheme) == (None, {}, {}, "http")
    auth_only = load_web_config(write(tmp_path, f"basic_auth_users:\n  alice: '{ALICE}'\n", "auth.yml"))
    assert (auth_only.tls, list(auth_only.basic_auth_users)) == (None, ["alice"])


BAD_FILES: list[tuple[str, str, str]] = [
    ("not YAML", "tls_server_config: [unclosed\n", "not YAML (line 2)"),
    ("not a mapping", "- a\n- b\n", "not a YAML mapping"),
    ("unknown key", "tls_server_config:\n  cert_fil: x\n",
     "tls_server_config.cert_fil: unknown key (known: cert_file"),
    ("unknown section", "basic_auth:\n  a: b\n", "basic_auth: unknown key"),
    ("not supported", "rate_limit:\n  burst: 2\n",
     "rate_limit: an exporter-toolkit setting logwatch does not support"),
    ("inline cert", "tls_server_config:\n  cert: '-----BEGIN'\n",
     "tls_server_config.cert: an exporter-toolkit setting logwatch does not support"),
    ("max_version", "tls_server_config:\n  max_version: TLS12\n",
     "tls_server_config.max_version: an exporter-toolkit"),
    ("bad bcrypt hash", "basic_auth_users:\n  alice: secret\n",
     "basic_auth_users: user 'alice': not a bcrypt hash"),
    ("short bcrypt hash", f"basic_auth_users:\n  alice: '{ALICE[:-1]}'\n", "not a bcrypt hash"),
    ("hash not a string", "basic_auth_users:\n  alice: 12\n",
     "basic_auth_users.alice: Input should be a valid string"),
    ("user twice", f"basic_auth_users:\n  alice: '{ALICE}'\n  alice: '{ALICE}'\n", "key 'alice' given twice"),
    ("http2", "http_server_config:\n  http2: true\n", "http_server_config.http2: HTTP/2 is not served"),
    ("header", "http_server_config:\n  headers:\n    Server: x\n", "header 'Server' cannot be configured"),
    ("header value", "http_server_config:\n  headers:\n    X-Frame-Options: allow\n",
     "X-Frame-Options: 'allow' is not one of deny, sameorigin"),
    ("client auth", "tls_server_config:\n  client_auth_type: RequireAnyClientCert\n",
     "RequireAnyClientCert (a client certificate accepted unverified) is not supported"),
    ("client auth typo", "tls_server_config:\n  client_auth_type: Verify\n",
     "'Verify' is not one of NoClientCert"),
    ("TLS version", "tls_server_config:\n  min_version: TLS1.2\n",
     "'TLS1.2' is not one of TLS10, TLS11, TLS12, TLS13"),
    ("no key", "tls_server_config:\n  cert_file: {cert}\n",
     "tls_server_config: needs both cert_file and key_file"),
    ("missing cert file", "tls_server_config:\n  cert_file: /nonexistent/s.pem\n  key_file: {key}\n",
     "tls_server_config: cert_file /nonexistent/s.pem: cannot read it (no such file or directory)"),
    ("key of another cert", "tls_server_config:\n  cert_file: {cert}\n  key_file: {client_key}\n",
     "are not a PEM certificate and its unencrypted key"),
    ("cert is not PEM", "tls_server_config:\n  cert_file: {web}\n  key_file: {key}\n",
     "are not a PEM certificate and its unencrypted key"),
    ("CA without policy", "tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n"
     "  client_ca_file: {ca}\n",
     "client_ca_file is set but client_auth_type is NoClientCert"),
    ("policy without CA", "tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n"
     "  client_auth_type: RequireAndVerifyClientCert\n", "RequireAndVerifyClientCert needs client_ca_file"),
    ("CA not PEM", "tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n"
     "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {web}\n", "client_ca_file"),
]


@pytest.mark.parametrize(("text", "expected"), [(t, e) for _, t, e in BAD_FILES],
                         ids=[i for i, _, _ in BAD_FILES])
def test_each_bad_file_is_a_one_line_usage_error(
        tmp_path: Path, tls: TLSFiles, text: str, expected: str) -> None:
    path = tmp_path / "web.yml"
    filled = text.format(cert=tls.server_cert, key=tls.server_key, client_key=tls.client_key, ca=tls.ca,
                         web=path)
    path.write_text(filled, encoding="utf-8")
    with pytest.raises(UsageError) as caught:
        load_web_config(str(path))
    message = str(caught.value)
    assert expected in message
    assert "\n" not in message


def test_an_unreadable_or_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^cannot read it \(no such file or directory\)$"):
        load_web_config(str(tmp_path / "missing.yml"))
    with pytest.raises(UsageError, match=r"^cannot read it \(is a directory\)$"):
        load_web_config(str(tmp_path))


def test_an_encrypted_key_is_refused_without_a_prompt(tmp_path: Path, tls: TLSFiles) -> None:
    serialization = pytest.importorskip("cryptography.hazmat.primitives.serialization")
    key = serialization.load_pem_private_key(tls.server_key.read_bytes(), None)
    locked = tmp_path / "locked.key"
    locked.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.BestAvailableEncryption(b"passphrase")))
    path = write(tmp_path, f"tls_server_config:\n  cert_file: {tls.server_cert}\n  key_file: {locked}\n")
    with pytest.raises(UsageError, match="unencrypted key"):
        load_web_config(path)


def header(user: str, password: str) -> bytes:
    return b"Basic " + base64.b64encode(f"{user}:{password}".encode())


def test_basic_auth_checks() -> None:
    auth = BasicAuth({"alice": ALICE})
    assert auth.check(header("alice", "alice-password"))
    for bad in (header("alice", "wrong"), header("bob", "alice-password"), header("alice", ""),
                header("alice", "alice-password" + "x" * 80), None, b"", b"Basic", b"Basic !!!",
                b"Bearer abc", b"Basic " + base64.b64encode(b"alice"),
                b"basic " + base64.b64encode(b"alice:alice-password")[:-1]):
        assert not auth.check(bad), bad
    assert auth.check(b"basic " + base64.b64encode(b"alice:alice-password")), "the scheme is case-insensitive"


def test_basic_auth_costs_one_bcrypt_per_good_password_and_one_per_any_bad_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    auth = BasicAuth({"alice": ALICE})
    calls: list[bytes] = []
    real = bcrypt.checkpw

    def counted(password: bytes, hashed: bytes) -> bool:
        calls.append(hashed)
        return bool(real(password, hashed))

    monkeypatch.setattr(bcrypt, "checkpw", counted)
    assert not auth.cached(header("alice", "alice-password"))
    for _ in range(5):
        assert auth.check(header("alice", "alice-password"))
    assert len(calls) == 1, "a good password is checked by bcrypt once, then remembered"
    assert auth.cached(header("alice", "alice-password"))
    assert not auth.cached(header("alice", "wrong"))
    assert not auth.check(header("alice", "wrong"))
    assert not auth.check(header("nobody", "alice-password"))
    assert len(calls) == 3, "a wrong password and an unknown user each cost a bcrypt check"
    assert calls[2] != ALICE.encode() and calls[2][:7] == ALICE.encode()[:7], \
        "an unknown user is checked against a hash of the same cost"


def test_web_config_is_a_setting_of_watch_run_and_demo(tmp_path: Path, tls: TLSFiles) -> None:
    """Command line over environment over default, for the three commands that serve HTTP."""
    cli_file = write(tmp_path, f"basic_auth_users:\n  alice: '{ALICE}'\n", "cli.yml")
    env_file = write(tmp_path, "", "env.yml")
    env = {"LOGWATCH_WEB_CONFIG": env_file}
    for model, extra in ((WatchSettings, {"target": "x.log"}), (RunSettings, {}), (DemoSettings, {})):
        assert load_settings(model, {**extra, "web_config": cli_file}, env).web_config.basic_auth_users
        assert load_settings(model, extra, env).web_config.basic_auth_users == {}
        assert load_settings(model, extra, {}).web_config is None
    with pytest.raises(UsageError, match=r"^LOGWATCH_WEB_CONFIG '.*missing.yml': cannot read it"):
        load_settings(WatchSettings, {"target": "x.log"},
                      {"LOGWATCH_WEB_CONFIG": str(tmp_path / "missing.yml")})
    bad = write(tmp_path, "basic_auth_users: {a: b}\n", "bad.yml")
    with pytest.raises(UsageError, match=r"^--web-config '.*bad.yml': basic_auth_users: user 'a': not a"):
        load_settings(WatchSettings, {"target": "x.log", "web_config": bad}, {})


def logwatch(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("LOGWATCH_")}
    child_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "vllm_logwatch", *args], cwd=cwd, env=child_env,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.integration  # over 0.2 s (a process, or a day of lines): make test, not smoke
@pytest.mark.parametrize("command", [["watch", "logs"], ["demo"], ["run", "--log-dir", "logs"]])
def test_a_bad_web_config_stops_the_command_before_anything_starts(
        tmp_path: Path, command: list[str]) -> None:
    text = "tls_server_config:\n  cert_file: missing.pem\n  key_file: missing.key\n"
    bad = write(tmp_path, text, "bad.yml")
    marker = tmp_path / "vllm-started"
    child = ["--", sys.executable, "-c", f"open({str(marker)!r}, 'w')"] if command[0] == "run" else []
    for how, env in ((["--web-config", bad], None), ([], {"LOGWATCH_WEB_CONFIG": bad})):
        proc = logwatch(*command, "--port", "0", *how, *child, cwd=tmp_path, env=env)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1, proc.stderr
        where = "--web-config" if env is None else "LOGWATCH_WEB_CONFIG"
        start = f"logwatch {command[0]}: {where} '{bad}': tls_server_config: cert_file "
        assert proc.stderr.startswith(start), proc.stderr
        assert "cannot read it (no such file or directory)" in proc.stderr
        assert proc.stdout == ""
        assert not marker.exists(), "vLLM was started"
        assert not (tmp_path / "logs").exists(), "the log folder was made"
