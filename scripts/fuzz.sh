#!/usr/bin/env bash
# libFuzzer targets (clang, ASan + UBSan) built in build-fuzz/; docs/reliability.md lists what each covers.
#   scripts/fuzz.sh --smoke           replays every kept regression input, then runs every target
#                                     briefly from the seeds; what scripts/test.sh runs. Deterministic:
#                                     a fixed libFuzzer seed and a fixed count of inputs per target
#                                     (~8 s each on the AMX host), so a build in one place gets the
#                                     same verdict on every run (docs/reliability.md says what that
#                                     took); a slow host stops at a time cap, on a prefix of the same
#                                     inputs. Exploring is the long runs' job.
#   scripts/fuzz.sh TARGET SECONDS    runs one target for SECONDS (e.g. `scripts/fuzz.sh gbnf 600`)
#   scripts/fuzz.sh --seconds N       runs every target for N seconds, one after another
#   scripts/fuzz.sh --list            prints the target names
# Corpora: seeds committed under tests/fuzz/corpus/TARGET/ (read-only); what a run discovers is
# kept in build-fuzz/corpus-work/TARGET/ and reused by the next run. Inputs that once crashed live
# under tests/fuzz/regressions/TARGET/ and are replayed (not fuzzed) before every run.
# A crash, leak, timeout (-timeout, s) or memory blow-up fails the run; the reproducer is saved in
# build-fuzz/artifacts/TARGET/ (replay: build-fuzz/fuzz/TARGET_fuzz FILE). Each run appends
# "target mode seconds executions corpus_files result" to build-fuzz/fuzz-stats.tsv.
# Environment: PAGODA_FIXTURES (default ../shared: vocabularies and models the targets load),
# PAGODA_JOBS (build parallelism, default 2), PAGODA_FUZZ_TIMEOUT (per-input seconds, default 25),
# PAGODA_FUZZ_SEED (the smoke's libFuzzer seed, default 1: another value explores other inputs).
set -euo pipefail
cd "$(dirname "$0")/.."

targets=(gguf_reader hf_format lora_adapter image_decode http_request openai_request websocket chat_template model_output tokenizer hf_tokenizer gbnf json_schema profile)
usage() { echo "usage: $0 --smoke | --list | --seconds N | TARGET SECONDS   (targets: ${targets[*]})" >&2; exit 2; }

