#!/usr/bin/env bash
# The cuda backend's serving path on a real NVIDIA GPU, in one go: the preflight gate's CUDA checks against the real
# nvidia-smi, a serve sweep (two server configs, repeated) and an open-loop capacity search of tiny-llama with the
# neuronpipe server on the GPU (NEURONPIPE_CUDA_SERVER=neuronpipe), nvidia-smi telemetry (power, so energy per
# token), and the report. It prints figures; it asserts nothing (a benchmark, not a test).
#
#   OUT=/tmp/out WHEELS=.whl bash benchmarks/cuda_device_check.sh
#
# WHEELS: a folder of wheels the machine lacks (pydantic, duckdb, boto3 ... for its Python), installed into a
# private target first; unset: the machine's packages are used as they are. Writes into $OUT: nvidia-smi.txt (the
# raw outputs the parsers read), run.log, REPORT.md, results.tgz (the committed store and the report).
# vLLM for CUDA is not used here: its wheel (326 MB for 0.32.0) and the torch build it pins do not travel to a
# machine without a package index; on a GPU box the bootstrap installs it and NEURONPIPE_CUDA_SERVER stays unset.
set -u
OUT=${OUT:-/tmp/neuronpipe-cuda-check}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
work=${WORK:-/tmp/neuronpipe-cuda-run}
rm -rf "$work" && mkdir -p "$work"
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }

stamp "GPU"
{
  echo "### nvidia-smi"; nvidia-smi
  echo "### nvidia-smi -L"; nvidia-smi -L
  echo "### inventory"; nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader,nounits
  echo "### telemetry"; nvidia-smi --query-gpu=index,utilization.gpu,memory.used,memory.total,power.draw \
    --format=csv,noheader,nounits
} > "$OUT/nvidia-smi.txt" 2>&1
cat "$OUT/nvidia-smi.txt"

if [ -n "${WHEELS:-}" ]; then
  stamp "wheels from $WHEELS"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/np-site \
    "$WHEELS"/*.whl || exit 1
  export PYTHONPATH="/tmp/np-site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export NEURONPIPE_CUDA_SERVER=neuronpipe HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 NEURONPIPE_CACHE="$work/cache"
"$PY" -c "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda,
      torch.cuda.is_available() and torch.cuda.get_device_name(0))"

stamp "run (backend detected, server $NEURONPIPE_CUDA_SERVER)"
"$PY" -m control_plane.cli run --local --input examples/run-cuda-serving.json --results "$work/results" \
  --report "$work/report" --no-html --no-live > "$OUT/run.log" 2>&1
rc=$?
stamp "run exited $rc"
tail -n 60 "$OUT/run.log"

stamp "figures"
q() { "$PY" -m control_plane.cli query --results "$work/results" "$1" 2>&1; }
q "SELECT \"check\", status, observed, reason FROM preflight_checks ORDER BY \"check\""
q "SELECT category, name, value FROM provenance WHERE category = 'harness' OR name IN ('torch', 'transformers')"
q "SELECT server_config, input_len || ':' || output_len AS shape, max_concurrency AS conc, repeat_index AS rep,
          valid, round(output_throughput, 1) AS out_tok_s, round(p50_ttft_ms, 2) AS ttft_p50,
          round(p99_ttft_ms, 2) AS ttft_p99, round(p50_tpot_ms, 2) AS tpot_p50, round(p99_tpot_ms, 2) AS tpot_p99
   FROM serving_points WHERE lane = 'serve_sweep' ORDER BY server_config, shape, conc, rep"
q "SELECT server_config, round(energy_span_s, 1) AS span_s, power_samples, round(power_mean_w, 1) AS power_w,
          energy_output_tokens AS tokens, round(energy_per_output_token_j, 3) AS j_per_tok, energy_reason
   FROM point_energy ORDER BY point_id"
q "SELECT server_config, slo_name, max_rate_meeting_slo, lowest_rate_missing_slo, points, stop_reasons,
          round(goodput_tok_s, 1) AS goodput_tok_s, round(p99_ttft_ms, 1) AS p99_ttft, round(p99_tpot_ms, 2) AS p99_tpot,
          round(search_wall_s, 1) AS wall_s FROM report_capacity"
q "SELECT metric, count(*) AS samples, count(value) AS with_value, round(min(value), 1) AS min,
          round(avg(value), 1) AS mean, round(max(value), 1) AS max, any_value(unit) AS unit, any_value(note) AS note
   FROM telemetry GROUP BY metric ORDER BY metric"
cp "$work/report/REPORT.md" "$OUT/REPORT.md" 2>/dev/null
tar -czf "$OUT/results.tgz" -C "$work" results report 2>/dev/null
ls -la "$OUT"
stamp "done"
exit $rc
