"""`python -m memlane_worker.realzoo list | export NAME... | export-all`: see docs/zoo.md."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memlane_worker.realzoo",
                                 description="Real architectures with random weights, exported to ONNX.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="print the model names, one a line")
    ex = sub.add_parser("export", help="export models to ONNX; prints one JSON line per file")
    ex.add_argument("names", nargs="*", help="models to export (default: all)")
    ex.add_argument("--exporter", choices=("legacy", "dynamo", "both"), default="both")
    ex.add_argument("--out", help="output .onnx file (one model, one exporter)")
    ex.add_argument("--dir", help="output folder: <dir>/<name>.<exporter>.onnx, plus manifest.json")
    ex.add_argument("--full-size", action="store_true", help="224 px images (default: the small test size)")
    ex.add_argument("--seed", type=int, default=0)
    ex.add_argument("--keep-going", action="store_true", help="report a failed export and go on")
    a = ap.parse_args(argv)

    from . import registry
    if a.cmd == "list":
        print("\n".join(registry.models()))
        return 0
    from .export import EXPORTERS, export

    names = a.names or list(registry.models())
    exporters = list(EXPORTERS) if a.exporter == "both" else [a.exporter]
    if a.out and (len(names) != 1 or len(exporters) != 1):
        ap.error("--out takes one model and one --exporter; use --dir for several")
    if not a.out and not a.dir:
        ap.error("give --out FILE or --dir DIR")
    try:
        specs = [registry.get(n) for n in names]
    except KeyError as e:
        ap.error(str(e.args[0]))
    if a.dir:
        os.makedirs(a.dir, exist_ok=True)
    manifest, failed = [], 0
    for spec in specs:
        for exporter in exporters:
            out = a.out or os.path.join(a.dir, f"{spec.name}.{exporter}.onnx")
            size = spec.full_size if a.full_size and spec.full_size else None
            started = time.perf_counter()
            try:
                rec = export(spec, exporter, out, size=size, seed=a.seed)
            except Exception as e:  # noqa: BLE001
                if not a.keep_going:
                    raise
                failed += 1
                rec = {"name": spec.name, "exporter": exporter, "error": f"{type(e).__name__}: {e}"[:2000]}
            rec["exportSeconds"] = round(time.perf_counter() - started, 2)
            print(json.dumps(rec), flush=True)
            manifest.append(rec)
    if a.dir:
        with open(os.path.join(a.dir, "manifest.json"), "w") as f:
            json.dump(manifest, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
