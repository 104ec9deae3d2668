"""Time to first token of one streamed completion, for the bench scripts (imported with PYTHONPATH=bench).

ttft(port, model) sends a 4-token greedy completion ("Once upon a time", max_tokens 4, streamed) to
the server on 127.0.0.1:port and returns the seconds until the first SSE event that carries text."""
import http.client
import json
import sys
import time


def ttft(port, model):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    body = json.dumps({"model": model, "prompt": "Once upon a time", "max_tokens": 4, "temperature": 0,
                       "stream": True, "ignore_eos": True})
    t0 = time.perf_counter()
    c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    while line := r.readline():
        if line.startswith(b"data: {") and b'"text":"' in line and b'"text":""' not in line:
            t = time.perf_counter() - t0
            r.read()
            c.close()
            return t
    sys.exit("no token: " + r.read().decode())
