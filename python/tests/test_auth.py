"""hello.auth and the environment a spawned worker reads (docs/protocol.md, "Trust")."""
import os

import pytest

from memlane_worker import auth
from memlane_worker.protocol import DEFAULT_MAX_MESSAGE_BYTES, ENV_MAX_MESSAGE_BYTES, ENV_WORKER_KEY

# Also checked by test/unit/transport-auth.test.ts and native/runtime/tests/hmac_test.cc.
GOLDEN = "522fecf8dc58afd908d0e095efe77b1cca68f3ba1501bab395a5a06711a690ed"


def test_hello_auth_matches_the_other_languages():
    assert auth.hello_auth(bytes(range(32)), "memlane-rt-4242", 4242) == GOLDEN
    assert auth.hello_auth(None, "x", 1) is None


def test_take_key_removes_it_from_the_environment(monkeypatch):
    monkeypatch.setenv(ENV_WORKER_KEY, bytes(range(32)).hex())
    assert auth.take_key() == bytes(range(32))
    assert ENV_WORKER_KEY not in os.environ
    assert auth.take_key() is None
    monkeypatch.setenv(ENV_WORKER_KEY, "not hex")
    with pytest.raises(SystemExit, match=ENV_WORKER_KEY):
        auth.take_key()


def test_max_message_bytes_from_the_environment(monkeypatch):
    monkeypatch.delenv(ENV_MAX_MESSAGE_BYTES, raising=False)
    assert auth.max_message_bytes() == DEFAULT_MAX_MESSAGE_BYTES
    monkeypatch.setenv(ENV_MAX_MESSAGE_BYTES, "4096")
    assert auth.max_message_bytes() == 4096
    monkeypatch.setenv(ENV_MAX_MESSAGE_BYTES, "12")
    with pytest.raises(SystemExit, match=ENV_MAX_MESSAGE_BYTES):
        auth.max_message_bytes()


def test_a_spawned_worker_proves_its_key_in_hello():
    from harness import Orchestrator

    key = os.urandom(32)
    o = Orchestrator(env={ENV_WORKER_KEY: key.hex()})
    try:
        h = o.hello
        assert h["auth"] == auth.hello_auth(key, h["id"], h["pid"])
        # The key no longer shows in /proc/<pid>/environ: overwritten in place after reading.
        environ = open(f"/proc/{o.proc.pid}/environ", "rb").read().split(b"\0")
        assert f"{ENV_WORKER_KEY}={'x' * 64}".encode() in environ
        assert key.hex().encode() not in b"".join(environ)
    finally:
        o.close()


def test_a_result_over_the_limit_becomes_a_task_failed_error_instead_of_a_dropped_connection():
    from harness import Orchestrator

    o = Orchestrator(env={ENV_MAX_MESSAGE_BYTES: "1024"})
    try:
        reply = o.run("worker.info", {})  # its module and library lists take more than 1 KiB
        assert reply.final["type"] == "error" and reply.final["code"] == 6, reply.final
        assert "exceeds the limit of 1024 bytes" in reply.final["message"]
        o.send({"v": 1, "type": "heartbeat", "id": "still-there"})
        assert o.recv(5)["id"] == "still-there"
    finally:
        o.close()


def test_take_curve_reads_all_three_keys_or_none(monkeypatch):
    import zmq

    from memlane_worker.protocol import ENV_CURVE_PUBLIC_KEY, ENV_CURVE_SECRET_KEY, ENV_CURVE_SERVER_KEY

    for name in (ENV_CURVE_SERVER_KEY, ENV_CURVE_PUBLIC_KEY, ENV_CURVE_SECRET_KEY):
        monkeypatch.delenv(name, raising=False)
    assert auth.take_curve() is None
    server_pub, _ = zmq.curve_keypair()
    pub, sec = zmq.curve_keypair()
    monkeypatch.setenv(ENV_CURVE_SERVER_KEY, server_pub.decode())
    monkeypatch.setenv(ENV_CURVE_PUBLIC_KEY, pub.decode())
    monkeypatch.setenv(ENV_CURVE_SECRET_KEY, sec.decode())
    keys = auth.take_curve()
    assert keys == auth.CurveKeys(server=server_pub.decode(), public=pub.decode(), secret=sec.decode())
    assert ENV_CURVE_SECRET_KEY not in os.environ
    monkeypatch.setenv(ENV_CURVE_SECRET_KEY, "short")
    with pytest.raises(SystemExit, match=ENV_CURVE_SECRET_KEY):
        auth.take_curve()


def test_rank_key_matches_the_typescript_derivation():
    # test/unit/distributed.test.ts expects the same bytes from rankKey() in src/transport/auth.ts.
    from memlane_worker import auth as a
    assert a.rank_key(bytes([7]) * 32, 1).hex() == "27022dac1325deda8e6b397df6616705e86fd6ef8269e5c511bfcadc7d24592a"
    assert a.rank_key(bytes([7]) * 32, 0) != a.rank_key(bytes([7]) * 32, 1)
