"""Daphne's WebSocket protocol as Ballet installs it (``ballet/ws_protocol.py``): autobahn's options
are held by the class, not copied into every connection, and every connection reads the same."""

from __future__ import annotations

import socket
from unittest import mock

import pytest
from daphne import ws_protocol as daphne_ws
from twisted.internet import tcp
from twisted.internet.address import IPv4Address
from twisted.internet.protocol import Protocol
from twisted.internet.testing import StringTransport

from ballet import ws_protocol

OPTIONS = {"openHandshakeTimeout": 7, "maxMessagePayloadSize": 1234, "autoPingTimeout": 11}


def connected(factory: daphne_ws.WebSocketFactory) -> ws_protocol.WebSocketProtocol:
    protocol = factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 50000))
    protocol.makeConnection(StringTransport())
    assert isinstance(protocol, ws_protocol.WebSocketProtocol)
    return protocol


def factory_with(**options: object) -> daphne_ws.WebSocketFactory:
    factory = daphne_ws.WebSocketFactory(None, server="daphne")
    factory.setProtocolOptions(**options)
    return factory


def test_connections_read_the_factorys_options_from_their_class_and_copy_none(monkeypatch):
    monkeypatch.setattr(ws_protocol.WebSocketProtocol, "_options_of", None)
    monkeypatch.setattr(daphne_ws.WebSocketFactory, "protocol", daphne_ws.WebSocketFactory.protocol)
    ws_protocol.install()
    factory = factory_with(**OPTIONS)

    first, second = connected(factory), connected(factory)

    for protocol in (first, second):
        copied = [name for name in protocol.CONFIG_ATTRS if name in vars(protocol)]
        assert copied in ([], ["tcpNoDelay"])  # (read before autobahn copies: left as it was)
        for name in protocol.CONFIG_ATTRS:
            assert getattr(protocol, name) == getattr(factory, name), name
    assert (first.openHandshakeTimeout, first.maxMessagePayloadSize, first.autoPingTimeout) == (7, 1234, 11)


def test_a_second_factory_in_the_process_gets_its_own_options_copied(monkeypatch):
    monkeypatch.setattr(ws_protocol.WebSocketProtocol, "_options_of", None)
    monkeypatch.setattr(daphne_ws.WebSocketFactory, "protocol", daphne_ws.WebSocketFactory.protocol)
    ws_protocol.install()
    first = connected(factory_with(**OPTIONS))
    other = factory_with(openHandshakeTimeout=3, maxMessagePayloadSize=99, autoPingTimeout=5)

    second = connected(other)

    assert (second.openHandshakeTimeout, second.maxMessagePayloadSize, second.autoPingTimeout) == (3, 99, 5)
    assert (first.openHandshakeTimeout, first.maxMessagePayloadSize) == (7, 1234)


class Reactor:
    """As much of a reactor as a TCP connection uses: which descriptors it watches."""

    def __init__(self) -> None:
        self.writers: set[object] = set()

    def addReader(self, reader: object) -> None:
        pass

    def removeReader(self, reader: object) -> None:
        pass

    def addWriter(self, writer: object) -> None:
        self.writers.add(writer)

    def removeWriter(self, writer: object) -> None:
        self.writers.discard(writer)


@pytest.fixture
def wire():
    """A twisted TCP connection on one end of a socket pair, and the other end to read."""
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    reactor = Reactor()
    connection = tcp.Server(ours, Protocol(), ("127.0.0.1", 1), mock.Mock(), 1, reactor)  # type: ignore[arg-type]
    yield connection, theirs, reactor
    ours.close()
    theirs.close()


def received(sock: socket.socket) -> bytes:
    out = b""
    while True:
        try:
            chunk = sock.recv(1 << 20)
        except BlockingIOError:
            return out
        if not chunk:
            return out
        out += chunk


def test_a_frame_with_nothing_waiting_goes_to_the_socket_at_once(wire):
    connection, theirs, reactor = wire

    ws_protocol._write_now(connection, b"frame one")

    assert received(theirs) == b"frame one"
    assert reactor.writers == set()  # no pass of the reactor needed, and none asked for


def test_a_frame_behind_waiting_bytes_waits_behind_them(wire):
    connection, theirs, reactor = wire
    connection.write(b"first ")  # twisted's own write: buffered until the reactor's pass

    ws_protocol._write_now(connection, b"second")

    assert received(theirs) == b""
    assert reactor.writers == {connection}
    connection.doWrite()  # the reactor's pass
    assert received(theirs) == b"first second"
    assert reactor.writers == set()


def test_what_a_full_socket_does_not_take_is_sent_later_in_order(wire):
    connection, theirs, reactor = wire
    data = bytes(range(256)) * 20_000  # 5 MB: more than the socket's buffers hold

    ws_protocol._write_now(connection, data)
    ws_protocol._write_now(connection, b"and then this")

    assert reactor.writers == {connection}
    got = received(theirs)
    assert 0 < len(got) < len(data)
    while reactor.writers:
        connection.doWrite()
        got += received(theirs)
    assert got == data + b"and then this"


def test_a_tls_connection_or_one_closing_is_written_as_twisted_writes(wire, monkeypatch):
    connection, theirs, _reactor = wire
    writes: list[bytes] = []
    monkeypatch.setattr(connection, "write", writes.append)

    monkeypatch.setattr(connection, "TLS", True)
    ws_protocol._write_now(connection, b"over tls")
    monkeypatch.setattr(connection, "TLS", False)
    monkeypatch.setattr(connection, "disconnecting", True)
    ws_protocol._write_now(connection, b"closing")

    assert writes == [b"over tls", b"closing"]
    assert received(theirs) == b""


def test_an_open_sockets_frame_is_framed_and_counted_as_autobahn_does():
    factory = factory_with()
    protocol = factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 50000))
    transport = StringTransport()
    protocol.makeConnection(transport)
    protocol.state = protocol.STATE_OPEN
    protocol.trafficStats.reset()

    protocol.sendMessage(b'{"type": "text_delta"}')

    assert transport.value() == b'\x81\x16{"type": "text_delta"}'
    assert protocol.trafficStats.outgoingOctetsWireLevel == 24
