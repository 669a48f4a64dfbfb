"""The golden protocol bytes decode to expected.json, and protocol.py matches protocol.ts."""
from __future__ import annotations

import json
import pathlib
import re

import numpy as np

from memlane_worker import codec, messages
from memlane_worker.protocol import DTYPE_BYTES, MESSAGE_TYPES, PROTOCOL_VERSION, ErrorCode, Phase

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "test" / "fixtures" / "golden"
EXPECTED = json.loads((GOLDEN / "expected.json").read_text())


def test_envelopes_decode_to_expected():
    for name in ("hello", "task", "error"):
        env = messages.parse((GOLDEN / f"{name}.msgpack").read_bytes())
        assert env == EXPECTED[name]


def test_envelopes_reencode_byte_for_byte():
    # Python's writer must produce the same bytes as the fixtures (shortest encodings).
    for name in ("hello", "task", "error"):
        assert messages.pack(EXPECTED[name]) == (GOLDEN / f"{name}.msgpack").read_bytes()


def test_task_frames_decode_through_the_codec():
    env = messages.parse((GOLDEN / "task.msgpack").read_bytes())
    frames = [(GOLDEN / "task.frame0.bin").read_bytes(), (GOLDEN / "task.frame1.bin").read_bytes()]
    tensors = codec.decode(env["tensors"], frames)
    want0 = np.array(EXPECTED["frames"]["task.frame0.bin"], dtype=np.float32).reshape(2, 3)
    assert np.array_equal(tensors["inputs"], want0)
    # int64 beyond 2^53 travels as strings in JSON; the frame holds it exactly.
    want1 = [int(s) for s in EXPECTED["frames"]["task.frame1.bin"]]
    assert tensors["labels"].tolist() == want1


def test_protocol_constants_match_typescript():
    ts = (ROOT / "src" / "transport" / "protocol.ts").read_text()
    assert int(re.search(r"PROTOCOL_VERSION = (\d+)", ts).group(1)) == PROTOCOL_VERSION
    block = re.search(r"MESSAGE_TYPES = \[(.*?)\]", ts, re.S).group(1)
    assert tuple(re.findall(r'"([a-z]+)"', block)) == MESSAGE_TYPES
    codes = dict((k, int(v)) for k, v in re.findall(r"^\s+([A-Z_]+): (\d+),", re.search(
        r"ErrorCode = \{(.*?)\}", ts, re.S).group(1), re.M))
    py_codes = {k: v for k, v in vars(ErrorCode).items() if k.isupper()}
    assert codes == py_codes
    phases = dict(re.findall(r'^\s+([A-Z_]+): "([a-z-]+)",', re.search(r"Phase = \{(.*?)\}", ts, re.S).group(1), re.M))
    assert phases == {k: v for k, v in vars(Phase).items() if k.isupper()}
    dtypes = dict((k, int(v)) for k, v in re.findall(r"^\s+(\w+): (\d+),", re.search(
        r"DTYPE_BYTES.*?\{(.*?)\}", ts, re.S).group(1), re.M))
    assert dtypes == DTYPE_BYTES
