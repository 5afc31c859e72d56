"""When the extender's certificates expire, read from the files it serves with.

The serving certificate's end of validity is read from its DER encoding: X.509 puts it
at a fixed place (RFC 5280 section 4.1: Certificate -> tbsCertificate -> validity ->
notAfter, after the version, serial number, signature algorithm and issuer), so a walk
over five DER headers finds it. The standard library offers no public parser for a
certificate that is not a CA (``SSLContext.get_ca_certs`` lists only CAs, and
``ssl._ssl._test_decode_cert`` is private), and the ``cryptography`` package is not among
the extender's dependencies. The client CA's is read with ``SSLContext.get_ca_certs``.
"""

from __future__ import annotations

import base64
import binascii
import calendar
import re
import ssl
import time

from .exceptions import ConfigError

__all__ = ["ca_not_after", "der_not_after", "not_after"]

_PEM = re.compile(rb"-----BEGIN CERTIFICATE-----\s*(.*?)\s*-----END CERTIFICATE-----", re.S)
_SEQUENCE, _UTC_TIME, _GENERALIZED_TIME, _VERSION = 0x30, 0x17, 0x18, 0xA0


def _element(der: bytes, at: int) -> tuple[int, int, int]:
    """(tag, start of content, end of content) of the DER element at ``at``."""
    if at + 2 > len(der):
        raise ValueError("truncated DER")
    tag, length = der[at], der[at + 1]
    at += 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4 or at + count > len(der):
            raise ValueError("unsupported DER length")
        length = int.from_bytes(der[at : at + count], "big")
        at += count
    if at + length > len(der):
        raise ValueError("truncated DER")
    return tag, at, at + length


def _time(tag: int, text: bytes) -> float:
    value = text.decode("ascii")
    if tag == _UTC_TIME:  # YYMMDDHHMMSSZ; RFC 5280 4.1.2.5.1: YY < 50 is 20YY
        year = int(value[:2])
        value = f"{2000 + year if year < 50 else 1900 + year}{value[2:]}"
    if not re.fullmatch(r"\d{14}Z", value):
        raise ValueError(f"unsupported time {value!r}")
    return float(calendar.timegm(time.strptime(value, "%Y%m%d%H%M%SZ")))


def der_not_after(der: bytes) -> float:
    """The notAfter of a DER certificate, in seconds since the epoch; ValueError if the
    bytes are not one."""
    tag, at, _ = _element(der, 0)  # Certificate
    if tag != _SEQUENCE:
        raise ValueError("not a certificate")
    tag, at, end = _element(der, at)  # tbsCertificate
    if tag != _SEQUENCE:
        raise ValueError("not a certificate")
    tag, start, stop = _element(der, at)
    if tag == _VERSION:
        tag, start, stop = _element(der, stop)
    for _ in range(3):  # serialNumber, signature, issuer: skipped
        tag, start, stop = _element(der, stop)
    if tag != _SEQUENCE:  # validity
        raise ValueError("not a certificate")
    tag, start, stop = _element(der, start)  # notBefore
    tag, start, stop = _element(der, stop)  # notAfter
    if stop > end or tag not in (_UTC_TIME, _GENERALIZED_TIME):
        raise ValueError("not a certificate")
    return _time(tag, der[start:stop])


def not_after(path: str) -> float:
    """The notAfter of the first certificate in the PEM file ``path`` (the leaf of a
    chain), seconds since the epoch; ConfigError naming the file if it has none."""
    try:
        with open(path, "rb") as f:
            found = _PEM.search(f.read())
        if found is None:
            raise ValueError("no PEM certificate")
        return der_not_after(base64.b64decode(found.group(1)))
    except (OSError, ValueError, binascii.Error) as exc:
        raise ConfigError(f"tls: cannot read the certificate in {path}: {exc}") from None


def ca_not_after(ctx: ssl.SSLContext) -> float | None:
    """The earliest notAfter of the CAs ``ctx`` verifies clients with (None: none)."""
    ends = [
        ssl.cert_time_to_seconds(str(cert["notAfter"]))
        for cert in ctx.get_ca_certs()
        if "notAfter" in cert
    ]
    return float(min(ends)) if ends else None
