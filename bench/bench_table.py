#!/usr/bin/env python3
"""Turns `pagoda bench --json` lines (stdin or files) into the markdown table of docs/benchmarks.md:
tokens/s with their ratio to this machine's limits (measured in the same run) and to llama.cpp's
figures on the same shapes (../shared/PERF-NOTES.md, Feb 2025 build, 2 threads), and the share of
CPU time the hypervisor stole during the timed runs (pp / tg; "—" where the line has no steal_share)."""
import json
import sys

# llama.cpp pp512 / tg128 tokens/s on random-weight models of the gen-model presets.
LLAMA_CPP = {
    ("random-tinyllama", "f16"): (78, 21), ("random-tinyllama", "q8_0"): (90, 28), ("random-tinyllama", "q4_0"): (94, 50),
    ("random-small", "f16"): (700, 118), ("random-small", "q8_0"): (815, 190), ("random-small", "q4_0"): (870, 363),
}


def main():
    lines = []
    files = sys.argv[1:] or ["-"]
    for name in files:
        stream = sys.stdin if name == "-" else open(name)
        lines += [json.loads(l) for l in stream if l.strip().startswith("{")]
    rows = {}
    for r in lines:
        key = (r["model"], r["weight_type"], r.get("label", r["weight_type"]))
        rows.setdefault(key, {})[r["test"][:2]] = r
    print("| model | type | size | pp tok/s | of limit | llama.cpp pp | ratio | tg tok/s | of bound (GB/s) | llama.cpp tg "
          "| ratio | steal pp / tg |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for (model, wtype, label), tests in rows.items():
        ref = LLAMA_CPP.get((model, wtype))
        pp, tg = tests.get("pp"), tests.get("tg")
        any_row = pp or tg
        cells = [model.replace("random-", ""), label, f"{any_row['model_bytes'] / 2**20:.0f} MiB"]
        if pp:
            cells += [f"{pp['tokens_per_s']:.0f} ± {pp['stddev']:.0f}", f"{100 * pp['ratio_to_limit']:.0f} %",
                      str(ref[0]) if ref else "—", f"{pp['tokens_per_s'] / ref[0]:.2f}" if ref else "—"]
        else:
            cells += ["—"] * 4
        if tg:
            cells += [f"{tg['tokens_per_s']:.1f} ± {tg['stddev']:.1f}",
                      f"{100 * tg['ratio_to_limit']:.0f} % ({tg['bandwidth_gbps']:.1f})",
                      str(ref[1]) if ref else "—", f"{tg['tokens_per_s'] / ref[1]:.2f}" if ref else "—"]
        else:
            cells += ["—"] * 4
        def steal(r):
            return f"{100 * r['steal_share']:.0f} %" if r and r.get("steal_share") is not None else "—"
        cells.append(f"{steal(pp)} / {steal(tg)}")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
