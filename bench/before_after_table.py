#!/usr/bin/env python3
"""Markdown table of bench/run_before_after.sh's JSON lines: per model, the old and the new binary's
pp / tg tokens/s, each with its ratio to the limit of the path measured in the same run (arithmetic
peak for prefill, streaming-read bound for generation), the load average when it ran and the share
of CPU time the hypervisor stole during its timed runs (steal_share; "—" from binaries without it), the new/old
ratio, and the new figure against the better peer of issue 12 (llama.cpp / ik_llama.cpp on the Intel
AMX host, ../shared/PERF-NOTES.md: another host, so a rough yardstick only)."""
import json
import sys

# Better of llama.cpp and ik_llama.cpp, pp512 / tg128, on the Intel Xeon AMX host (issue 12).
PEERS_AMX_HOST = {
    ("random-small", "q4_0"): (891, 285), ("random-small", "q8_0"): (1030, 185), ("random-small", "f16"): (606, 96),
    ("random-small", "q4_k_m"): (725, 287), ("random-tinyllama", "q4_0"): (124, 32), ("random-tinyllama", "f16"): (56, 11),
}


def main():
    rows = {}
    for name in sys.argv[1:] or ["-"]:
        stream = sys.stdin if name == "-" else open(name)
        for line in stream:
            if line.strip().startswith("{"):
                r = json.loads(line)
                rows.setdefault((r["model"], r["label"]), {})[(r["side"], r["test"][:2])] = r
    print("| model | type | test | before tok/s | of limit | load | steal | after tok/s | of limit | load | steal "
          "| after / before | after / best peer |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for (model, label), cells in rows.items():
        for test in ("pp", "tg"):
            old, new = cells.get(("old", test)), cells.get(("new", test))
            if not (old and new):
                continue
            peer = PEERS_AMX_HOST.get((model, label))
            peer_v = peer[0 if test == "pp" else 1] if peer else None
            def fig(r):
                lim = f"{100 * r['ratio_to_limit']:.0f} %"
                if test == "tg":
                    lim += f" ({r['bandwidth_gbps']:.1f} GB/s)"
                steal = r.get("steal_share")
                return [f"{r['tokens_per_s']:.1f} ± {r['stddev']:.1f}", lim, f"{r['load']:.1f}",
                        f"{100 * steal:.0f} %" if steal is not None else "—"]
            print("| " + " | ".join([model.replace("random-", ""), label, old["test"]] + fig(old) + fig(new) +
                                    [f"{new['tokens_per_s'] / old['tokens_per_s']:.2f}",
                                     f"{new['tokens_per_s'] / peer_v:.2f}" if peer_v else "—"]) + " |")


if __name__ == "__main__":
    main()
