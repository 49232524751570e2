"""The one check of every http(s) URL that enters: Prometheus and the Pushgateway, from flags, the
environment and config files.

A URL is checked where it enters, so a typo fails before any work with a line that names where the
URL came from, instead of ending a run in urllib's `ValueError: unknown url type`.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from fleetbench.errors import UserError

ACCEPTED = "http(s)://HOST[:PORT][/PATH] with a port in 1-65535"


def url_problem(url: object) -> str | None:
    """What is wrong with `url` as the base URL of an HTTP service, or None when nothing is."""
    if not isinstance(url, str):
        return "is not text"
    if not url:
        return "is empty"
    if any(c.isspace() or not c.isprintable() for c in url):
        return "must not carry spaces or control characters"
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"}:
        return "is not an http(s) URL" + (f" (scheme {parts.scheme!r})" if parts.scheme else " (no scheme)")
    try:
        port = parts.port
    except ValueError:
        return "has an invalid port"
    if not parts.hostname:
        return "is not an http(s) URL (no host)"
    if port == 0:
        return "has port 0"
    if "@" in parts.netloc:
        return "carries user:password@, which urllib does not send"
    if parts.query or parts.fragment:
        return "must not carry a query or fragment"
    return None


def check_url(url: str, example: str = "http://127.0.0.1:9091") -> str:
    """`url` without trailing slashes when it is an http(s) base URL; else ValueError: what is wrong, and
    what is accepted."""
    problem = url_problem(url)
    if problem is not None:
        raise ValueError(f"{problem}; expected {ACCEPTED}, e.g. {example}")
    return url.rstrip("/")


def url_from(url: str, source: str, example: str) -> str:
    """`check_url`, failing with a UserError that names where the URL came from (a flag, `$VARIABLE`)."""
    try:
        return check_url(url, example)
    except ValueError as exc:
        shown = url if len(url) <= 120 else f"{url[:117]}..."
        raise UserError(f"{source} {shown!r} is not accepted: {exc}") from None
