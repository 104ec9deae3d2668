#!/usr/bin/env python3
"""Two builds of the micro-benchmark binary (build/bench/pagoda_bench) run at the same time, one pinned
to each of two cores, one thread each, swapping cores every round; prints each benchmark's figures per
build, their medians and the ratio. On a shared virtual machine a single run of one binary moved by
1.5x within minutes (docs/benchmarks.md, Ice Lake), so two runs one after the other compare the host's
drift; two runs side by side see the same host. For single-thread, cache-resident rows: rows that
stream from memory share its bandwidth, which halves both sides alike but is no longer the one-core
figure.

  bench/paired_bench.py OLD_BENCH NEW_BENCH FILTER ROUNDS [COUNTER]
      FILTER: a --benchmark_filter regex; COUNTER: the user counter to compare (default GFLOP/s;
      e.g. GB/s for BM_decode_*). Needs two CPUs (taskset, cores 0 and 1).
"""
import os
import re
import statistics
import subprocess
import sys
import threading


def run(binary, core, bench_filter, counter, out):
    cmd = ["taskset", "-c", str(core), binary, f"--benchmark_filter={bench_filter}", "--benchmark_min_time=0.3"]
    env = dict(os.environ, PAGODA_BENCH_THREADS="1")  # PAGODA_ISA and the like pass through
    text = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
    pattern = re.compile(r"(?:^|\s)" + re.escape(counter) + r"=([0-9.eE+-]+)")  # GB/s, not mean_GB/s
    for line in text.splitlines():
        if not line.startswith("BM_"):
            continue
        m = pattern.search(line)
        if m:
            out[line.split()[0]] = float(m.group(1))


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    old, new, bench_filter, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    counter = sys.argv[5] if len(sys.argv) > 5 else "GFLOP/s"
    figures = {"old": {}, "new": {}}
    for r in range(rounds):
        cores = (0, 1) if r % 2 == 0 else (1, 0)  # each build on each core in turn
        results = {"old": {}, "new": {}}
        threads = [threading.Thread(target=run, args=(b, c, bench_filter, counter, results[side]))
                   for side, b, c in (("old", old, cores[0]), ("new", new, cores[1]))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for side in results:
            for name, v in results[side].items():
                figures[side].setdefault(name, []).append(v)
    names = sorted(set(figures["old"]) & set(figures["new"]))
    if not names:
        sys.exit(f"no benchmark matched '{bench_filter}' with a {counter} counter in both builds")
    print(f"| benchmark | old {counter} | new {counter} | old median | new median | new / old |")
    print("| --- | --- | --- | ---: | ---: | ---: |")
    for name in names:
        o, n = figures["old"][name], figures["new"][name]
        mo, mn = statistics.median(o), statistics.median(n)
        runs = lambda xs: " ".join(f"{x:.1f}" for x in xs)
        print(f"| {name} | {runs(o)} | {runs(n)} | {mo:.1f} | {mn:.1f} | {mn / mo:.2f} |")


if __name__ == "__main__":
    main()
