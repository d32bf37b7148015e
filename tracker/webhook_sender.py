"""One webhook request over HTTP (docs/events.md#webhooks): the address guard, the Standard Webhooks
signature, and a POST made to the very address that was checked.

A receiver's host is resolved when the URL is saved and again at every send, and each address it
resolves to must be public (unless ``[webhooks] allow_private``). The connection is then made to
the address checked, with the ``Host`` header and TLS's server name and certificate check on the
host name: a DNS answer that changes between the check and the connection (rebinding) reaches
nothing. Redirects are not followed (a 3xx is a failure), and a request takes at most
:data:`TIMEOUT_SECONDS` from the connection to the first KB of the answer, however slowly the
receiver drips it. Nothing here touches the database.

An endpoint's batch of deliveries goes out in order on one :class:`Session` (:func:`post_in_order`):
each request is checked as above, but a connection the receiver keeps open (HTTP/1.1 keep-alive, an
answer read whole within its first KB) serves the next request to the same host and port if its
address is one of those that request's check allowed: every request still goes to an address
checked for it, and has its own time.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Final
from urllib.parse import urlsplit

from standardwebhooks import Webhook as Signer

TIMEOUT_SECONDS: Final = 10.0
RESPONSE_KEPT: Final = 1024  # bytes of an answer kept in its attempt's log
MAX_ERROR: Final = 300
USER_AGENT: Final = "Ballet-Webhooks/1"

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class AddressError(Exception):
    """The URL cannot be sent to: not http(s), no host, or a host that is refused."""


@dataclass(frozen=True)
class Endpoint:
    """Where a URL points: ``target`` is the path and query sent in the request line."""

    scheme: str
    host: str
    port: int
    target: str


@dataclass(frozen=True)
class Answer:
    """What one attempt got: the status code (None: no answer), how long it took, the first KB of
    the answer, and what went wrong (empty when the receiver answered 2xx)."""

    status_code: int | None
    duration_ms: int
    response: str = ""
    error: str = ""

    @property
    def delivered(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300 and not self.error


def endpoint_of(url: str) -> Endpoint:
    """The parts of ``url``; AddressError when it is no http(s) URL with a host."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise AddressError(f"This is not a valid URL: {exc}.") from exc
    if parts.scheme not in ("http", "https"):
        raise AddressError("The URL must start with http:// or https://.")
    if parts.username is not None or parts.password is not None:
        raise AddressError("Put no user name or password in the URL.")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise AddressError("The URL has no host.")
    try:
        host = host if host.isascii() else host.encode("idna").decode("ascii")  # its A-label (punycode)
    except UnicodeError as exc:
        raise AddressError("The URL's host is not a valid host name.") from exc
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    if any(ord(char) < 33 or ord(char) == 127 for char in target):
        raise AddressError("The URL's path holds spaces or control characters: encode them (%20).")
    return Endpoint(parts.scheme, host, port or (443 if parts.scheme == "https" else 80), target)


