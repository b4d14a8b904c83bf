"""Where the `remote` locus may send its auth token: the scheme rules for a swerex-remote host.

Pure. `remote_base_url` turns the configured `batch.remote.host` into the base URL pairbot talks
to, or refuses with a message that says what to change (docs/runtime.md):

    bare loopback host (localhost, 127.x.x.x, ::1)   → http://
    bare non-local host                              → https://
    explicit https://                                → honoured
    explicit http:// to a non-local host             → refused, unless `insecure: true`

The token travels in the `X-API-Key` header of every request, so plain http is only acceptable
where nothing but this machine can see the traffic, or where the operator says so explicitly.
The host is a host name or address only: the port has its own setting, and a path would be
glued in front of the port by swerex's client (`f"{host}:{port}"`), so both are refused.
"""

from __future__ import annotations

import ipaddress

__all__ = ["RemoteUrlError", "is_loopback_host", "remote_base_url"]


class RemoteUrlError(ValueError):
    """The configured remote host cannot be used; the message names the fix."""


def is_loopback_host(host: str) -> bool:
    """True for `localhost` and loopback addresses (127.0.0.0/8, ::1), brackets allowed."""
    name = host.strip().lower().removeprefix("[").removesuffix("]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _split_scheme(host: str) -> tuple[str | None, str]:
    scheme, sep, rest = host.partition("://")
    if not sep:
        return None, host
    return scheme.lower(), rest


def _url_host(name: str) -> str:
    # An IPv6 literal needs brackets inside a URL; `::1:8000` would be ambiguous.
    bare = name.removeprefix("[").removesuffix("]")
    try:
        address = ipaddress.ip_address(bare)
    except ValueError:
        return name
    return f"[{address}]" if address.version == 6 else str(address)


def remote_base_url(host: str, *, insecure: bool) -> str:
    """The base URL (scheme and host, no port) for `host`, or `RemoteUrlError` saying why not."""
    scheme, name = _split_scheme(host.strip())
    if scheme not in (None, "http", "https"):
        raise RemoteUrlError(
            f"remote locus: host {host!r} has scheme {scheme!r}; use a bare host name, "
            "https://<host> or (loopback only) http://<host>"
        )
    if not name or "/" in name or "?" in name or "#" in name or "@" in name:
        raise RemoteUrlError(
            f"remote locus: host {host!r} must be a host name or address only "
            "(no path, query or user part); put the port in `remote.port`"
        )
    bare = name.removeprefix("[").removesuffix("]")
    try:
        ipaddress.ip_address(bare)
    except ValueError:
        if ":" in name:  # not an IPv6 literal, so it is `host:port`
            raise RemoteUrlError(
                f"remote locus: host {host!r} includes a port; put the port in `remote.port`"
            ) from None
    loopback = is_loopback_host(name)
    if scheme is None:
        scheme = "http" if loopback else "https"
    elif scheme == "http" and not loopback and not insecure:
        raise RemoteUrlError(
            f"remote locus: refusing plain http:// to the non-local host {name!r}: the auth "
            "token would cross the network unencrypted. Use https:// (put swerex-remote behind "
            "a TLS proxy), or set `insecure: true` under `remote:` if this network is trusted."
        )
    return f"{scheme}://{_url_host(name)}"
