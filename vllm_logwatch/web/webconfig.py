"""`--web-config FILE`: TLS and basic auth, read from a web configuration file in the format of
Prometheus' own exporters (exporter-toolkit's `docs/web-configuration.md`), so an operator reuses the
file node_exporter already has.

The subset logwatch implements, with exporter-toolkit's meaning and defaults, and what it refuses:
docs/watch.md ("TLS and basic auth"). Anything else is a one-line `UsageError`, never ignored.

Example::

    web = load_web_config("/etc/vllm-logwatch/web.yml")   # UsageError with the reason if bad
    web.basic_auth_users                                  # checked by `BasicAuth`
"""

from __future__ import annotations

import base64
import binascii
import errno
import functools
import hashlib
import hmac
import os
import re
import secrets
import ssl
import stat
import threading
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from ..errors import UsageError

MAX_BCRYPT_COST = 12
"""The highest bcrypt cost accepted (each step doubles a check's time: 10 is 70-110 ms, 12 0.25-0.45 s)."""

_TLS_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
_UNVERIFIED_CLIENT_AUTH = ("RequestClientCert", "RequireAnyClientCert", "RequireClientCert")
_HEADERS: dict[str, tuple[str, ...]] = {  # exporter-toolkit's list; an empty tuple allows any value
    "Content-Security-Policy": (),
    "Strict-Transport-Security": (),
    "X-Content-Type-Options": ("nosniff",),
    "X-Frame-Options": ("deny", "sameorigin"),
    "X-XSS-Protection": (),
}
_HEADER_VALUE = re.compile(r"[\x20-\x7e]*")  # printable ASCII: no CR/LF can split a response
_BCRYPT = re.compile(r"\$2[abxy]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}")
_NOT_SUPPORTED = {
    "": ("rate_limit",),
    "tls_server_config": ("cert", "key", "client_ca", "client_allowed_sans", "max_version", "cipher_suites",
                          "curve_preferences", "prefer_server_cipher_suites"),
}


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class TLSServerConfig(_Strict):
    """`tls_server_config`: the server certificate, client certificates, the lowest TLS version."""

    cert_file: str = ""
    key_file: str = ""
    client_auth_type: str = "NoClientCert"
    client_ca_file: str = ""
    min_version: str = "TLS12"

    @field_validator("client_auth_type")
    @classmethod
    def _client_auth(cls, value: str) -> str:
        if value in _UNVERIFIED_CLIENT_AUTH:
            raise ValueError(f"{value} (a client certificate accepted unverified) is not supported: use "
                             "VerifyClientCertIfGiven or RequireAndVerifyClientCert with client_ca_file")
        if value not in _CLIENT_AUTH:
            raise ValueError(f"{value!r} is not one of {', '.join(_CLIENT_AUTH)}")
        return value

    @field_validator("min_version")
    @classmethod
    def _min_version(cls, value: str) -> str:
        if value not in _TLS_VERSIONS:
            raise ValueError(f"{value!r} is not one of {', '.join(_TLS_VERSIONS)}")
        return value

    @property
    def cert_reqs(self) -> ssl.VerifyMode:
        """`ssl.CERT_NONE`, `CERT_OPTIONAL` or `CERT_REQUIRED`, from `client_auth_type`."""
        return _CLIENT_AUTH[self.client_auth_type]

    @property
    def minimum_version(self) -> ssl.TLSVersion:
        return _TLS_VERSIONS[self.min_version]

    def ssl_context(self) -> ssl.SSLContext:
        """A server context from these settings; `UsageError` when a file cannot be read or used.
        (uvicorn builds its own from the same files; this one proves at start that it can.)"""
        for what, path in (("cert_file", self.cert_file), ("key_file", self.key_file),
                           ("client_ca_file", self.client_ca_file)):
            try:
                if path:
                    _read_regular(path, 1)
            except OSError as exc:
                reason = _reason(exc)
                raise UsageError(f"tls_server_config: {what} {path}: cannot read it ({reason})") from None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = self.minimum_version
        try:
            # A key behind a passphrase fails here instead of prompting on the terminal.
            context.load_cert_chain(self.cert_file, self.key_file, password=lambda: b"")
        except (ssl.SSLError, OSError) as exc:
            raise UsageError(f"tls_server_config: cert_file {self.cert_file} and key_file {self.key_file} "
                             f"are not a PEM certificate and its unencrypted key ({_reason(exc)})") from None
        context.verify_mode = self.cert_reqs
        if self.client_ca_file:
            try:
                context.load_verify_locations(cafile=self.client_ca_file)
            except (ssl.SSLError, OSError) as exc:
                raise UsageError(f"tls_server_config: client_ca_file {self.client_ca_file} holds no PEM "
                                 f"certificate ({_reason(exc)})") from None
        return context


