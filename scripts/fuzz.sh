#!/usr/bin/env bash
# Fuzzes the GGUF reader with libFuzzer (clang, ASan + UBSan) in build-fuzz/.
#   scripts/fuzz.sh --smoke        bounded run (~40 s of fuzzing) used by scripts/test.sh
#   scripts/fuzz.sh [--seconds N]  long run (default 3600 s); the corpus persists between runs
# Seeds: every ../shared/**/*.gguf fixture (when present) plus small hand-made files written here.
# Exits non-zero when the fuzzer finds a crash, leak, timeout or memory blow-up; the reproducer is
# saved under build-fuzz/artifacts/ (replay: build-fuzz/fuzz/gguf_reader_fuzz FILE).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=3600
smoke=0
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) smoke=1; seconds=40; shift ;;
    --seconds) seconds="${2:?--seconds needs a value}"; shift 2 ;;
    *) echo "usage: $0 [--smoke | --seconds N]" >&2; exit 2 ;;
  esac
done

if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found (scripts/install-deps.sh installs it)" >&2
  exit 1
fi

build=build-fuzz
echo "fuzz: building gguf_reader_fuzz in $build/"
mkdir -p "$build"
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DPAGODA_FUZZ=ON -DPAGODA_TESTS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build/configure.log" 2>&1 || { cat "$build/configure.log" >&2; exit 1; }
cmake --build "$build" --target gguf_reader_fuzz -- -j"${PAGODA_JOBS:-2}" >"$build/build.log" 2>&1 \
  || { tail -n 40 "$build/build.log" >&2; exit 1; }
fuzzer="$build/fuzz/gguf_reader_fuzz"

corpus="$build/corpus-work/gguf"
seeds="$build/seeds/gguf"
artifacts="$build/artifacts"
mkdir -p "$corpus" "$seeds" "$artifacts"

fixtures="${PAGODA_FIXTURES:-../shared}"
if [ -d "$fixtures" ]; then
  n=0
  while IFS= read -r -d '' f; do
    ln -sf "$(realpath "$f")" "$seeds/fixture-$(basename "$f")"
    n=$((n + 1))
  done < <(find "$fixtures/" -name '*.gguf' -type f -print0)
  echo "fuzz: $n fixture seeds from $fixtures"
else
  echo "fuzz: no fixtures folder at $fixtures; using only the hand-made seeds"
fi

# Small hand-made seeds covering every value type, nested arrays, alignment and quantised tensors.
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
}
for name, data in files.items():
    with open(os.path.join(out, name), 'wb') as f: f.write(data)
PY

log="$build/fuzz.log"
echo "fuzz: running for ${seconds}s (log: $log)"
set +e
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
"$fuzzer" "$corpus" "$seeds" -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=1024 \
  -max_len=1048576 -timeout=10 -print_final_stats=1 -artifact_prefix="$artifacts/" >"$log" 2>&1
status=$?
set -e
if [ $status -ne 0 ]; then
  echo "fuzz: FAILED (exit $status); reproducer in $artifacts/" >&2
  tail -n 60 "$log" >&2
  exit 1
fi
echo "fuzz: ok — $(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' || echo '?') inputs, corpus $(ls "$corpus" | wc -l) files"