mode=""
seconds=0
run_targets=()
case "${1:-}" in
  --smoke) mode=smoke; seconds=8; run_targets=("${targets[@]}") ;;
  --list) printf '%s\n' "${targets[@]}"; exit 0 ;;
  --seconds) [ $# -eq 2 ] || usage; mode=long; seconds="$2"; run_targets=("${targets[@]}") ;;
  "") usage ;;
  *)
    [ $# -eq 2 ] || usage
    found=0
    for t in "${targets[@]}"; do [ "$t" = "$1" ] && found=1; done
    [ $found = 1 ] || { echo "fuzz: unknown target '$1' (targets: ${targets[*]})" >&2; exit 2; }
    mode=long; seconds="$2"; run_targets=("$1") ;;
esac
[[ "$seconds" =~ ^[0-9]+$ ]] && [ "$seconds" -gt 0 ] || { echo "fuzz: SECONDS must be a positive integer, got '$seconds'" >&2; exit 2; }
[[ "${PAGODA_FUZZ_SEED:-1}" =~ ^[1-9][0-9]{0,8}$ ]] \
  || { echo "fuzz: PAGODA_FUZZ_SEED must be a positive integer below 10^9, got '${PAGODA_FUZZ_SEED}'" >&2; exit 2; }

if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found (scripts/install-deps.sh installs it)" >&2
  exit 1
fi

build=build-fuzz
fixtures_given="${PAGODA_FIXTURES:-}"
export PAGODA_FIXTURES="${PAGODA_FIXTURES:-$(realpath -m ../shared)}"
echo "fuzz: building ${run_targets[*]} in $build/"
mkdir -p "$build"
# Two runs may start together (one target each): the lock keeps their builds from overlapping.
exec 9>"$build/.build.lock"
flock 9
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DPAGODA_FUZZ=ON -DPAGODA_TESTS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build/configure.log" 2>&1 || { cat "$build/configure.log" >&2; exit 1; }
cmake --build "$build" --target "${run_targets[@]/%/_fuzz}" -- -j"${PAGODA_JOBS:-2}" >"$build/build.log" 2>&1 \
  || { tail -n 40 "$build/build.log" >&2; exit 1; }
flock -u 9

# The GGUF reader's seeds: every fixture file plus hand-made files covering every value type,
# nested arrays, alignment and quantised tensors (written here: *.gguf is not committed).
gguf_seeds() {
  local seeds="$1"
  if [ -d "$PAGODA_FIXTURES" ]; then
    while IFS= read -r -d '' f; do
      ln -sf "$(realpath "$f")" "$seeds/fixture-$(basename "$f")"
    done < <(find "$PAGODA_FIXTURES/" -name '*.gguf' -type f -size -4M -print0)
  fi
  python3 - "$seeds" <<'PY'
import struct, sys, os
out = sys.argv[1]
def s(x): b = x.encode(); return struct.pack('<Q', len(b)) + b
def kv(key, t, payload): return s(key) + struct.pack('<I', t) + payload
def arr(t, items): return struct.pack('<IQ', t, len(items)) + b''.join(items)
def tensor(name, dims, t, off): return s(name) + struct.pack('<I', len(dims)) + b''.join(struct.pack('<q', d) for d in dims) + struct.pack('<IQ', t, off)
def gguf(version, kvs, tensors, data, align=32):
    head = b'GGUF' + struct.pack('<IQQ', version, len(tensors), len(kvs)) + b''.join(kvs) + b''.join(tensors)
    if tensors: head += b'\0' * (-len(head) % align)
    return head + data
values = [
    kv('general.architecture', 8, s('llama')), kv('u8', 0, b'\x07'), kv('i8', 1, b'\xff'),
    kv('u16', 2, struct.pack('<H', 9)), kv('i16', 3, struct.pack('<h', -9)), kv('u32', 4, struct.pack('<I', 5)),
    kv('i32', 5, struct.pack('<i', -5)), kv('f32', 6, struct.pack('<f', 0.5)), kv('bool', 7, b'\x01'),
    kv('u64', 10, struct.pack('<Q', 1 << 40)), kv('i64', 11, struct.pack('<q', -(1 << 40))),
    kv('f64', 12, struct.pack('<d', 1.25)),
    kv('tokens', 9, arr(8, [s('a'), s(''), s('<s>')])),
    kv('nested', 9, arr(9, [arr(5, [struct.pack('<i', 1)]), arr(6, []), arr(9, [arr(8, [s('x')])])])),
]
files = {
    'values.gguf': gguf(3, values, [], b''),
    'v2-vocab.gguf': gguf(2, [kv('tokenizer.ggml.model', 8, s('llama')),
                              kv('tokenizer.ggml.tokens', 9, arr(8, [s('<unk>'), s('<s>'), s('</s>')])),
                              kv('tokenizer.ggml.scores', 9, arr(6, [struct.pack('<f', 0.0)] * 3))], [], b''),
    'tensors.gguf': gguf(3, [kv('general.alignment', 4, struct.pack('<I', 64))],
                         [tensor('a', [4, 2], 0, 0), tensor('b', [32], 2, 64), tensor('c', [256, 1], 12, 128)],
                         bytes(64) + bytes(range(18)) + bytes(46) + bytes(144), align=64),
    # A rank reranker's classification head (model/classifier_head.h): dense F32 + tanh, then an F16
    # output projection to two labelled classes.
    'rank-head.gguf': gguf(3, [kv('general.architecture', 8, s('llama')), kv('llama.embedding_length', 4, struct.pack('<I', 4)),
                               kv('llama.pooling_type', 4, struct.pack('<I', 4)),
                               kv('llama.classifier.output_labels', 9, arr(8, [s('yes'), s('no')]))],
                           [tensor('cls.weight', [4, 4], 0, 0), tensor('cls.bias', [4], 0, 64),
                            tensor('cls.output.weight', [4, 2], 1, 96), tensor('cls.output.bias', [2], 0, 128)],
                           struct.pack('<16f', *[0.25 * (i % 5 - 2) for i in range(16)]) + struct.pack('<4f', 0.1, -0.1, 0.2, 0.0)
                           + bytes(16) + struct.pack('<8e', 0.5, -0.5, 1.0, 0.25, -1.0, 0.75, 0.0, 2.0) + bytes(16)
                           + struct.pack('<2f', 0.3, -0.3)),
}
# A v3 file of F32 tensors (name, dims) after `keys`: small varied values, each offset aligned to 32.
def f32_file(keys, shapes):
    infos, data = [], b''
    for i, (name, dims) in enumerate(shapes):
        count = 1
        for d in dims: count *= d
        infos.append(tensor(name, dims, 0, len(data)))
        data += struct.pack('<%df' % count, *[0.5 + 0.1 * ((i + j) % 7 - 3) for j in range(count)])
        data += bytes(-len(data) % 32)
    return gguf(3, keys, infos, data)
# A minimal Gemma 3 vision projector (llama.cpp's mmproj layout, vision/mmproj.h): 4x4 images of 2x2
# patches, width 2, one layer, every tensor F32 with its offset aligned to 32.
def mmproj():
    keys = [kv('general.architecture', 8, s('clip')), kv('clip.has_vision_encoder', 7, b'\x01'),
            kv('clip.projector_type', 8, s('gemma3'))]
    for key, v in [('image_size', 4), ('patch_size', 2), ('embedding_length', 2), ('feed_forward_length', 2),
                   ('block_count', 1), ('projection_dim', 2), ('attention.head_count', 1), ('projector.scale_factor', 1)]:
        keys.append(kv('clip.vision.' + key, 4, struct.pack('<I', v)))
    keys.append(kv('clip.vision.attention.layer_norm_epsilon', 6, struct.pack('<f', 1e-6)))
    shapes = [('v.patch_embd.weight', [2, 2, 3, 2]), ('v.patch_embd.bias', [2]), ('v.position_embd.weight', [2, 4])]
    for m in ['attn_q', 'attn_k', 'attn_v', 'attn_out', 'ffn_up', 'ffn_down']:
        shapes += [('v.blk.0.%s.weight' % m, [2, 2]), ('v.blk.0.%s.bias' % m, [2])]
    for n in ['v.blk.0.ln1', 'v.blk.0.ln2', 'v.post_ln']:
        shapes += [(n + '.weight', [2]), (n + '.bias', [2])]
    shapes += [('mm.soft_emb_norm.weight', [2]), ('mm.input_projection.weight', [2, 2])]
    return f32_file(keys, shapes)
files['mmproj-gemma3.gguf'] = mmproj()
# A minimal Qwen3-VL projector (qwen3vl_merger): width 4 (one head), 2x2 patches merged 2x2, a 2x2
# position table, one layer that also feeds a deep-stack merger.
def mmproj_qwen3vl():
    keys = [kv('general.architecture', 8, s('clip')), kv('clip.has_vision_encoder', 7, b'\x01'),
            kv('clip.projector_type', 8, s('qwen3vl_merger')),
            kv('clip.vision.is_deepstack_layers', 9, arr(7, [b'\x01']))]
    for key, v in [('image_size', 4), ('patch_size', 2), ('embedding_length', 4), ('feed_forward_length', 2),
                   ('block_count', 1), ('projection_dim', 2), ('attention.head_count', 1), ('spatial_merge_size', 2),
                   ('image_min_pixels', 16), ('image_max_pixels', 64)]:
        keys.append(kv('clip.vision.' + key, 4, struct.pack('<I', v)))
    shapes = [('v.patch_embd.weight', [2, 2, 3, 4]), ('v.patch_embd.weight.1', [2, 2, 3, 4]), ('v.patch_embd.bias', [4]),
              ('v.position_embd.weight', [4, 4]), ('v.blk.0.attn_qkv.weight', [4, 12]), ('v.blk.0.attn_qkv.bias', [12]),
              ('v.blk.0.attn_out.weight', [4, 4]), ('v.blk.0.attn_out.bias', [4]), ('v.blk.0.ffn_up.weight', [4, 2]),
              ('v.blk.0.ffn_up.bias', [2]), ('v.blk.0.ffn_down.weight', [2, 4]), ('v.blk.0.ffn_down.bias', [4])]
    for n in ['v.blk.0.ln1', 'v.blk.0.ln2', 'v.post_ln']:
        shapes += [(n + '.weight', [4]), (n + '.bias', [4])]
    for norm, fc1, fc2, width in [('v.post_ln', 'mm.0', 'mm.2', 0), ('v.deepstack.0.norm', 'v.deepstack.0.fc1', 'v.deepstack.0.fc2', 16)]:
        if width: shapes += [(norm + '.weight', [16]), (norm + '.bias', [16])]
        shapes += [(fc1 + '.weight', [16, 16]), (fc1 + '.bias', [16]), (fc2 + '.weight', [16, 2]), (fc2 + '.bias', [2])]
    return f32_file(keys, shapes)
files['mmproj-qwen3vl.gguf'] = mmproj_qwen3vl()
for name, data in files.items():
    with open(os.path.join(out, name), 'wb') as f: f.write(data)
PY
}

# The smoke's inputs per target: about 8 s of each on the AMX host (2026-12-05).
smoke_runs() {
  case "$1" in
    gguf_reader|chat_template|json_schema) echo 4000 ;;
    gbnf|openai_request) echo 12000 ;;
    hf_tokenizer|websocket) echo 25000 ;;
    profile) echo 70000 ;;
    tokenizer) echo 100000 ;;
    hf_format|http_request) echo 120000 ;;
    *) echo 10000 ;;
  esac
}