class HTTPServerConfig(_Strict):
    """`http_server_config`: headers added to every response."""

    http2: bool = False
    headers: dict[str, str] = {}

    @field_validator("http2")
    @classmethod
    def _http2(cls, value: bool) -> bool:
        if value:
            raise ValueError("HTTP/2 is not served (HTTP/1.1 only): remove http2 or set it to false")
        return value

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            allowed = _HEADERS.get(name)
            if allowed is None:
                raise ValueError(f"header {name!r} cannot be configured (only {', '.join(_HEADERS)})")
            if allowed and text not in allowed:
                raise ValueError(f"{name}: {text!r} is not one of {', '.join(allowed)}")
            if _HEADER_VALUE.fullmatch(text) is None:
                raise ValueError(f"{name}: the value must be printable ASCII on one line")
        return {name: text for name, text in value.items() if text}  # blank: not set


class WebConfig(_Strict):
    """The whole file. `tls_server_config` is None when the file has no TLS settings."""

    tls_server_config: TLSServerConfig | None = None
    http_server_config: HTTPServerConfig = HTTPServerConfig()
    basic_auth_users: dict[str, str] = {}

    @field_validator("basic_auth_users")
    @classmethod
    def _users(cls, value: dict[str, str]) -> dict[str, str]:
        for user, hashed in value.items():
            if _BCRYPT.fullmatch(hashed) is None:
                raise ValueError(f"user {user!r}: not a bcrypt hash ($2y$10$ and 53 more characters, as "
                                 "htpasswd -nBC 10 makes)")
            if int(hashed[4:6]) > MAX_BCRYPT_COST:
                raise ValueError(f"user {user!r}: bcrypt cost {int(hashed[4:6])} is above "
                                 f"{MAX_BCRYPT_COST} (each check would take seconds): hash it again "
                                 f"with htpasswd -nBC {MAX_BCRYPT_COST} or less")
        return value

    @property
    def tls(self) -> TLSServerConfig | None:
        return self.tls_server_config

    @property
    def headers(self) -> dict[str, str]:
        return self.http_server_config.headers

    @property
    def scheme(self) -> str:
        return "http" if self.tls_server_config is None else "https"

    def describe(self) -> str:
        """What it turns on, in one line for the start-up log."""
        tls = self.tls_server_config
        users = len(self.basic_auth_users)
        return ", ".join((
            f"TLS (from {tls.min_version}, client certificates: {tls.client_auth_type})" if tls else "no TLS",
            f"basic auth for {users} user(s)" if users else "no basic auth",
            f"{len(self.headers)} response header(s)"))


