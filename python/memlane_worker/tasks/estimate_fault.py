"""`estimate.faultWindow`: how many bytes one read of a file's page maps, for each of the
byte ranges given (memory.fault_window): what a table read a row at a time in place costs
per row read (an embedding table in ONNX Runtime's external data, or in memlane-rt's plan;
src/estimate/table-reads.ts). The page cache is the machine's, so a fresh worker sees the
file as the run's process will."""
from __future__ import annotations

from .. import memory
from ..context import TaskContext


def run(ctx: TaskContext):
    a = ctx.args
    path = a.path("file", must_exist=True)
    ranges = a.int_pairs("ranges")  # [offset, length] in bytes
    return {"windows": [memory.fault_window(path, offset, length) for offset, length in ranges]}
