#!/usr/bin/env bash
# Fair share between API keys, measured on a real server: the flooding scenario of docs/api.md's
# guarantee under --scheduling-policy fcfs and fair, back to back on the same host.
#   bench/fair_share.sh [PAGODA_BINARY] [MODEL]
# Defaults: build/pagoda and ../shared/models/stories260K.gguf (scalar kernels, one thread, two
# seats, so that a queue forms on any host). Two scenarios per policy:
#   flood + quiet: key `flood` keeps 24 streamed requests in flight, key `quiet` sends one at a time;
#   3:1 weights:   keys `gold` (weight 3) and `bronze` (weight 1) each keep 12 requests in flight.
# The quiet key's fair share is bounded by its own demand (one request at a time): what fairness
# buys it is its TTFT.
# Each key's share is its completion tokens over a window while both keys are backlogged (the
# server's pagoda:api_tokens_total); the quiet key's TTFT comes from its bench-serve client.
# Prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-build/pagoda}"
model="${2:-../shared/models/stories260K.gguf}"
[ -x "$bin" ] || { echo "fair_share: no $bin (build first)" >&2; exit 1; }
[ -f "$model" ] || { echo "fair_share: no model $model" >&2; exit 1; }
work="$(mktemp -d)"
server=""
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
cat >"$work/keys" <<'KEYS'
sk-flood-000001 name=flood
sk-quiet-000002 name=quiet
sk-gold-0000003 name=gold weight=3
sk-bronze-00004 name=bronze weight=1
KEYS

serve() {  # POLICY: starts the server, sets $server and $url
  PAGODA_ISA=scalar "$bin" serve -m "$model" --port 0 --threads 1 --max-seqs 2 --max-queue 100000 \
    --api-key-file "$work/keys" --scheduling-policy "$1" 2>"$work/serve.log" &
  server=$!
  for _ in $(seq 1 200); do
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/serve.log" | head -1)
    [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
    sleep 0.1
  done
  url="http://127.0.0.1:$port"
}
load() {  # NAME KEY CONCURRENCY REQUESTS: a bench-serve client in the background, JSON to $work/NAME.json
  "$bin" bench-serve --url "$url" --api-key "$2" --concurrency "$3" --requests "$4" --prompt-len 24 \
    --output-len 48 --stream --json --seed "$RANDOM" >"$work/$1.json" 2>"$work/$1.err" &
}
completion_tokens() {  # KEY: its completion tokens so far (pagoda:api_tokens_total), 0 before any
  local v
  v=$(curl -sf "$url/metrics" -H "Authorization: Bearer sk-flood-000001" |
        sed -n "s/^pagoda:api_tokens_total{.*key=\"$1\",kind=\"completion\"} \([0-9.e+]*\)$/\1/p" | head -1)
  echo "${v:-0}"
}
window() {  # SECONDS KEY...: each key's completion tokens over the next SECONDS
  local before=() k i=0
  for k in "${@:2}"; do before+=("$(completion_tokens "$k")"); done
  sleep "$1"
  for k in "${@:2}"; do echo "$k ${before[$i]} $(completion_tokens "$k")"; i=$((i + 1)); done
}

echo "| policy | scenario | key | weight | output tok/s | share of tokens | TTFT p50 ms | TTFT p90 ms |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for policy in fcfs fair; do
  serve "$policy"
  # Flood + quiet: the flood keeps 24 streams in flight; the quiet key sends 20 requests one at a
  # time once the queue has formed, and is done long before the flood.
  load flood sk-flood-000001 24 100000; flood=$!
  sleep 2
  load quiet sk-quiet-000002 1 20
  quiet=$!
  window 8 flood quiet >"$work/window"
  wait $quiet
  kill $flood 2>/dev/null; wait $flood 2>/dev/null || true
  python3 - "$work" "$policy" <<'PY'
import json, sys
work, policy = sys.argv[1:]
w = {k: (float(b), float(a)) for k, b, a in (l.split() for l in open(f"{work}/window"))}
total = sum(a - b for b, a in w.values())
q = json.load(open(f"{work}/quiet.json"))
for k in ("flood", "quiet"):
    b, a = w[k]
    t = f"{q['ttft_s']['p50'] * 1000:.0f} | {q['ttft_s']['p90'] * 1000:.0f}" if k == "quiet" else "— | —"
    print(f"| {policy} | flood + quiet | {k} | 1 | {(a - b) / 8:.0f} | {100 * (a - b) / total:.0f} % | {t} |")
PY
  kill "$server"; wait "$server" 2>/dev/null || true; server=""
  serve "$policy"
  # 3:1 weights: both keys keep 12 requests in flight throughout the window.
  load gold sk-gold-0000003 12 100000; gold=$!
  load bronze sk-bronze-00004 12 100000; bronze=$!
  sleep 3
  window 12 gold bronze >"$work/window"
  kill $gold $bronze 2>/dev/null; wait $gold $bronze 2>/dev/null || true
  python3 - "$work" "$policy" <<'PY'
import sys
work, policy = sys.argv[1:]
w = {k: (float(b), float(a)) for k, b, a in (l.split() for l in open(f"{work}/window"))}
total = sum(a - b for b, a in w.values())
for k, weight in (("gold", 3), ("bronze", 1)):
    b, a = w[k]
    print(f"| {policy} | 3:1 weights | {k} | {weight} | {(a - b) / 12:.0f} | {100 * (a - b) / total:.0f} % | — | — |")
PY
  kill "$server"; wait "$server" 2>/dev/null || true; server=""
done
echo
echo "host: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; $(basename "$model"), PAGODA_ISA=scalar, --threads 1 --max-seqs 2"