def load_web_config(path: str) -> WebConfig:
    """Read and check the web configuration file at `path`: YAML, only supported keys, bcrypt hashes,
    readable and usable certificate files. `UsageError` with a one-line reason otherwise (the reason
    does not repeat `path`: the caller names the option or variable it came from)."""
    import yaml

    try:
        raw = _read_regular(path, 1 << 20)
    except OSError as exc:
        raise UsageError(f"cannot read it ({_reason(exc)})") from None
    try:
        data = yaml.load(raw, Loader=_unique_key_loader())  # a SafeLoader: no object is built
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise UsageError(f"not YAML{where}: {problem}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UsageError("not a YAML mapping of tls_server_config, basic_auth_users, http_server_config")
    try:
        config = WebConfig.model_validate(data)
    except ValidationError as exc:
        raise UsageError(_first_error(exc)) from None
    tls = config.tls_server_config
    if tls is not None and tls.model_fields_set:
        tls = _resolved(tls, os.path.dirname(os.path.abspath(path)))
        if not tls.cert_file or not tls.key_file:
            raise UsageError("tls_server_config: needs both cert_file and key_file")
        if tls.cert_reqs != ssl.CERT_NONE and not tls.client_ca_file:
            raise UsageError(f"tls_server_config: client_auth_type {tls.client_auth_type} needs "
                             "client_ca_file (the CA that signs the client certificates)")
        if tls.cert_reqs == ssl.CERT_NONE and tls.client_ca_file:
            raise UsageError("tls_server_config: client_ca_file is set but client_auth_type is NoClientCert")
        tls.ssl_context()
        config = config.model_copy(update={"tls_server_config": tls})
    else:
        config = config.model_copy(update={"tls_server_config": None})
    return config


def _resolved(tls: TLSServerConfig, folder: str) -> TLSServerConfig:
    """File paths relative to the configuration file's folder, as exporter-toolkit reads them."""
    update = {key: os.path.join(folder, value) for key in ("cert_file", "key_file", "client_ca_file")
              if (value := getattr(tls, key)) and not os.path.isabs(value)}
    return tls.model_copy(update=update)


def _read_regular(path: str, limit: int) -> bytes:
    """Up to `limit` bytes of the regular file at `path`; `OSError` for anything else. Opened without
    blocking, so a named pipe or a device is refused instead of hanging the start."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as file:
            return file.read(limit)
    finally:
        os.close(fd)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError):
        return str(exc.reason or exc).lower().replace("_", " ")
    if isinstance(exc, OSError) and exc.strerror:
        if exc.errno is None or exc.strerror == "not a regular file":
            return exc.strerror.lower()
        return os.strerror(exc.errno).lower()
    return str(exc) or type(exc).__name__


def _first_error(exc: ValidationError) -> str:
    """One line for pydantic's first complaint: where in the file, and what."""
    error = exc.errors(include_url=False)[0]
    loc = [str(part) for part in error["loc"]]
    where = ".".join(loc)
    if error["type"] == "extra_forbidden":
        section, key = ".".join(loc[:-1]), loc[-1]
        if key in _NOT_SUPPORTED.get(section, ()):
            return f"{where}: an exporter-toolkit setting logwatch does not support"
        known: dict[str, type[BaseModel]] = {
            "": WebConfig, "tls_server_config": TLSServerConfig, "http_server_config": HTTPServerConfig}
        model = known.get(section)
        keys = f" (known: {', '.join(model.model_fields)})" if model is not None else ""
        return f"{where}: unknown key{keys}"
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


@functools.cache
def _unique_key_loader() -> Any:
    """A yaml.SafeLoader that refuses a key given twice (exporter-toolkit reads YAML strictly; PyYAML
    would keep the last one silently)."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} given twice", key_node.start_mark)
            seen.add(key)
        return loader.construct_mapping(node, deep=deep)

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    return Loader


MAX_PENDING_CHECKS = 4
"""bcrypt checks running or waiting at once; a request past them is refused at once (401), so a
flood of wrong passwords can neither queue a good one for long nor grow a queue."""


class BasicAuth:
    """Checks `Authorization: Basic ...` header values against bcrypt hashes, as exporter-toolkit does
    (what it costs and guarantees: docs/watch.md). A good password is remembered as an HMAC with a key
    of this process, never itself; an unknown user is checked against a dummy hash of the same cost, so
    user names cannot be told from the time an answer takes."""

    def __init__(self, users: Mapping[str, str]) -> None:
        import bcrypt

        self._bcrypt = bcrypt
        self._users = {user.encode(): hashed.encode() for user, hashed in users.items()}
        cost = max((int(hashed[4:6]) for hashed in self._users.values()), default=10)
        self._unknown = bcrypt.hashpw(secrets.token_bytes(16), bcrypt.gensalt(cost))
        self._key = secrets.token_bytes(32)
        self._good: dict[bytes, bytes] = {}
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(MAX_PENDING_CHECKS)

    def admit(self) -> bool:
        """Take one of the `MAX_PENDING_CHECKS` places for a bcrypt check; False (at once) when none
        is free. Give it back with `release`."""
        return self._slots.acquire(blocking=False)

    def release(self) -> None:
        self._slots.release()

    def cached(self, authorization: bytes | None) -> bool:
        """True when these credentials were checked good before (no bcrypt: cheap)."""
        found = _credentials(authorization)
        if found is None:
            return False
        user, password = found
        known = self._good.get(user)
        return known is not None and hmac.compare_digest(known, self._mac(user, password))

    def check(self, authorization: bytes | None) -> bool:
        """True when the header names a configured user with the right password."""
        if self.cached(authorization):
            return True
        found = _credentials(authorization)
        if found is None:
            return False
        user, password = found
        hashed = self._users.get(user)
        with self._lock:
            ok = self._checkpw(password, self._unknown if hashed is None else hashed)
        if ok and hashed is not None:
            self._good[user] = self._mac(user, password)
            return True
        return False

    def _checkpw(self, password: bytes, hashed: bytes) -> bool:
        if len(password) > 72:  # bcrypt reads 72 bytes; refuse, but spend the same time
            self._bcrypt.checkpw(password[:72], self._unknown)
            return False
        try:
            return bool(self._bcrypt.checkpw(password, hashed))
        except ValueError:
            return False

    def _mac(self, user: bytes, password: bytes) -> bytes:
        return hmac.new(self._key, len(user).to_bytes(4, "big") + user + password, hashlib.sha256).digest()


def _credentials(authorization: bytes | None) -> tuple[bytes, bytes] | None:
    """(user, password) from a `Basic` header value, or None."""
    if not authorization:
        return None
    scheme, _, param = authorization.strip().partition(b" ")
    if scheme.lower() != b"basic":
        return None
    try:
        decoded = base64.b64decode(param.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, sep, password = decoded.partition(b":")
    return (user, password) if sep else None
