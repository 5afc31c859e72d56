"""Credentials for an HTTP load source, read from files (``source.bearer_token_file``,
``source.basic_auth.password_file``).

Files, not config values: the config file and the command line are readable by other
users (``/proc/PID/cmdline``), a file can be made readable by the service's account
alone (the Ansible role writes it 0600), and a file can be rotated while the extender
runs. A file is stat()ed before each request and read again when its device, inode,
size or modification time changed: a rotated token is used from the next request on,
without a restart and without first failing one. Waiting for a 401 instead would cost
a failed reading each rotation, and not every server answers a stale token with 401
(some answer 403). A stat() every ``refresh_seconds`` (15 s) costs nothing.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

from ..exceptions import SourceError

__all__ = ["MAX_SECRET_BYTES", "Credentials", "SecretFile"]

# A token or password is a line of text; a file much larger than a JWT (a few KiB) is
# not one, and reading a big one into every request header would be wrong anyway.
MAX_SECRET_BYTES = 64 * 1024


def _basic(username: str, password: str) -> str:
    """RFC 7617's header value, the pair encoded as UTF-8 (its ``charset`` parameter)."""
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode("ascii")


class SecretFile:
    """One secret kept in a file, as its first line without surrounding white space."""

    def __init__(self, path: str | os.PathLike[str], key: str) -> None:
        self.path = Path(path)
        self.key = key  # the setting that names the file, for messages
        self._stamp: tuple[int, int, int, int] | None = None
        self._value = ""

    @property
    def value(self) -> str:
        """The secret as last read ("" before the first read)."""
        return self._value

    def read(self) -> str:
        """The secret, read again if the file changed; SourceError naming the setting
        and the file (never the content) when it is missing, unreadable or unusable."""
        try:
            stat = self.path.stat()
        except OSError as exc:
            raise SourceError(f"{self.key} {self.path}: {exc.strerror}") from None
        stamp = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
        if stamp == self._stamp:
            return self._value
        if stat.st_size > MAX_SECRET_BYTES:
            raise SourceError(
                f"{self.key} {self.path}: {stat.st_size} bytes, more than a secret "
                f"({MAX_SECRET_BYTES} at most)"
            )
        try:
            raw = self.path.read_bytes()[:MAX_SECRET_BYTES]
        except OSError as exc:
            raise SourceError(f"{self.key} {self.path}: {exc.strerror}") from None
        try:
            text = raw.decode().strip()
        except UnicodeDecodeError:
            raise SourceError(f"{self.key} {self.path}: not UTF-8 text") from None
        if not text:
            raise SourceError(f"{self.key} {self.path}: empty")
        if not text.isprintable():
            # a second line or a control character would end the HTTP header early
            raise SourceError(
                f"{self.key} {self.path}: holds a line break or a control character; "
                "put the secret alone on one line",
                secrets=(text,),
            )
        self._value, self._stamp = text, stamp
        return text


class Credentials:
    """The ``Authorization`` header for a source: a bearer token, basic authentication
    (user name from the config, password from a file), or nothing."""

    def __init__(
        self,
        *,
        bearer_token_file: str | None = None,
        username: str | None = None,
        password_file: str | None = None,
    ) -> None:
        self._token = (
            SecretFile(bearer_token_file, "source.bearer_token_file") if bearer_token_file else None
        )
        self._username = username or ""
        self._password = (
            SecretFile(password_file, "source.basic_auth.password_file") if password_file else None
        )

    def header(self) -> str | None:
        """The header's value (files re-read if they changed), or None without credentials."""
        if self._token is not None:
            return f"Bearer {self._token.read()}"
        if self._password is not None:
            return _basic(self._username, self._password.read())
        return None

    def secrets(self) -> tuple[str, ...]:
        """What must never be written anywhere: the secrets as last read, and the
        header values they make (a base64 password is as good as the password)."""
        out: list[str] = []
        if self._token is not None and self._token.value:
            out.append(self._token.value)
        if self._password is not None and self._password.value:
            out.append(self._password.value)
            encoded = _basic(self._username, self._password.value)
            out += [encoded, encoded.partition(" ")[2]]
        return tuple(out)
