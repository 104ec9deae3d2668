#!/usr/bin/env python3
"""Two pagoda binaries on one model, alternating run by run (A B, then B A, ...), so that a host whose
speed drifts (other guests, bandwidth) disturbs both alike; prints each side's runs, their median
and the share of CPU time the hypervisor stole during that side's runs (/proc/stat), and the ratio
of the medians, per test of the run (pp512 and tg128 apart when ARGS ask for both). Each run is
`BINARY bench -m MODEL --profile none --no-limits --json ARGS...`. A side may also be one binary under
other environment variables: `VAR=VALUE[,VAR=VALUE...]@BINARY` (e.g. PAGODA_ATTENTION=amx_bf16@build/pagoda).

  bench/ab_bench.py OLD_BINARY NEW_BINARY MODEL ROUNDS [bench args, e.g. -p 0 -n 128 -r 2]
"""
import json
import os
import statistics
import subprocess
import sys


def cpu_ticks():
    """(all ticks, steal ticks) of /proc/stat's aggregate line; (0, 0) where it cannot be read."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:9]]
        return sum(fields), (fields[7] if len(fields) > 7 else 0)
    except (OSError, ValueError):
        return 0, 0


def side_of(spec):
    """(binary, environment) of `BINARY` or `VAR=VALUE[,VAR=VALUE...]@BINARY`."""
    env = dict(os.environ)
    if "@" in spec:
        settings, spec = spec.split("@", 1)
        for item in settings.split(","):
            name, _, value = item.partition("=")
            env[name] = value
    return spec, env


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    binaries, envs = {}, {}
    for side, spec in (("old", sys.argv[1]), ("new", sys.argv[2])):
        binaries[side], envs[side] = side_of(spec)
    model, rounds, extra = sys.argv[3], int(sys.argv[4]), sys.argv[5:]
    rates = {"old": {}, "new": {}}  # side -> test name -> tokens/s of each run
    ticks = {"old": [0, 0], "new": [0, 0]}
    for i in range(rounds):
        for side in ("old", "new") if i % 2 == 0 else ("new", "old"):
            total0, steal0 = cpu_ticks()
            run = subprocess.run([binaries[side], "bench", "-m", model, "--profile", "none", "--no-limits", "--json"]
                                 + extra, capture_output=True, text=True, env=envs[side])
            total1, steal1 = cpu_ticks()
            if run.returncode != 0:
                sys.exit(f"{binaries[side]} failed:\n{run.stderr}")
            ticks[side][0] += total1 - total0
            ticks[side][1] += steal1 - steal0
            for line in run.stdout.splitlines():
                if line.startswith("{"):
                    result = json.loads(line)
                    rates[side].setdefault(result["test"], []).append(result["tokens_per_s"])
    for test in rates["old"]:
        for side in ("old", "new"):
            values = rates[side][test]
            steal = 100 * ticks[side][1] / max(1, ticks[side][0])
            print(f"{test} {side}: median {statistics.median(values):.1f} tok/s, steal {steal:.1f} %; runs "
                  + " ".join(f"{v:.1f}" for v in values))
        print(f"{test} new / old (medians): {statistics.median(rates['new'][test]) / statistics.median(rates['old'][test]):.3f}")


if __name__ == "__main__":
    main()
