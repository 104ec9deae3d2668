#!/usr/bin/env bash
# pagoda beside llama.cpp and ik_llama.cpp, interleaved on the same GGUF files, in one run.
#
#   bench/compare_peers.sh [--llama PATH/llama-bench] [--ik PATH/llama-bench] [--rounds R]
#                          [--out FILE.md] MODEL.gguf...
#
# The peers are built by hand from their own sources, outside this repository (nothing of theirs
# is built into it); either may be left out. For each round, model by model, each engine runs
# `-p 512 -n 128 -r 3 -t $(nproc)` on the file (ik_llama.cpp with `-rtr 1`, its run-time repacking),
# so drift of the shared host hits all three alike. pagoda runs `pagoda bench --json`, whose tg
# figure comes with the read bound measured right before each run (the best of several access
# patterns over the weights and a scratch buffer). The table (markdown, with the host, the date and
# the commands) goes to stdout and, with --out, is appended to FILE.md. Models: `pagoda gen-model
# --preset small|tinyllama -o M.gguf` then `pagoda quantize M.gguf M-q4_0.gguf q4_0` (any engine
# reads these files); peers' own quantiser gives the same block formats.
set -euo pipefail
llama="" ik="" rounds=1 out="" bin=${PAGODA_BIN:-build/pagoda}
models=()
while [ $# -gt 0 ]; do
  case "$1" in
    --llama) llama=${2:?}; shift 2 ;;
    --ik) ik=${2:?}; shift 2 ;;
    --rounds) rounds=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    -*) echo "compare_peers: unknown option $1" >&2; exit 2 ;;
    *) models+=("$1"); shift ;;
  esac
done
[ ${#models[@]} -gt 0 ] || { echo "compare_peers: name at least one GGUF file (see --help)" >&2; exit 2; }
for m in "${models[@]}"; do [ -f "$m" ] || { echo "compare_peers: no such model file: $m" >&2; exit 2; }; done
for p in "$llama" "$ik"; do
  if [ -n "$p" ] && [ ! -x "$p" ]; then echo "compare_peers: not an executable: $p" >&2; exit 2; fi
done
[ -x "$bin" ] || { echo "compare_peers: build pagoda first ($bin missing; PAGODA_BIN names another)" >&2; exit 2; }
threads=$(nproc)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
host="$(lscpu | sed -n 's/^Model name: *//p') (family $(lscpu | sed -n 's/^CPU family: *//p'), model $(lscpu | sed -n 's/^Model: *//p')), $threads CPUs"
started=$(date -u '+%F %H:%M UTC')
for ((r = 1; r <= rounds; r++)); do
  for m in "${models[@]}"; do
    key=$(basename "$m" .gguf)
    echo "round $r: $key" >&2
    "$bin" bench -m "$m" -p 512 -n 128 -r 3 -t "$threads" --json > "$work/$key.pagoda.$r.json" 2> "$work/$key.pagoda.$r.log" ||
      { echo "compare_peers: pagoda bench failed on $m:" >&2; tail -3 "$work/$key.pagoda.$r.log" >&2; exit 1; }
    if [ -n "$llama" ]; then
      "$llama" -m "$m" -p 512 -n 128 -r 3 -t "$threads" -o json > "$work/$key.llama.$r.json" 2> "$work/$key.llama.$r.log" ||
        { echo "compare_peers: llama.cpp failed on $m:" >&2; tail -3 "$work/$key.llama.$r.log" >&2; exit 1; }
    fi
    if [ -n "$ik" ]; then
      "$ik" -m "$m" -p 512 -n 128 -r 3 -t "$threads" -rtr 1 -o json > "$work/$key.ik.$r.json" 2> "$work/$key.ik.$r.log" ||
        { echo "compare_peers: ik_llama.cpp failed on $m:" >&2; tail -3 "$work/$key.ik.$r.log" >&2; exit 1; }
    fi
  done
done
table=$(python3 "$(dirname "$0")/peer_table.py" "$work" "$rounds" "$host" "$started" "${models[@]}")
printf '%s\n' "$table"
if [ -n "$out" ]; then printf '\n%s\n' "$table" >> "$out"; echo "appended to $out" >&2; fi
