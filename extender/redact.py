"""Credentials kept out of every text the extender writes.

A load source's URL may carry a password (``http://user:pass@host``) or a token in its
query string, and an error about the source tends to quote the URL: aiohttp's own
exceptions do (``ClientResponseError`` prints the request's URL). Those texts end up in
``/readyz`` (plain HTTP, readable by anyone on the node), the journal and systemd's
``STATUS=`` line, which ``systemctl status`` shows to every user. So every such text
passes through :func:`redact` before it is stored: ``SourceError`` does it on creation,
the refresher for an unexpected exception, the systemd status line once more.

What is hidden: the user-info part of any ``scheme://`` URL in the text (user name
too: it says whose password to guess), the value of every query parameter of such a
URL (which one holds a token cannot be known), the fragment, and any literal secret
the caller names (a token or password read from a file). A leaked secret cannot be
taken back; a message with a few characters too many masked costs nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

__all__ = ["MASK", "has_credentials", "redact", "redact_url"]

MASK = "***"

# A scheme (RFC 3986: a letter, then letters, digits, + - .) and everything up to
# white space or a quote: how a URL ends inside a message, a repr() or a JSON string.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>`]+")


def redact_url(url: str) -> str:
    """``url`` without user info, query values or fragment: ``http://***@host/p?q=***``."""
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unbalanced "[" in the host: shown not at all
        return "<URL not shown: not parseable>"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rpartition('@')[2]}"
    query = "&".join(
        f"{key}={MASK}" if sep else MASK
        for key, sep, _value in (pair.partition("=") for pair in parts.query.split("&") if pair)
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def has_credentials(url: str) -> bool:
    """True when ``url`` carries user info (``user@`` or ``user:password@``)."""
    try:
        return "@" in urlsplit(url).netloc
    except ValueError:
        return False


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every URL in it passed through :func:`redact_url` and every
    non-empty string of ``secrets`` replaced by ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, MASK)
    if "://" not in text:
        return text  # the usual case: no URL to look at
    return _URL.sub(_redacted, text)


def _redacted(match: re.Match[str]) -> str:
    # punctuation that ends a sentence or a bracket after the URL is the message's
    url = match.group(0)
    stripped = url.rstrip(".,;:)]}")
    return redact_url(stripped) + url[len(stripped) :]
