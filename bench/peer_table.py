"""The table of bench/compare_peers.sh: pagoda, llama.cpp and ik_llama.cpp per model, pp512 / tg128,
the better peer's ratio, and pagoda's tg against its read bound. Reads the per-round JSON files that
script writes (pagoda bench --json lines; llama-bench -o json arrays); a round's figures are averaged
over the rounds. Usage: peer_table.py WORKDIR ROUNDS HOST STARTED MODEL.gguf..."""
import json
import os
import sys


def mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def pagoda_rates(path):
    pp = tg = ratio = None
    error = False
    for line in open(path):
        line = line.strip()
        if not line.startswith("{"):
            continue
        j = json.loads(line)
        if j.get("test", "").startswith("pp"):
            pp = j["tokens_per_s"]
        elif j.get("test", "").startswith("tg"):
            tg, ratio, error = j["tokens_per_s"], j.get("ratio_to_limit"), bool(j.get("measurement_error"))
    return pp, tg, ratio, error


def peer_rates(path):
    if not os.path.exists(path):
        return None, None
    pp = tg = None
    for row in json.load(open(path)):
        if row.get("n_prompt", 0) > 0 and row.get("n_gen", 0) == 0:
            pp = row["avg_ts"]
        elif row.get("n_gen", 0) > 0 and row.get("n_prompt", 0) == 0:
            tg = row["avg_ts"]
    return pp, tg


def fmt(v, digits=0):
    return "-" if v is None else f"{v:.{digits}f}"


def main():
    work, rounds, host, started, models = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
    lines = [f"Host: {host}; {started}; {rounds} round(s), the engines interleaved model by model; "
             "`-p 512 -n 128 -r 3`, all CPUs (ik_llama.cpp with `-rtr 1`). Tokens/s.", "",
             "| model | pp512 pagoda / llama.cpp / ik | pp ÷ better peer | tg128 pagoda / llama.cpp / ik "
             "| tg ÷ better peer | pagoda tg of its read bound |",
             "| --- | --- | ---: | --- | ---: | ---: |"]
    for m in models:
        key = os.path.basename(m)[:-5] if m.endswith(".gguf") else os.path.basename(m)
        runs = [pagoda_rates(os.path.join(work, f"{key}.pagoda.{r}.json")) for r in range(1, rounds + 1)]
        pp, tg = mean([r[0] for r in runs]), mean([r[1] for r in runs])
        ratio = mean([r[2] for r in runs])
        error = any(r[3] for r in runs)
        peers = {}
        for name in ("llama", "ik"):
            rs = [peer_rates(os.path.join(work, f"{key}.{name}.{r}.json")) for r in range(1, rounds + 1)]
            peers[name] = (mean([r[0] for r in rs]), mean([r[1] for r in rs]))
        best_pp = max([v for v in (peers["llama"][0], peers["ik"][0]) if v], default=None)
        best_tg = max([v for v in (peers["llama"][1], peers["ik"][1]) if v], default=None)
        bound = "error (above the bound)" if error else (f"{100 * ratio:.1f} %" if ratio else "-")
        lines.append(
            f"| {key} | {fmt(pp)} / {fmt(peers['llama'][0])} / {fmt(peers['ik'][0])} "
            f"| {fmt(pp / best_pp, 2) + 'x' if pp and best_pp else '-'} "
            f"| {fmt(tg, 1)} / {fmt(peers['llama'][1], 1)} / {fmt(peers['ik'][1], 1)} "
            f"| {fmt(tg / best_tg, 2) + 'x' if tg and best_tg else '-'} | {bound} |")
    print("\n".join(lines))


main()
