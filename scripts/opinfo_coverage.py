"""The OpInfo coverage table: how thunder handles every OpInfo of PyTorch's op_db, per dtype.

    python scripts/opinfo_coverage.py --csv opinfo_coverage.csv        # the full run (all dtypes)
    python scripts/opinfo_coverage.py --dtypes float32 --limit 50      # a quick look

Each (OpInfo, dtype) the OpInfo declares for the CPU is run on all its sample inputs through thunder
and compared with eager (``classify`` in packages/thunder-executors/tests/test_opinfo.py, the same
harness the conformance tests use): native pass, fallback pass (no thunder symbol: the op ran as a
visible ``fallback.*`` symbol), mismatch, error (a clear NotImplementedError) or crash (any other
exception from thunder). The table goes to stdout, one row per (OpInfo, dtype) to the CSV.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "packages" / "thunder-executors" / "tests"))
import test_opinfo  # noqa: E402 -- the conformance harness

DTYPES = {str(d).removeprefix("torch."): d for d in test_opinfo.CONFORMANCE_DTYPES}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--dtypes", default=",".join(DTYPES), help="comma-separated, from: " + ", ".join(DTYPES)
    )
    parser.add_argument("--csv", type=Path, default=None, help="write one row per (OpInfo, dtype) here")
    parser.add_argument("--limit", type=int, default=None, help="only the first N OpInfos")
    parser.add_argument("--only", default=None, help="comma-separated OpInfo names")
    args = parser.parse_args()
    dtypes = [DTYPES[name] for name in args.dtypes.split(",")]
    opinfos = test_opinfo.op_db[: args.limit]
    if args.only:
        opinfos = [o for o in opinfos if o.name in args.only.split(",")]
    warnings.simplefilter("ignore")
    rows, counts = [], {d: Counter() for d in dtypes}
    start = time.perf_counter()
    for index, opinfo in enumerate(opinfos):
        for dtype in dtypes:
            if dtype not in opinfo.supported_dtypes("cpu"):
                continue
            began = time.perf_counter()
            status, detail = test_opinfo.classify(opinfo, dtype)
            if time.perf_counter() - began > 20:
                print(f"  {opinfo.name} {dtype}: {time.perf_counter() - began:.0f} s", file=sys.stderr)
            counts[dtype][status] += 1
            rows.append((test_opinfo._opinfo_id(opinfo), str(dtype).removeprefix("torch."), status, detail))
            if status in ("mismatch", "crash"):
                print(f"  {rows[-1][0]} {rows[-1][1]}: {status}: {detail[:160]}", file=sys.stderr)
        if index % 50 == 49:
            print(
                f"  ... {index + 1}/{len(opinfos)} OpInfos, {time.perf_counter() - start:.0f} s",
                file=sys.stderr,
            )
    print(f"\n{'dtype':<10}" + "".join(f"{s:>10}" for s in test_opinfo.STATUSES) + f"{'total':>10}")
    for dtype in dtypes:
        line = "".join(f"{counts[dtype][s]:>10}" for s in test_opinfo.STATUSES)
        print(f"{str(dtype).removeprefix('torch.'):<10}{line}{sum(counts[dtype].values()):>10}")
    print(f"({len(opinfos)} OpInfos, torch {torch.__version__}, {time.perf_counter() - start:.0f} s)")
    if args.csv is not None:
        with args.csv.open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(("opinfo", "dtype", "status", "detail"))
            writer.writerows(rows)


if __name__ == "__main__":
    main()
