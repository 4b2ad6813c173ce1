"""Build check: per-ISA-level object files must not leak code to other levels.

Two ways an AVX-512 object could end up running on a CPU without AVX-512:
  * it defines a shared symbol (inline function, template instantiation) that other
    objects also define; the linker keeps one copy, possibly this one;
  * it has a static constructor, which runs at import on every CPU.
So every defined global or weak symbol must be in namespace ipxc::<level>, and there must be
no _GLOBAL__sub_I_ (static initialiser) symbols.
usage: check_level_objects.py --nm NM --level LEVEL OBJECT...
"""
from __future__ import annotations

import argparse
import subprocess
import sys

SHARED_TYPES = set("BDGRSTVWiuv")  # nm symbol types that are global or weak (uppercase = global)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nm", required=True)
    parser.add_argument("--level", required=True)
    parser.add_argument("objects", nargs="+")
    args = parser.parse_args()
    prefix = f"ipxc::{args.level}::"
    problems = []
    for obj in args.objects:
        out = subprocess.run([args.nm, "-C", "--defined-only", obj], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split(" ", 2)
            if len(parts) < 3:
                continue
            kind, name = parts[1], parts[2]
            if "_GLOBAL__sub_I" in name:
                problems.append(f"{obj}: static initialiser {name}")
            elif kind in SHARED_TYPES and not name.startswith(prefix):
                problems.append(f"{obj}: shared symbol outside {prefix}: {kind} {name}")
    for p in problems:
        print(f"check_level_objects: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