max_len() {
  case "$1" in
    gguf_reader) echo 1048576 ;;
    http_request|websocket) echo 65536 ;;
    tokenizer) echo 4096 ;;
    gbnf) echo 8192 ;;
    *) echo 16384 ;;
  esac
}

fuzz_env=(ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1)
# The smoke's inputs must not depend on the run: not on timing, nor on the caller's shell (one
# build in one place gives one sequence of inputs; another place is another binary). Addresses
# reach the coverage libFuzzer steers by (hashes and orders of pointers), so the smoke runs without
# address-space randomisation where the kernel allows it, and with an environment and arguments of
# fixed size: those strings sit at the top of the stack, and one more byte moves every stack address.
launch=(env)
if [ "$mode" = smoke ]; then
  launch=(env -i PATH=/usr/local/bin:/usr/bin:/bin PAGODA_FIXTURES="${fixtures_given:-../shared}")
  if setarch "$(uname -m)" -R true 2>/dev/null; then launch=(setarch "$(uname -m)" -R "${launch[@]}"); fi
fi
timeout_s="${PAGODA_FUZZ_TIMEOUT:-25}"
common=(-rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout="$timeout_s" -print_final_stats=1)
failed=0

# Replays the kept reproducers of past crashes: each must now run clean.
replay_regressions() {
  local t="$1" fuzzer="$2" dir="tests/fuzz/regressions/$1"
  [ -d "$dir" ] || return 0
  local files=("$dir"/*)
  [ -e "${files[0]}" ] || return 0
  if env "${fuzz_env[@]}" "$fuzzer" "${common[@]}" "${files[@]}" >"$build/replay-$t.log" 2>&1; then
    echo "fuzz: $t: ${#files[@]} regression inputs replayed clean"
  else
    echo "fuzz: $t: a regression input fails again (log: $build/replay-$t.log)" >&2
    tail -n 40 "$build/replay-$t.log" >&2
    failed=1
    return 1
  fi
}

run_target() {
  local t="$1" fuzzer="$build/fuzz/${1}_fuzz"
  local corpus="$build/corpus-work/$t" seeds="tests/fuzz/corpus/$t" artifacts="$build/artifacts/$t" log="$build/fuzz-$t.log"
  # The smoke run starts from the committed seeds only, so its length does not grow with the
  # working corpus that long runs leave behind.
  if [ "$mode" = smoke ]; then corpus="$build/smoke-corpus/$t"; log="$build/smoke-$t.log"; rm -rf "$corpus"; fi
  mkdir -p "$corpus" "$artifacts"
  replay_regressions "$t" "$fuzzer" || return 0
  local dirs=("$corpus")
  if [ "$t" = gguf_reader ]; then
    mkdir -p "$build/seeds/gguf_reader"
    gguf_seeds "$build/seeds/gguf_reader"
    dirs+=("$build/seeds/gguf_reader")
  fi
  [ -d "$seeds" ] && dirs+=("$seeds")
  local dict=()
  [ -f "fuzz/dicts/$t.dict" ] && dict=(-dict="fuzz/dicts/$t.dict")
  local limits=(-max_total_time="$seconds")
  [ "$mode" = smoke ] && limits=(-seed="${PAGODA_FUZZ_SEED:-1}" -runs="$(smoke_runs "$t")" -reload=0 -max_total_time=30)
  local started=$SECONDS status=0
  "${launch[@]}" "${fuzz_env[@]}" "$fuzzer" "${dirs[@]}" "${common[@]}" "${dict[@]}" -max_len="$(max_len "$t")" \
    "${limits[@]}" -artifact_prefix="$artifacts/" >"$log" 2>&1 || status=$?
  local execs files
  execs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' || echo '?')
  files=$(find "$corpus" -type f | wc -l)
  local result=ok
  [ $status -eq 0 ] || result="FAILED(exit $status)"
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$mode" "$((SECONDS - started))" "$execs" "$files" "$result" >>"$build/fuzz-stats.tsv"
  if [ $status -ne 0 ]; then
    echo "fuzz: $t FAILED (exit $status); reproducer in $artifacts/ (log: $log)" >&2
    tail -n 60 "$log" >&2
    failed=1
    return 0
  fi
  echo "fuzz: $t ok — $((SECONDS - started)) s, $execs inputs, corpus $files files"
}

for t in "${run_targets[@]}"; do run_target "$t"; done
exit $failed
