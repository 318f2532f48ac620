#!/usr/bin/env python3
"""Finds the ptxas 13.0 fault of perf notes #72 and #211 in sm_90 SASS: an
instruction that reads a uniform register as a cache-policy descriptor
(`desc[URn]`, e.g. an LDGSTS of a weight copy marked evict-first) though no
earlier instruction of its function writes that register. On the GPU such an
instruction is an illegal instruction; every later CUDA call of the process
then fails on the sticky error.

    scripts/sass-unwritten-uniforms.py FILE...

A FILE is a CUBIN (disassembled with `nvdisasm -c`, from PATH or
/usr/local/cuda/bin; an entry of the runtime's NVRTC cache is one after its
header line) or nvdisasm's text output. Prints each finding (the
function, the instruction) and a line per file; exit status 1 if any file
has one, 2 if a CUBIN cannot be disassembled, else 0.

A read counts as written when any instruction earlier in the function's
listing writes URn (or URn-1 as a 64-bit pair): a linear scan, so a
register written only on a later path is reported, and one written on
another path is not. It found the fault in every grouped-tile kernel of
the template tests built with one ring stage ahead and in none of the 72
NVRTC CUBINs of the kernels the project emits (#211). Standard library
only.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

_INSTR = re.compile(r"/\*[0-9a-f]{4}\*/\s+(.*?)\s*;")
_DESC = re.compile(r"desc\[(UR\d+)\]")


def findings(sass):
    """(function, instruction) pairs whose desc[URn] is read before written."""
    out = []
    for chunk in re.split(r"\n\s*\.text\.", sass):
        func = chunk.split(":", 1)[0].strip()
        written = set()
        for line in chunk.split("\n"):
            m = _INSTR.search(line)
            if not m:
                continue
            ins = m.group(1)
            for reg in _DESC.findall(ins):
                if reg not in written:
                    out.append((func, ins))
            words = ins.split()
            if words and words[0].startswith("@"):
                words = words[1:]
            if len(words) > 1:
                dst = words[1].rstrip(",")
                if dst.startswith("UR") and dst[2:].isdigit():
                    n = int(dst[2:])
                    written.update({"UR%d" % n, "UR%d" % (n + 1)})
    return out


def nvdisasm():
    fallback = "/usr/local/cuda/bin/nvdisasm"
    return shutil.which("nvdisasm") or (fallback if os.path.exists(fallback) else None)


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    status = 0
    for path in argv:
        if path.endswith(".cubin"):
            tool = nvdisasm()
            if not tool:
                print("%s: no nvdisasm on PATH or in /usr/local/cuda/bin" % path)
                return 2
            with open(path, "rb") as f:
                data = f.read()
            # The runtime's NVRTC cache entries start with a header line
            # ("MKCACHE1 <key> <length> <sha256>", runtime/lib/KernelCache.cpp)
            # before the CUBIN.
            if data.startswith(b"MKCACHE1 "):
                data = data[data.index(b"\n") + 1:]
            with tempfile.NamedTemporaryFile(suffix=".cubin") as elf:
                elf.write(data)
                elf.flush()
                r = subprocess.run([tool, "-c", elf.name], capture_output=True, text=True)
            if r.returncode != 0 or not r.stdout.strip():
                print("%s: nvdisasm failed: %s" % (path, r.stderr.strip()))
                return 2
            sass = r.stdout
        else:
            with open(path, encoding="utf-8", errors="replace") as f:
                sass = f.read()
        found = findings(sass)
        for func, ins in found:
            print("  %s: %s" % (func[:100], ins))
        print("%s: %d instructions read a policy register nothing wrote" % (path, len(found)))
        if found:
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
