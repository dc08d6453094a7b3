"""The local kubelet's sidecar startupProbe (tcpSocket): later containers wait until it connects, as in
Kubernetes (live watch's agent counts as started once it listens, after it placed the bootstrap)."""

from __future__ import annotations

import socket

from frwatch_dev.localcluster.kubelet import _tcp_startup_probe


def test_a_tcp_startup_probe_passes_only_once_the_port_listens() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    port = server.getsockname()[1]
    named = {"ports": [{"name": "ctl", "containerPort": port}], "startupProbe": {"tcpSocket": {"port": "ctl"}}}
    numbered = {"startupProbe": {"tcpSocket": {"port": port}}}
    assert not _tcp_startup_probe(named, "127.0.0.1")  # bound, not listening: refused
    server.listen()
    try:
        assert _tcp_startup_probe(named, "127.0.0.1") and _tcp_startup_probe(numbered, "127.0.0.1")
    finally:
        server.close()
    assert _tcp_startup_probe({"name": "no-probe"}, "127.0.0.1")
    assert not _tcp_startup_probe({"startupProbe": {"tcpSocket": {"port": "unknown-name"}}}, "127.0.0.1")
