#!/usr/bin/env bash
# Time to first token of a chat request with an image (`serve --mmproj`), cold (a new picture each
# time) against a hit (the same picture again: the prefix cache, and with --image-cache-mb the
# encoded-image cache, which skips the vision tower): bench/image_ttft.sh PATH/TO/pagoda [N]
# Writes random Gemma 3 text models (2 layers, dim 64) with random projectors of 64x64 (16 image
# tokens) and 256x256 (256 tokens) images, serves each with one thread (encoded-image cache off,
# then on: --image-cache-mb 0 and 256), and sends N streamed chat
# requests of each kind with a 640x480 PNG data: URL (max_tokens 2); prints the median TTFT (client
# side: JSON, image decode, the vision tower, prefill, first token) and the prompt's cached tokens.
set -euo pipefail
pagoda="${1:?usage: image_ttft.sh PATH/TO/pagoda [N]}"
n="${2:-20}"
dir=$(mktemp -d)
trap 'kill "${pid:-0}" 2>/dev/null || true; rm -rf "$dir"' EXIT
cat > "$dir/ttft.py" <<'PY'
import base64, http.client, json, statistics, struct, sys, time, zlib
port, model, n, label = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
def png(w, h, s):
    raw = b"".join(b"\0" + bytes(v for x in range(w) for v in ((x * 29 + s) & 255, (y * 41 + s) & 255, s)) for y in range(h))
    ch = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    return b"\x89PNG\r\n\x1a\n" + ch(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + ch(b"IDAT", zlib.compress(raw)) + ch(b"IEND", b"")
def ttft(shade):
    url = "data:image/png;base64," + base64.b64encode(png(640, 480, shade)).decode()
    body = json.dumps({"model": model, "max_tokens": 2, "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True},
                       "messages": [{"role": "user", "content": [{"type": "text", "text": "What is in this picture?"},
                                                                 {"type": "image_url", "image_url": {"url": url}}]}]})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    t0 = time.perf_counter()
    c.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    first, cached = None, None
    for line in r:
        if not line.startswith(b"data: {"): continue
        ev = json.loads(line[6:])
        if first is None and ev.get("choices") and ev["choices"][0]["delta"].get("content") is not None:
            first = time.perf_counter() - t0
        if ev.get("usage"): cached = (ev["usage"]["prompt_tokens_details"]["cached_tokens"], ev["usage"]["prompt_tokens"])
    return first * 1000, cached
ttft(255)
cold = [ttft(i * 7 % 250) for i in range(n)]
hit = [ttft(3) for _ in range(n)]
print(f"{model} {label}: cold {statistics.median(t for t, _ in cold):.1f} ms (cached {cold[-1][1][0]} of {cold[-1][1][1]}), "
      f"hit {statistics.median(t for t, _ in hit):.1f} ms (cached {hit[-1][1][0]} of {hit[-1][1][1]})")
PY
for size in 64 256; do
 for cache in 0 256; do
  "$pagoda" gen-model --arch gemma3 --layers 2 --dim 64 --heads 4 --kv-heads 2 -o "$dir/img$size.gguf" \
    --mmproj "$dir/mm$size.gguf" --mmproj-image-size "$size" >/dev/null 2>&1
  "$pagoda" serve -m "$dir/img$size.gguf" --mmproj "$dir/mm$size.gguf" --chat-template gemma3 --port 0 -t 1 \
    --image-cache-mb "$cache" \
    2>"$dir/serve.log" & pid=$!
  port=""
  for _ in $(seq 200); do
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$dir/serve.log" | head -1)
    [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
    sleep 0.1
  done
  python3 "$dir/ttft.py" "$port" "img$size" "$n" "image-cache-mb=$cache"
  kill "$pid"; wait "$pid" 2>/dev/null || true
 done
done
