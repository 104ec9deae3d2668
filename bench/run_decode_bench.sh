#!/usr/bin/env bash
# Runs the decode micro-benchmark (bench/decode_bench.cpp) and prints the markdown table of
# docs/benchmarks.md: per weight type and tokens per step, the packed matmul's weight GB/s on 1 and 2
# cores from memory (256 MiB round-robin) beside the streaming-read bound of the same memory measured
# in the same run, and from a 1 MiB cache-resident matrix (the kernel's compute ceiling).
#   bench/run_decode_bench.sh [BENCH_BINARY] [FILTER]   (default: build/bench/pagoda_bench, BM_decode_)
# Build the binary with: cmake -S . -B build -DPAGODA_BENCH=ON && ninja -C build pagoda_bench
# Environment: PAGODA_ISA etc. select the path as for pagoda itself. Takes ~2 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/bench/pagoda_bench}
filter=${2:-BM_decode_}
[ -x "$bin" ] || { echo "run_decode_bench.sh: $bin not found (build with -DPAGODA_BENCH=ON)" >&2; exit 1; }
json=$(mktemp)
trap 'rm -f "$json"' EXIT
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(date -u '+%Y-%m-%d %H:%M') UTC; load $(cut -d' ' -f1-3 /proc/loadavg)"
# The hypervisor's share of CPU time during the run (/proc/stat steal): above a few percent the
# figures show the host's other guests as much as the kernels.
stat_before=$(head -1 /proc/stat 2>/dev/null || true)
"$bin" --benchmark_filter="$filter" --benchmark_min_time=0.3 --benchmark_format=json > "$json"
stat_after=$(head -1 /proc/stat 2>/dev/null || true)
if [ -n "$stat_before" ] && [ -n "$stat_after" ]; then
    python3 - "$stat_before" "$stat_after" <<'PY'
import sys
a, b = ([int(x) for x in s.split()[1:9]] for s in sys.argv[1:3])
d = [y - x for x, y in zip(a, b)]
print(f"CPU time stolen by the hypervisor during the run (/proc/stat steal): {100 * d[7] / max(1, sum(d)):.1f} %")
PY
fi
python3 - "$json" <<'PY'
import json, sys
runs = [b for b in json.load(open(sys.argv[1]))["benchmarks"] if b.get("run_type", "iteration") == "iteration"]
cell = {}
for b in runs:
    name = b["name"].split("/")
    typ = name[0].removeprefix("BM_decode_")
    args = dict(p.split(":") for p in name[1:] if ":" in p)
    cell[(typ, int(args["tokens"]), int(args["threads"]), int(args["resident"]), int(args.get("cols", 2048)))] = b
types = list(dict.fromkeys(k[0] for k in cell))
print("| type | tokens | 1 core GB/s | of bound (read GB/s) | 2 cores GB/s | per core | of bound (read GB/s) | resident 1 core | resident 2 cores |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for t in types:
    for n in sorted({k[1] for k in cell if k[0] == t}):
        def g(th, res):
            return cell.get((t, n, th, res, 2048))
        m1, m2, r1, r2 = g(1, 0), g(2, 0), g(1, 1), g(2, 1)
        f = lambda b, k: f"{b[k]:.1f}" if b else "—"
        pct = lambda b: f"{100 * b['of_bound']:.0f} % ({b['read_GB/s']:.1f})" if b else "—"
        print(f"| {t} | {n} | {f(m1, 'GB/s')} | {pct(m1)} | {f(m2, 'GB/s')} | {f(m2, 'GB/s/core')} | {pct(m2)} | {f(r1, 'GB/s')} | {f(r2, 'GB/s')} |")
narrow = [t for t in types if (t, 1, 1, 0, 768) in cell]
if narrow:
    print()
    print("768 columns (the `small` preset's width), one token, from memory; mean = all calls, not the fastest:")
    print()
    print("| type | 1 core GB/s | mean | of bound (read GB/s) | 2 cores GB/s | mean | of bound (read GB/s) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for t in narrow:
        m1, m2 = cell.get((t, 1, 1, 0, 768)), cell.get((t, 1, 2, 0, 768))
        f = lambda b, k: f"{b[k]:.1f}" if b else "—"
        pct = lambda b: f"{100 * b['of_bound']:.0f} % ({b['read_GB/s']:.1f})" if b else "—"
        print(f"| {t} | {f(m1, 'GB/s')} | {f(m1, 'mean_GB/s')} | {pct(m1)} | {f(m2, 'GB/s')} | {f(m2, 'mean_GB/s')} | {pct(m2)} |")
PY
