#!/usr/bin/env bash
# One inference-perf run against a local vLLM (tools/make_tbt_logs.py runs it with INFERENCE_PERF naming
# this script). usage: inference_perf_phase.sh PORT MODEL_DIR OUT_DIR   (INFERENCE_PERF_BIN: the executable)
set -euo pipefail
port="$1" model="$2" out="$3"
mkdir -p "$out/inference-perf"
cfg="$out/inference-perf/config.yml"
cat > "$cfg" <<YAML
api:
  type: completion
  streaming: true
data:
  type: random
  input_distribution: {min: 150, max: 450, mean: 300, std_dev: 80, total_count: 60}
  output_distribution: {min: 128, max: 384, mean: 256, std_dev: 60, total_count: 60}
load:
  type: concurrent
  stages:
    - {num_requests: 60, concurrency_level: 3}
server:
  type: vllm
  model_name: small-llama
  base_url: http://127.0.0.1:$port
  ignore_eos: true
tokenizer:
  pretrained_model_name_or_path: $model
storage:
  local_storage:
    path: $out/inference-perf
YAML
"${INFERENCE_PERF_BIN:-inference-perf}" -c "$cfg" </dev/null
