#!/usr/bin/env bash
# The first light on a GPU in one call: installs nothing, downloads nothing, and writes first-light.json,
# first-light.md, step-costs.json, pdv-trace.json.gz and first-light.log under $OUT (or runs/first-light)
# within the time budget (450 s by default). Extra arguments go to python -m workloads.bench.first_light,
# e.g. --device cpu --tiny for the dry run the test suite runs. See docs/gpu.md.
set -uo pipefail
export FIRST_LIGHT_STARTED="$(date +%s.%N)"  # the budget counts from here, interpreter start-up included
cd "$(dirname "$0")/.."
out="${OUT:-runs/first-light}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -m workloads.bench.first_light --out "$out" "$@" 2>&1 | tee "$out/first-light.log"
