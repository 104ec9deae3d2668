#!/usr/bin/env bash
# pp512 / tg128 for one random-weight model of each architecture at the `small` shape (12 layers,
# dim 768, 12 heads, FFN 2048, the llama-spm vocabulary when ../shared is there), quantised to
# Q4_K_M, in one run (the MoE forms: 8 experts, top 2, expert FFN 1024 — qwen2moe adds its shared
# expert of 2048; the 2026 families' MoE forms likewise 8 experts, top 2, expert FFN 1024). Prints a
# markdown table with each run's own limits (bench --json).
#   bench/run_arch_benchmarks.sh [OUT_DIR]     env: ARCHS="llama qwen3 ..." TYPE=q4_k_m THREADS=2 REPS=1
# ARCHS=new: the 2026 families (qwen35 qwen35moe qwen3next gemma4 gpt-oss deepseek2 glm4moe glm4
# minimax-m2 mistral3 smollm3) beside llama.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-/tmp/pagoda-arch-bench}
mkdir -p "$dir"
bin=${PAGODA_BIN:-build/pagoda}
archs=${ARCHS:-llama qwen2 qwen3 qwen2moe qwen3moe gemma2 gemma3 phi3}
[ "$archs" = new ] && archs="llama qwen35 qwen35moe qwen3next gemma4 gpt-oss deepseek2 glm4moe glm4 minimax-m2 mistral3 smollm3"
type=${TYPE:-q4_k_m} threads=${THREADS:-2} reps=${REPS:-1}
vocab=()
[ -f ../shared/vocab/ggml-vocab-llama-spm.gguf ] && vocab=(--vocab ../shared/vocab/ggml-vocab-llama-spm.gguf)
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(date -u '+%Y-%m-%d %H:%M UTC'); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "command: pagoda bench -m MODEL -p 512 -n 128 -r $reps -t $threads --json"
echo
echo "| arch | size MiB | pp512 tok/s | of int8 peak | tg128 tok/s | of bound (GB/s) |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
for a in $archs; do
  extra=()
  case $a in
    qwen2moe|qwen3moe|qwen35moe|qwen3next|gpt-oss|glm4moe|minimax-m2) extra=(--experts 8 --experts-used 2 --expert-ffn-dim 1024) ;;
    deepseek2) extra=(--experts 8 --experts-used 2 --expert-ffn-dim 1024 --kv-lora-rank 256 --mla-rope-dims 32) ;;
  esac
  f16=$dir/$a-f16.gguf q=$dir/$a-$type.gguf
  [ -f "$f16" ] || $bin gen-model --preset small --arch "$a" --type f16 "${vocab[@]}" "${extra[@]}" -o "$f16" >/dev/null
  [ -f "$q" ] || $bin quantize "$f16" "$q" "$type" >/dev/null
  $bin bench -m "$q" -p 512 -n 128 -r "$reps" -t "$threads" --json 2>/dev/null | python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.startswith("{")]
pp = next(r for r in rows if r["test"].startswith("pp"))
tg = next(r for r in rows if r["test"].startswith("tg"))
size, pps, ppr = pp["model_bytes"] / 2**20, pp["tokens_per_s"], 100 * pp["ratio_to_limit"]
tgs, tgr, bw = tg["tokens_per_s"], 100 * tg["ratio_to_limit"], tg["bandwidth_gbps"]
arch = sys.argv[1]
print(f"| {arch} | {size:.1f} | {pps:.1f} | {ppr:.0f} % | {tgs:.1f} | {tgr:.0f} % ({bw:.1f}) |")
' "$a"
done
