#!/usr/bin/env bash
# Side by side in one run: pagoda bench pp/tg of an older pagoda binary against this build with the
# fusion pass on and off, interleaved per model so drifting host bandwidth hits all three alike, plus
# the ops per decode step and per 512-token prefill from `pagoda graph`. Prints a markdown table.
#   bench/run_seam_comparison.sh OLD_PAGODA MODEL.gguf...        (env: PP=512 TG=128 REPS=2)
# Takes minutes per model; not part of the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
old=$1
shift
new=build/pagoda
pp=${PP:-512} tg=${TG:-128} reps=${REPS:-2}
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(date -u +%Y-%m-%d)"
echo "command: bench -p $pp -n $tg -r $reps --json (old, new fused, new --no-fusion, interleaved)"
echo
echo "| model | ops/decode step fused (unfused) | ops/pp$pp step fused (unfused) | pp$pp old | pp$pp fused | pp$pp unfused | tg$tg old | tg$tg fused | tg$tg unfused |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
rate() { python3 -c "import json,sys; print('%.1f' % next(json.loads(l)['tokens_per_s'] for l in sys.stdin if json.loads(l)['test']=='$1'))"; }
for m in "$@"; do
  o=$("$old" bench -m "$m" -p "$pp" -n "$tg" -r "$reps" --json --no-limits 2>/dev/null)
  f=$("$new" bench -m "$m" -p "$pp" -n "$tg" -r "$reps" --json --no-limits 2>/dev/null)
  u=$("$new" bench -m "$m" -p "$pp" -n "$tg" -r "$reps" --json --no-limits --no-fusion 2>/dev/null)
  g1=$("$new" graph -m "$m" --tokens 1 2>/dev/null)
  gp=$("$new" graph -m "$m" --tokens "$pp" 2>/dev/null)
  count() { sed -n "s/^== $1[^:]*: \([0-9]*\) ops.*/\1/p"; }
  d_f=$(echo "$g1" | count "as run") d_u=$(echo "$g1" | count "as built")
  p_f=$(echo "$gp" | count "as run") p_u=$(echo "$gp" | count "as built")
  echo "| $(basename "$m" .gguf) | $d_f ($d_u) | $p_f ($p_u) | $(echo "$o" | rate pp$pp) | $(echo "$f" | rate pp$pp) | $(echo "$u" | rate pp$pp) | $(echo "$o" | rate tg$tg) | $(echo "$f" | rate tg$tg) | $(echo "$u" | rate tg$tg) |"
done
