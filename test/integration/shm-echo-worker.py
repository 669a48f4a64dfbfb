"""A worker for the shm tests: answers `echo.shm` by decoding its tensors with the real
worker codec (python/memlane_worker/codec.py, which maps `shm` refs from /dev/shm) and
sending the bytes back as ordinary frames, with a checksum per tensor, so the test sees
what Python actually read out of the segment."""
import pathlib
import sys
import zlib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "workers"))
from fixture_common import ErrorCode, Fixture  # noqa: E402

from memlane_worker import codec  # noqa: E402  (fixture_common put python/ on sys.path)

fx = Fixture()
fx.hello()


def on_task(env, frames):
    id_ = env["id"]
    if env.get("task") != "echo.shm":
        fx.error(id_, ErrorCode.UNKNOWN_TASK, f"unknown task {env.get('task')}")
        return
    try:
        arrays = codec.decode(env.get("tensors"), frames)
    except Exception as e:  # noqa: BLE001 - the test wants the message
        fx.error(id_, ErrorCode.SHM_UNAVAILABLE if "shared memory" in str(e) else ErrorCode.MALFORMED_MESSAGE, str(e))
        return
    refs, out = codec.encode({name: arr for name, arr in arrays.items()})
    crc = {name: zlib.crc32(memoryview(arr).cast("B")) for name, arr in arrays.items()}
    shm = [r["name"] for r in env.get("tensors") or [] if r.get("shm")]
    fx.result(id_, {"crc32": crc, "viaShm": shm}, refs, out)


fx.serve(on_task)
