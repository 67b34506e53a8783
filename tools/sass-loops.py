#!/usr/bin/env python3
"""Static SASS facts per kernel: total instructions and the K loops.

    tools/sass-loops.py CUBIN [CUBIN2] [--filter SUBSTR] [--nvdisasm PATH]

Disassembles CUBIN with nvdisasm (`pip install nvidia-cuda-nvdisasm`; its
path by --nvdisasm, $NVDISASM, or `nvdisasm` on PATH) and prints, per
kernel, the instruction count and the instruction count of its innermost
loops that hold a tensor-core MMA (`HGMMA`/`QGMMA`: the compute K loop) or a
TMA load (`UTMALDG`: the producer's loop). A loop is the address range from
a backward branch's target to the branch. With a second cubin, prints both
side by side with the difference (before / after a change): the issue's
"K loops assemble to the same or fewer SASS instructions" check.
"""
import os
import re
import subprocess
import sys

INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
LABEL = re.compile(r"^(\.L_x_\d+):")
FUNC = re.compile(r"^\s*\.text\.(\S+):")
BRA = re.compile(r"\bBRA(?:\.\S+)?\s+`\((\.L_x_\d+)\)")


def disasm(cubin, nvdisasm):
    return subprocess.run([nvdisasm, "-c", cubin], check=True, capture_output=True, text=True).stdout


def kernels(text):
    """{name: [(addr, insn)], labels {label: addr}}."""
    out = {}
    cur = None
    pending = []
    for line in text.splitlines():
        m = FUNC.match(line)
        if m:
            cur = m.group(1)
            out[cur] = ([], {})
            pending = []
            continue
        if cur is None:
            continue
        m = LABEL.match(line.strip())
        if m:
            pending.append(m.group(1))
            continue
        m = INSN.search(line)
        if m:
            addr = int(m.group(1), 16)
            for lb in pending:
                out[cur][1][lb] = addr
            pending = []
            out[cur][0].append((addr, m.group(2)))
    return out


def loops(insns, labels, marker, also=None):
    """Instruction counts of the innermost loops holding `marker` (and
    `also`, if given)."""
    spans = []
    for addr, ins in insns:
        m = BRA.search(ins)
        if m and m.group(1) in labels and labels[m.group(1)] <= addr:
            spans.append((labels[m.group(1)], addr))
    holding = []
    for lo, hi in spans:
        body = [i for a, i in insns if lo <= a <= hi]
        if any(marker.search(i) for i in body) and (also is None or any(also.search(i) for i in body)):
            holding.append((lo, hi, len(body)))
    # A loop nests in or around every other loop. A span that enters a
    # loop from a branch after it is ptxas's out-of-line retry stub of an
    # mbarrier wait (placed at the end of the function, branching back into
    # the loop): it overlaps a loop partially and is not a loop itself.
    def stub(s, o):
        return o[0] < s[0] <= o[1] < s[1]
    real = [s for s in spans if not any(stub(s, o) for o in spans)]
    holding = [h for h in holding if (h[0], h[1]) in real]
    inner = [s for s in holding if not any(o != s and s[0] <= o[0] and o[1] <= s[1] for o in holding)]
    return sorted(n for _, _, n in inner)


MMA = re.compile(r"\b[HQ]GMMA\b")
TMA = re.compile(r"\bUTMALDG\b")
# The producer's loop also announces the bytes (`mbarrier.arrive.expect_tx`):
# this excludes ptxas's retry loops around a single UTMALDG.
ARRIVE = re.compile(r"\bSYNCS\.ARRIVE")


def facts(text, filt):
    res = {}
    for name, (insns, labels) in kernels(text).items():
        if filt and not any(f in name for f in filt):
            continue
        res[name] = (len(insns), loops(insns, labels, MMA), loops(insns, labels, TMA, ARRIVE))
    return res


def main():
    args = sys.argv[1:]
    nvdisasm = os.environ.get("NVDISASM", "nvdisasm")
    filt = []
    cubins = []
    while args:
        a = args.pop(0)
        if a == "--filter":
            filt.append(args.pop(0))
        elif a == "--nvdisasm":
            nvdisasm = args.pop(0)
        else:
            cubins.append(a)
    if not cubins:
        sys.exit(__doc__)
    sets = [facts(disasm(c, nvdisasm), filt) for c in cubins]
    if len(sets) == 1:
        print("kernel\tinstructions\tMMA loops\tTMA loops")
        for k, (n, mma, tma) in sorted(sets[0].items()):
            print(f"{k}\t{n}\t{mma}\t{tma}")
        return
    a, b = sets
    # Entry names of element-generic kernels carry the type
    # (`k__f16_128_4`) where their twins were `k__128_4` / `k_bf16__128_4`:
    # compare those under the old name.
    for k in list(b):
        m = re.match(r"(.*?)__(f16|bf16)_(.*)", k)
        if k not in a and m:
            old = f"{m.group(1)}__{m.group(3)}" if m.group(2) == "f16" else f"{m.group(1)}_bf16__{m.group(3)}"
            if old in a:
                b[old] = b.pop(k)
    print("kernel\tinstructions before -> after\tMMA loops before -> after\tTMA loops before -> after")
    for k in sorted(set(a) | set(b)):
        fa, fb = a.get(k), b.get(k)
        if fa is None or fb is None:
            print(f"{k}\t{'only after' if fa is None else 'only before'}")
            continue
        flag = "" if (fb[0] <= fa[0] and sum(fb[1]) <= sum(fa[1]) and sum(fb[2]) <= sum(fa[2])) else "\tMORE"
        print(f"{k}\t{fa[0]} -> {fb[0]}\t{fa[1]} -> {fb[1]}\t{fa[2]} -> {fb[2]}{flag}")


if __name__ == "__main__":
    main()
