"""Build check: per-ISA-level object files must not leak code to other levels.

Two ways an AVX-512 object could end up running on a CPU without AVX-512:
  * it defines a shared symbol (inline function, template instantiation) that other
    objects also define; the linker keeps one copy, possibly this one;
  * it has a static constructor, which runs at import on every CPU.
So every defined global or weak symbol must be in namespace ipxc::<level>, and there must be
no _GLOBAL__sub_I_ (static initialiser) symbols. Generic code (--level generic, and "core":
detection, dispatch, thread pool) must also contain no VEX/EVEX-encoded instruction (AVX and
up; their AT&T mnemonics start with "v"), which the disassembly shows directly.
usage: check_level_objects.py --nm NM --objdump OBJDUMP --level LEVEL OBJECT...
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys

SHARED_TYPES = set("BDGRSTVWiuv")  # nm symbol types that are global or weak (uppercase = global)
VEX_INSTRUCTION = re.compile(r"^\s*[0-9a-f]+:\s+(v[a-z0-9]+)\b", re.MULTILINE)
GENERIC = ("generic", "core")


def symbol_problems(nm: str, obj: str, level: str) -> list[str]:
    if level == "core":
        return []  # shared code by design; only its instructions are checked
    prefix = f"ipxc::{level}::"
    problems = []
    out = subprocess.run([nm, "-C", "--defined-only", obj], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) < 3:
            continue
        kind, name = parts[1], parts[2]
        if "_GLOBAL__sub_I" in name:
            problems.append(f"{obj}: static initialiser {name}")
        elif kind in SHARED_TYPES and not name.startswith(prefix):
            problems.append(f"{obj}: shared symbol outside {prefix}: {kind} {name}")
    return problems


def instruction_problems(objdump: str, obj: str) -> list[str]:
    out = subprocess.run([objdump, "-d", "--no-show-raw-insn", obj], capture_output=True, text=True, check=True).stdout
    found = sorted(set(VEX_INSTRUCTION.findall(out)))
    return [f"{obj}: AVX instructions in generic code: {', '.join(found[:10])}"] if found else []


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nm", required=True)
    parser.add_argument("--objdump", required=True)
    parser.add_argument("--level", required=True, help="a level name, or 'core' for the generic support code")
    parser.add_argument("objects", nargs="+")
    args = parser.parse_args()
    problems = []
    for obj in args.objects:
        problems += symbol_problems(args.nm, obj, args.level)
        if args.level in GENERIC:
            problems += instruction_problems(args.objdump, obj)
    for p in problems:
        print(f"check_level_objects: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
