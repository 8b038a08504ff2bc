"""Basic auth of `--web-config` (`basic_auth_users`, read by `webconfig.py`): `Authorization: Basic`
header values checked against bcrypt hashes, as exporter-toolkit does.

Example::

    auth = BasicAuth(web.basic_auth_users)
    auth.check(b"Basic YWxpY2U6c2VjcmV0")                   # True for alice's password
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import threading
from collections.abc import Mapping

__all__ = ["MAX_PENDING_CHECKS", "BasicAuth"]

MAX_PENDING_CHECKS = 4
"""bcrypt checks running or waiting at once; a request past them is refused at once (401), so a
flood of wrong passwords can neither queue a good one for long nor grow a queue."""


class BasicAuth:
    """Checks `Authorization: Basic ...` header values against bcrypt hashes, as exporter-toolkit does.

    bcrypt is slow on purpose (about 70 ms at cost 10), so a user's last good password is remembered,
    as an HMAC with a key of this process (not the password itself): a scrape every 10 s costs one bcrypt,
    not one each, and `cached` answers it without bcrypt (the server asks it on the event loop). An
    unknown user costs a bcrypt check too (on a hash of the same cost, made here, at start), so user
    names cannot be told from the time an answer takes; comparisons are constant-time; one bcrypt runs
    at a time, so a flood of wrong passwords takes at most one core; and at most `MAX_PENDING_CHECKS`
    checks run or wait (`admit`, `release`): past them a request is refused without a check, so a good
    password never waits behind more than that many.
    """

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
        found = _credentials(authorization)
        if found is None:
            return False
        user, password = found
        mac = self._mac(user, password)
        known = self._good.get(user)
        if known is not None and hmac.compare_digest(known, mac):
            return True
        hashed = self._users.get(user)
        with self._lock:
            ok = self._checkpw(password, self._unknown if hashed is None else hashed)
        if ok and hashed is not None:
            self._good[user] = mac
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