def address_refusal(address: IPAddress, *, allow_private: bool) -> str | None:
    """Why Ballet sends nothing to ``address``, or None. ``allow_private`` lets private, loopback and
    link-local addresses through; multicast, unspecified and reserved ones never are."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    checks = [
        (address.is_unspecified, "an unspecified address", False),
        (address.is_multicast, "a multicast address", False),
        (address.is_loopback, "a loopback address", True),
        (address.is_link_local, "a link-local address", True),
        (address.is_reserved, "a reserved address", False),
        (address.is_private or not address.is_global, "a private address", True),
    ]
    for applies, why, allowable in checks:
        if applies:
            return None if allowable and allow_private else why
    return None


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def addresses_checked(endpoint: Endpoint, *, allow_private: bool) -> list[IPAddress]:
    """The addresses ``endpoint``'s host resolves to, every one of them allowed; AddressError if
    any is refused or the host does not resolve."""
    literal = _literal(endpoint.host)
    if literal is not None:
        found = [literal]
    else:
        try:
            infos = socket.getaddrinfo(endpoint.host, endpoint.port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            raise AddressError(f"The host {endpoint.host} does not resolve.") from exc
        found = list(dict.fromkeys(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos))
    for address in found:
        refusal = address_refusal(address, allow_private=allow_private)
        if refusal is not None:
            shown = endpoint.host if literal is not None else f"{endpoint.host} ({address})"
            raise AddressError(f"{shown} is {refusal}: Ballet sends webhooks only to public addresses.")
    if not found:
        raise AddressError(f"The host {endpoint.host} does not resolve.")
    return found


def url_refusal(url: str, *, allow_private: bool) -> str | None:
    """Why ``url`` cannot be saved as a webhook's, or None. A host that does not resolve now is
    accepted (its DNS may come later); it is checked again at every send."""
    try:
        endpoint = endpoint_of(url)
        addresses_checked(endpoint, allow_private=allow_private)
    except AddressError as exc:
        if str(exc).endswith("does not resolve."):
            return None
        return str(exc)
    return None


def signed_headers(*, secret: str, msg_id: str, at: datetime, body: str) -> dict[str, str]:
    """The Standard Webhooks headers of ``body`` sent at ``at``."""
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": Signer(secret).sign(msg_id, at, body),
    }


class _PinnedHTTP(http.client.HTTPConnection):
    """An HTTP connection to ``address``, whatever the host name resolves to by now."""

    def __init__(self, host: str, port: int, *, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self.address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self.address, self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    """An HTTPS connection to ``address``; the certificate is checked against the host name."""

    def __init__(self, host: str, port: int, *, address: str, timeout: float) -> None:
        self.tls = ssl.create_default_context()
        super().__init__(host, port, timeout=timeout, context=self.tls)
        self.address = address

    def connect(self) -> None:
        sock = socket.create_connection((self.address, self.port), self.timeout)
        try:
            self.sock = self.tls.wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise


class _Deadline:
    """Ends a request that runs past its time: whatever it waits on fails at once, and whatever it
    read by then (a status line, half a header) counts for nothing."""

    def __init__(self, connection: http.client.HTTPConnection, seconds: float) -> None:
        self.connection = connection
        self.passed = False
        self._timer = threading.Timer(seconds, self._cut)
        self._timer.daemon = True
        self._timer.start()

    def _cut(self) -> None:
        self.passed = True
        sock = self.connection.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        self._timer.cancel()


Connection = _PinnedHTTP | _PinnedHTTPS
# What a connection kept since its last answer raises when the receiver closed it meanwhile.
_CLOSED_MEANWHILE: Final = (
    http.client.RemoteDisconnected,
    BrokenPipeError,
    ConnectionResetError,
    ConnectionAbortedError,
    ssl.SSLEOFError,
    ssl.SSLZeroReturnError,
)


@dataclass(frozen=True)
class _Exchanged:
    status: int
    text: str  # the first KB of the answer
    location: str
    reusable: bool  # the answer was read whole and the receiver keeps the connection open


def _exchange(
    connection: Connection, target: str, body: bytes, headers: dict[str, str], seconds: float
) -> _Exchanged:
    """One POST on ``connection`` (opened now if it is not yet), cut after ``seconds``."""
    deadline = _Deadline(connection, seconds)
    try:
        try:
            connection.timeout = seconds
            if connection.sock is None:
                connection.connect()
                if deadline.passed:  # the cut came while it connected, and could not stop it
                    raise TimeoutError
            else:  # kept from an earlier request, which had its own time
                connection.sock.settimeout(seconds)
            connection.request("POST", target, body=body, headers=headers)
            answer = connection.getresponse()
        except Exception as exc:
            if deadline.passed:  # the cut made it fail
                raise TimeoutError from exc
            raise
        if deadline.passed:  # what it read was cut short
            raise TimeoutError
        try:
            kept = answer.read(RESPONSE_KEPT)
        except (OSError, http.client.HTTPException):
            if not deadline.passed:
                raise
            kept = b""  # the status came in time; the answer's body did not
        location = answer.getheader("Location") or ""
    finally:
        deadline.cancel()
    reusable = answer.isclosed() and not answer.will_close and not deadline.passed
    return _Exchanged(answer.status, kept.decode("utf-8", "replace"), location, reusable)


def _origin(endpoint: Endpoint) -> tuple[str, str, int]:
    return endpoint.scheme, endpoint.host, endpoint.port


class Session:
    """Requests made one after the other, as an endpoint's batch of deliveries goes out. Each is
    checked as :func:`post`'s is (its host resolved and every address allowed, at every request),
    has its own ``timeout`` and follows no redirect; but the connection of an answer that allows
    it (HTTP/1.1 keep-alive, its body read whole within the first KB) is kept for the next request
    to the same scheme, host name and port, if its address is still one of those just checked. A
    kept connection the receiver closed meanwhile is replaced by a new one, within the request's
    time (a repeat is possible then; ``webhook-id`` lets the receiver drop it)."""

    def __init__(self, *, allow_private: bool, timeout: float = TIMEOUT_SECONDS) -> None:
        self.allow_private = allow_private
        self.timeout = timeout
        self._kept: tuple[Endpoint, IPAddress, Connection] | None = None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection kept, if any."""
        kept, self._kept = self._kept, None
        if kept is not None:
            kept[2].close()

    def post(self, url: str, *, body: bytes, headers: dict[str, str]) -> Answer:
        """POST ``body`` to ``url``: resolved and checked now, sent to an address checked, within
        the session's timeout, no redirect followed. Never raises."""
        started = time.monotonic()
        sent = {"Content-Type": "application/json", "User-Agent": USER_AGENT, **headers}
        try:
            endpoint = endpoint_of(url)
            addresses = addresses_checked(endpoint, allow_private=self.allow_private)
            done = self._sent(endpoint, addresses, body, sent, time.monotonic())
        except Exception as exc:  # every failure is the attempt's, logged for the owners
            self.close()
            elapsed = time.monotonic() - started
            return Answer(None, round(elapsed * 1000), "", _failure(exc, elapsed, self.timeout)[:MAX_ERROR])
        duration = round((time.monotonic() - started) * 1000)
        error = ""
        if 300 <= done.status < 400:
            where = done.location or "nowhere"
            error = f"A redirect ({done.status}) to {where}: redirects are not followed."[:MAX_ERROR]
        elif not 200 <= done.status < 300:
            error = f"The receiver answered {done.status}."
        return Answer(done.status, duration, done.text, error)

    def _sent(
        self,
        endpoint: Endpoint,
        addresses: list[IPAddress],
        body: bytes,
        headers: dict[str, str],
        started: float,
    ) -> _Exchanged:
        kept, self._kept = self._kept, None
        if kept is not None:
            if _origin(kept[0]) == _origin(endpoint) and kept[1] in addresses:
                try:
                    return self._keeping(
                        endpoint,
                        address=kept[1],
                        connection=kept[2],
                        body=body,
                        headers=headers,
                        started=started,
                    )
                except _CLOSED_MEANWHILE:
                    pass  # closed by the receiver since its last answer: a new connection
            kept[2].close()
        for index, address in enumerate(addresses):
            kind = _PinnedHTTPS if endpoint.scheme == "https" else _PinnedHTTP
            connection = kind(endpoint.host, endpoint.port, address=str(address), timeout=self.timeout)
            try:
                return self._keeping(
                    endpoint,
                    address=address,
                    connection=connection,
                    body=body,
                    headers=headers,
                    started=started,
                )
            except ConnectionRefusedError:
                if index == len(addresses) - 1:
                    raise
        raise AddressError(f"The host {endpoint.host} does not resolve.")  # no address: checked before

    def _keeping(
        self,
        endpoint: Endpoint,
        *,
        address: IPAddress,
        connection: Connection,
        body: bytes,
        headers: dict[str, str],
        started: float,
    ) -> _Exchanged:
        """The exchange on ``connection``, kept afterwards if it may be; closed if not."""
        left = self.timeout - (time.monotonic() - started)
        try:
            if left <= 0:
                raise TimeoutError
            done = _exchange(connection, endpoint.target, body, headers, left)
        except BaseException:
            connection.close()
            raise
        if done.reusable:
            self._kept = (endpoint, address, connection)
        else:
            connection.close()
        return done


