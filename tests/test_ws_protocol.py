"""Daphne's WebSocket protocol as Ballet installs it (``ballet/ws_protocol.py``): autobahn's options
are held by the class, not copied into every connection, and every connection reads the same."""

from __future__ import annotations

from daphne import ws_protocol as daphne_ws
from twisted.internet.address import IPv4Address
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
