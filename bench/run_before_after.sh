#!/usr/bin/env bash
# Before/after model speed, interleaved in one run: for every model, `pagoda bench` of the old binary
# then of the new one, each line tagged with its binary and the 1-minute load average when it started
# (the machine may be shared: a row measured under load says so). Prints the markdown table of
# docs/benchmarks.md (bench/before_after_table.py).
#   bench/run_before_after.sh OLD_PAGODA NEW_PAGODA [MODELDIR] [OUT.jsonl]
# MODELDIR (default build/bench-models) holds PRESET-TYPE.gguf as bench/run_model_benchmarks.sh makes
# them; missing q4_k_m files are quantised from PRESET-f16.gguf with NEW_PAGODA.
# Environment: PRESETS ("small tinyllama"), TYPES ("f16 q8_0 q4_0 q4_k_m"), PP (512), TG (128), REPS (3).
set -euo pipefail
cd "$(dirname "$0")/.."
old=${1:?old pagoda binary}; new=${2:?new pagoda binary}
dir=${3:-build/bench-models}; out=${4:-$dir/before_after.jsonl}
for b in "$old" "$new"; do [ -x "$b" ] || { echo "run_before_after.sh: $b is not an executable" >&2; exit 1; }; done
: > "$out"
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(date -u '+%Y-%m-%d %H:%M') UTC"
for preset in ${PRESETS:-small tinyllama}; do
  for type in ${TYPES:-f16 q8_0 q4_0 q4_k_m}; do
    model="$dir/$preset-$type.gguf"
    if [ ! -f "$model" ]; then
      [ -f "$dir/$preset-f16.gguf" ] || { echo "run_before_after.sh: $model and $dir/$preset-f16.gguf are missing" >&2; exit 1; }
      "$new" quantize "$dir/$preset-f16.gguf" "$model" "$type" >&2
    fi
    for side in old new; do
      bin=$old; [ $side = new ] && bin=$new
      load=$(cut -d' ' -f1 /proc/loadavg)
      echo "### $side $preset $type (load $load)" >&2
      "$bin" bench -m "$model" -p "${PP:-512}" -n "${TG:-128}" -r "${REPS:-3}" --json |
        python3 -c "import json,sys
for l in sys.stdin:
    if l.strip().startswith('{'):
        r = json.loads(l); r.update(side='$side', load=float('$load'), label='$type'); print(json.dumps(r))" | tee -a "$out" >&2
    done
  done
done
python3 bench/before_after_table.py "$out"
