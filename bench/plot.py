#!/usr/bin/env python3
"""Plots decode tokens/s against decode batch size and against context depth (docs/benchmarks.md).

The two curves come from the JSON pagoda's own benchmarks write:
  - batch: the profile `pagoda tune -o PROFILE` writes; its measurements.decode_step_s holds
    [sequences, seconds] pairs, one decode step of B sequences timed through the real model, so
    tokens/s = B / seconds;
  - depth: the lines `pagoda bench --json -p 0 -n N -d D` prints, one per depth (test "tgN @ dD",
    tokens_per_s; a test without "@ d" is depth 0).

Either give the JSON (--profile FILE, --bench-json FILE...), or --model MODEL and the script runs
the benchmarks itself with --pagoda (default build/pagoda) and keeps their output with --save-dir.
Needs matplotlib, which pagoda's install scripts do not install (the plot is made by hand):
  apt-get install python3-matplotlib, then run it with /usr/bin/python3 (Debian), or pip install matplotlib

  bench/plot.py --model small-q4_0.gguf --save-dir /tmp/plot -o docs/img/decode-curves.png
  bench/plot.py --profile /tmp/plot/profile.json --bench-json /tmp/plot/depth.jsonl -o out.png
"""
import argparse
import json
import os
import re
import subprocess
import sys


def run(cmd):
    print("+ " + " ".join(cmd), file=sys.stderr)
    out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if out.returncode != 0:
        sys.exit(f"plot.py: {cmd[0]} {cmd[1]} failed with status {out.returncode}")
    return out.stdout


def batch_points(profile_path):
    with open(profile_path) as f:
        profile = json.load(f)
    steps = profile.get("measurements", {}).get("decode_step_s")
    if not steps:
        sys.exit(f"plot.py: {profile_path} has no measurements.decode_step_s (is it a pagoda tune profile?)")
    points = sorted((int(b), b / s) for b, s in steps if s > 0)
    return points, profile


def depth_points(lines):
    points = []
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        j = json.loads(line)
        m = re.fullmatch(r"tg(\d+)(?: @ d(\d+))?", j.get("test", ""))
        if not m:
            continue  # a pp test
        points.append((int(m.group(2) or 0), j["tokens_per_s"], j.get("stddev", 0.0), j))
    if not points:
        sys.exit("plot.py: no tg test among the bench JSON lines")
    return sorted(points, key=lambda p: p[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--out", required=True, help="PNG to write")
    ap.add_argument("--profile", help="a pagoda tune profile (JSON) for the batch curve")
    ap.add_argument("--bench-json", nargs="*", default=[], help="files of pagoda bench --json lines for the depth curve")
    ap.add_argument("--model", help="run the benchmarks on this model instead of reading JSON")
    ap.add_argument("--pagoda", default="build/pagoda")
    ap.add_argument("--threads", default="0", help="-t for the runs (0: one per physical core)")
    ap.add_argument("--depths", default="0,256,512,1024,2048", help="context depths for the depth curve")
    ap.add_argument("--gen", default="32", help="generated tokens per depth run (-n)")
    ap.add_argument("--reps", default="2", help="repetitions per depth run (-r)")
    ap.add_argument("--quick-tune", action="store_true", help="pagoda tune --quick (three batch sizes, seconds)")
    ap.add_argument("--save-dir", help="keep the runs' JSON here (profile.json, depth.jsonl)")
    ap.add_argument("--title", default="", help="a line under the title: host, load, date")
    ap.add_argument("--name", default="", help="the model's name in the title (default: from the JSON)")
    a = ap.parse_args()

    depth_lines = []
    profile_path = a.profile
    if a.model and (a.profile or a.bench_json):
        sys.exit("plot.py: give --model (run the benchmarks) or --profile / --bench-json (read them), not both")
    if a.model:
        save = a.save_dir or "."
        os.makedirs(save, exist_ok=True)
        if not profile_path:
            profile_path = os.path.join(save, "profile.json")
            cmd = [a.pagoda, "tune", "-m", a.model, "-o", profile_path, "-t", a.threads]
            run(cmd + (["--quick"] if a.quick_tune else []))
        for d in a.depths.split(","):
            depth_lines += run([a.pagoda, "bench", "-m", a.model, "-p", "0", "-n", a.gen, "-d", d, "-r", a.reps,
                                "-t", a.threads, "--profile", "none", "--json"]).splitlines()
        with open(os.path.join(save, "depth.jsonl"), "w") as f:
            f.write("\n".join(depth_lines) + "\n")
    for path in a.bench_json:
        with open(path) as f:
            depth_lines += f.read().splitlines()
    if not profile_path and not depth_lines:
        sys.exit("plot.py: nothing to plot: give --model, or --profile and/or --bench-json")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = (1 if profile_path else 0) + (1 if depth_lines else 0)
    fig, axes = plt.subplots(1, panels, figsize=(5.2 * panels, 4.0), squeeze=False)
    axes = list(axes[0])
    name = a.name or (os.path.basename(a.model) if a.model else "")
    if profile_path:
        pts, profile = batch_points(profile_path)
        ax = axes.pop(0)
        ax.plot([b for b, _ in pts], [t for _, t in pts], "o-")
        for b, t in pts:
            ax.annotate(f"{t:.0f}", (b, t), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
        ax.set_xscale("log", base=2)
        ax.set_xticks([b for b, _ in pts], [str(b) for b, _ in pts])
        ax.set_xlabel("sequences decoding in one step")
        ax.set_ylabel("decode tokens/s (all sequences)")
        ax.set_title("against decode batch size (pagoda tune)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        name = name or os.path.basename(profile.get("model", {}).get("path", ""))
    if depth_lines:
        pts = depth_points(depth_lines)
        ax = axes.pop(0)
        ax.errorbar([d for d, *_ in pts], [t for _, t, *_ in pts], yerr=[s for _, _, s, _ in pts], fmt="o-", capsize=3)
        ax.set_xlabel("tokens already in the KV cache (bench -d)")
        ax.set_ylabel("decode tokens/s (one sequence)")
        ax.set_title("against context depth (pagoda bench)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        first = pts[0][3]
        name = name or f"{first.get('model', '')} {first.get('weight_type', '')}"
    fig.suptitle(f"pagoda decode speed, {name}" + (f"\n{a.title}" if a.title else ""), fontsize=10)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
