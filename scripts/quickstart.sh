#!/usr/bin/env bash
# The README's first command: installs what building and running need (no test servers, browser or
# Node.js: scripts/test.sh installs those), builds pagoda, and generates text.
#   scripts/quickstart.sh [MODEL.gguf] [PROMPT]
# Without a model it writes a small random-weight model with `pagoda gen-model` (its text is
# gibberish, but every part of the engine runs) and generates from that.
set -euo pipefail
cd "$(dirname "$0")/.."
PAGODA_DEPS=build bash scripts/install-deps.sh
bash scripts/build.sh
MODEL=${1:-}
PROMPT=${2:-Once upon a time}
if [ -z "$MODEL" ]; then
  MODEL=build/quickstart-random.gguf
  VOCAB=../shared/vocab/ggml-vocab-llama-spm.gguf
  VOCAB_ARG=()
  if [ -f "$VOCAB" ]; then VOCAB_ARG=(--vocab "$VOCAB"); fi
  echo "pagoda quickstart: no model given; writing a random-weight model to $MODEL (its text is gibberish)" >&2
  build/pagoda gen-model --preset tiny "${VOCAB_ARG[@]}" -o "$MODEL"
fi
build/pagoda run -m "$MODEL" -p "$PROMPT" -n 64
echo
