"""Daphne's WebSocket protocol, with autobahn's options held once by the class, not by every socket.

When a connection is made, autobahn copies its factory's options (29 of them: timeouts, sizes,
origins, ...) into the connection's own ``__dict__``, unless the connection already has them,
from its class for instance. Those copies take a daphne WebSocket's ``__dict__`` from some 70
entries past 85, into a table twice the size: about 1.7 KB more for every open socket, idle or
not. This protocol class takes the options from the factory at the first connection (daphne sets
them on its one factory before it listens and never changes them), so that no connection copies
them; every connection reads the same values as before. Once a socket is open, it lets go of the
handshake's raw request and response, which autobahn keeps only for its own test suite. And it
sends a frame on the socket at once rather than on the reactor's next pass (:func:`_write_now`).
:func:`install` makes daphne use it: the ASGI module calls it, before daphne opens any connection.
"""

from __future__ import annotations

from types import FunctionType
from typing import Any

from daphne import ws_protocol
from twisted.internet import tcp

# Read before autobahn copies the options, as a connection is made: a connection has no
# ``tcpNoDelay`` yet then (autobahn ignores the AttributeError), so daphne's sockets keep Nagle's
# algorithm. Left to be copied as before, lest the class's value switch it off.
_READ_BEFORE_COPIED = frozenset({"tcpNoDelay"})


class WebSocketProtocol(ws_protocol.WebSocketProtocol):
    _options_of: Any = None  # the factory whose options the class holds

    def _connectionMade(self) -> None:  # noqa: N802  (autobahn's name)
        cls = type(self)
        if cls._options_of is None:
            for name in self.CONFIG_ATTRS:
                if name in _READ_BEFORE_COPIED:
                    continue
                value = getattr(self.factory, name)
                # (a function held by the class would be bound to each connection: it stays plain)
                setattr(cls, name, staticmethod(value) if isinstance(value, FunctionType) else value)
            cls._options_of = self.factory
        elif cls._options_of is not self.factory:  # a second server in this process: copies, as autobahn does
            for name in self.CONFIG_ATTRS:
                setattr(self, name, getattr(self.factory, name))
        super()._connectionMade()

    def onOpen(self) -> None:  # noqa: N802  (autobahn's name)
        # The handshake's request and response as they were sent, which autobahn keeps for its
        # test suite and nothing reads once the socket is open (some 700 bytes a socket).
        self.__dict__.pop("http_request_data", None)
        self.__dict__.pop("http_response_data", None)
        super().onOpen()

    def sendData(self, data: bytes, sync: bool = False, chopsize: int | None = None) -> None:  # noqa: N802
        """autobahn's ``sendData`` for a frame of an open socket with nothing queued before it
        (every frame daphne sends once the handshake is done): written to the socket at once
        (:func:`_write_now`), without autobahn's debug line, whose arguments it formats for
        every frame, logged or not (5 µs a frame)."""
        if sync or chopsize or self.send_queue or self.state != self.STATE_OPEN or self.logOctets:
            super().sendData(data, sync, chopsize)
            return
        _write_now(self.transport, data)
        self.trafficStats.outgoingOctetsWireLevel += len(data)


def _write_now(transport: Any, data: bytes) -> None:
    """``data`` sent on the socket now if nothing waits to be sent before it; what the socket
    does not take, or all of it when something waits, is written as twisted writes: buffered,
    and sent once the reactor finds the socket writable.

    Twisted's own ``write`` always buffers: it asks the reactor to watch the socket for writing
    and sends on the reactor's next pass, then stops watching it, two more system calls and a
    callback for every frame. Sending at once took a quarter off daphne's CPU for each streamed
    delta at 5,000 deltas a second (docs/benchmarks.md#streams). A TLS connection, one being
    closed, or one with bytes waiting is written as twisted writes, so bytes never pass others."""
    if (
        isinstance(transport, tcp.Connection)
        and not transport.TLS
        and transport.connected
        and not transport.disconnecting
        and not transport._writeDisconnected
        and not transport._tempDataBuffer
        and transport.offset == len(transport.dataBuffer)
    ):
        sent = transport.writeSomeData(data)
        if sent == len(data):
            return
        if isinstance(sent, int):
            data = data[sent:]
        # else the connection is lost: writing the rest lets twisted find that out as it writes
    transport.write(data)


def install() -> None:
    """Daphne's WebSocket factory builds :class:`WebSocketProtocol` from now on."""
    ws_protocol.WebSocketFactory.protocol = WebSocketProtocol
