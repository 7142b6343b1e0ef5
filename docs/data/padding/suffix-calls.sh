#!/bin/bash
# MT-Bench at C = 16 (32 prompts), ar and suffix: before (503792a) vs after (465be5b), 3 rounds, order alternating
LOG=/tmp/g/sfx/calls.csv; mkdir -p /tmp/g/sfx
echo "utc,side,round,load_before,load_after,seconds,rc" > $LOG
for r in 0 1 2; do
  if [ $((r % 2)) = 0 ]; then order="before after"; else order="after before"; fi
  for side in $order; do
    dir=/work/bench-omp-refined; [ $side = after ] && dir=/work/bench-groups
    out=/tmp/g/sfx/$side-$r; mkdir -p $out/suffix; cp /work/bench-final/runs/suffix-bench/suffix/warmup.json $out/suffix/
    l0=$(cut -d' ' -f1 /proc/loadavg); t0=$(date +%s)
    (cd $dir && timeout 900 python -m workloads bench --parts suffix --out $out --suffix-warmup 300 --suffix-prompts 12 --suffix-rounds 1 --suffix-sets mt-bench --suffix-loads 16 --suffix-setups ar,suffix > $out.out 2> $out.err)
    rc=$?
    echo "$(date -u +%H:%M:%S),$side,$r,$l0,$(cut -d' ' -f1 /proc/loadavg),$(( $(date +%s) - t0 )),$rc" >> $LOG
  done
done
echo finished >> $LOG
