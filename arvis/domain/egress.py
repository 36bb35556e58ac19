"""Egress: which host a URL reaches, and whether a tenant's ``egress_hosts`` allow it.

The built-in egress gate (:mod:`arvis.lifecycle.policy.policy`) and the webhook deliverer
(:mod:`arvis.lifecycle.consent.notify`) compare hosts the same way, through these functions:
hosts and patterns are normalised once, and a URL that parsers could read two ways
reaches no host at all.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from urllib.parse import urlsplit

# A last label that is a number makes WHATWG clients read the host as IPv4
# (``127.1``, ``0x7f.1``, ``2130706433``): refused rather than guessed.
_NUMERIC_LABEL = re.compile(r"^(?:[0-9]+|0x[0-9a-f]*)$")
_DNS_LABEL = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$")
_UNSAFE_URL_CHARS = re.compile(r"[\s\x00-\x1f\x7f\\]")


def egress_host(url: str) -> str | None:
    """The normalised host ``url`` reaches, or None when it cannot be read unambiguously.

    Refused (None): no authority, userinfo (``http://api.example.com@evil.test/``
    reaches evil.test, and parsers disagree on what ``\\`` or a second ``@``
    means, so ARVIS takes no side), whitespace, control characters or a
    backslash anywhere, a malformed port. The port is not part of the host.
    """
    if _UNSAFE_URL_CHARS.search(url):
        return None
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- raises on a malformed port
    except ValueError:
        return None
    if not parts.netloc or "@" in parts.netloc or parts.hostname is None:
        return None
    return normalise_host(parts.hostname)


def normalise_host(host: str) -> str | None:
    """``host`` as egress rules compare it, or None when it is not a usable host.

    IP literals in their canonical text (``[::FFFF:1]`` → ``::ffff:1``); DNS names
    lowercased, one trailing dot dropped, internationalised names as their
    ASCII (``xn--``) form. A non-ASCII name whose encoding differs between
    IDNA 2003 and 2008 (``faß.de`` is ``fass.de`` to one and ``xn--fa-hia.de``
    to the other), or that is not in its canonical Unicode form, is refused:
    the two would be checked as one host and reached as another.
    """
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return str(ipaddress.ip_address(bare))
    except ValueError:
        pass
    name = bare.lower()
    if name.endswith("."):
        name = name[:-1]
    if not name.isascii():
        try:
            encoded = name.encode("idna").decode("ascii")
            if encoded.encode("ascii").decode("idna") != name:
                return None
        except UnicodeError:
            return None
        name = encoded
    labels = name.split(".")
    if len(name) > 253 or not all(_DNS_LABEL.match(label) for label in labels):
        return None
    if _NUMERIC_LABEL.match(labels[-1]):
        return None
    return name


def normalise_pattern(pattern: str) -> str | None:
    """An ``egress_hosts`` pattern as :func:`host_allowed` compares it, or None when it
    is not a host, an IP address, ``*.domain`` or ``*``."""
    if pattern == "*":
        return pattern
    if pattern.startswith("*."):
        suffix = normalise_host(pattern[2:])
        if suffix is None or _is_ip(suffix):
            return None
        return "*." + suffix
    return normalise_host(pattern)


def normalised_patterns(patterns: Sequence[str]) -> frozenset[str]:
    """Egress patterns as :func:`host_allowed` compares them (invalid ones dropped)."""
    normalised = (normalise_pattern(pattern) for pattern in patterns)
    return frozenset(pattern for pattern in normalised if pattern is not None)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def host_allowed(host: str, patterns: frozenset[str]) -> bool:
    """Whether normalised ``host`` matches one of the normalised ``patterns``.

    Exact match, ``*`` for any host, and ``*.example.org`` for strict subdomains
    of example.org (not example.org itself, never an IP address).
    """
    if "*" in patterns or host in patterns:
        return True
    if _is_ip(host):
        return False
    labels = host.split(".")
    return any("*." + ".".join(labels[i:]) in patterns for i in range(1, len(labels)))