def _failure(exc: BaseException, elapsed: float, timeout: float) -> str:
    if isinstance(exc, AddressError):
        return str(exc)
    if isinstance(exc, TimeoutError) or elapsed >= timeout:
        return f"No answer within {timeout:g} s."
    if isinstance(exc, ssl.SSLError | ssl.CertificateError):
        return f"TLS failed: {exc}"
    if isinstance(exc, http.client.HTTPException):
        return f"The answer was not HTTP: {exc!r}"
    return f"Could not connect: {exc}"


def post(
    url: str,
    *,
    body: bytes,
    headers: dict[str, str],
    allow_private: bool,
    timeout: float = TIMEOUT_SECONDS,
) -> Answer:
    """POST ``body`` to ``url``: resolved and checked now, connected to the address checked,
    within ``timeout`` seconds, no redirect followed. Never raises."""
    with Session(allow_private=allow_private, timeout=timeout) as session:
        return session.post(url, body=body, headers=headers)


@dataclass(frozen=True)
class Outgoing:
    """A request ready to go: where, what, and the headers."""

    url: str
    body: bytes
    headers: dict[str, str]


def post_in_order(
    batch: list[Outgoing], *, allow_private: bool, timeout: float, until: float
) -> list[Answer]:
    """Post ``batch`` in order, on one :class:`Session`, up to its first failure; after the first,
    no request starts once ``until`` (``time.monotonic``) has come. What each request sent got."""
    answers: list[Answer] = []
    with Session(allow_private=allow_private, timeout=timeout) as session:
        for outgoing in batch:
            if answers and time.monotonic() >= until:
                break
            answers.append(session.post(outgoing.url, body=outgoing.body, headers=outgoing.headers))
            if not answers[-1].delivered:
                break
    return answers
