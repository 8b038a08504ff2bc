#!/usr/bin/env bash
# One AIPerf run against a local vLLM (tools/make_tbt_logs.py runs it with AIPERF naming this script).
# usage: aiperf_phase.sh PORT MODEL_DIR OUT_DIR    (AIPERF_BIN: the aiperf executable)
set -euo pipefail
port="$1" model="$2" out="$3"
"${AIPERF_BIN:-aiperf}" profile --model small-llama --url "http://127.0.0.1:$port" --endpoint-type completions \
  --streaming --concurrency 3 --benchmark-duration 25 --benchmark-grace-period 30 --tokenizer "$model" \
  --isl 300 --osl 128 --extra-inputs ignore_eos:true --use-legacy-max-tokens --random-seed 3 \
  --ui-type none --artifact-dir "$out/aiperf" --export-level records </dev/null
