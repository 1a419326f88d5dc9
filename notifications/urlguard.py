"""Server-side request forgery guard: where a webhook may point.

Only ``http``/``https`` URLs whose host resolves, every address of it, to a public address; never
loopback, link-local (cloud metadata lives there), private, shared (100.64/10), multicast,
reserved or unspecified — unless ``SPECPORTAL_WEBHOOKS_ALLOW_PRIVATE`` is on (tests, a lab). The
check runs at registration and again before every attempt (a name can be re-pointed), and
deliveries never follow redirects (a public URL could redirect inward).
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit


class RefusedURL(ValueError):
    pass


def _refused(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    for name in ("is_loopback", "is_link_local", "is_private", "is_multicast", "is_reserved",
                 "is_unspecified"):  # fmt: skip
        if getattr(address, name):
            return name.removeprefix("is_").replace("_", "-")
    if isinstance(address, ipaddress.IPv4Address) and address in ipaddress.ip_network(
        "100.64.0.0/10"
    ):
        return "shared"
    return None


def check_url(url: str, *, allow_private: bool) -> None:
    """Raise ``RefusedURL`` with the reason when a delivery must not go to ``url``."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise RefusedURL("only http and https URLs")
    if not parts.hostname:
        raise RefusedURL("the URL has no host")
    if parts.username or parts.password:
        raise RefusedURL("credentials in the URL are not allowed (use the signature)")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        infos = socket.getaddrinfo(parts.hostname, port, proto=socket.IPPROTO_TCP)
    except (OSError, ValueError) as exc:
        raise RefusedURL(f"the host does not resolve ({exc})") from None
    if allow_private:
        return
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        reason = _refused(address)
        if reason:
            raise RefusedURL(
                f"{parts.hostname} resolves to {address}, a {reason} address: webhooks go only "
                "to public addresses (SPECPORTAL_WEBHOOKS_ALLOW_PRIVATE allows others)"
            )
