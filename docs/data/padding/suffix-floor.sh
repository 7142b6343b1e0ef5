#!/bin/bash
# the suffix drafter's floor after attention groups (465be5b): ar and suffix at C = 4 and 16 on three sets, 3 rounds
while [ ! -f /tmp/g/ci.end ]; do sleep 10; done
OUT=/tmp/g/floor; mkdir -p $OUT/suffix; cp /work/bench-final/runs/suffix-bench/suffix/warmup.json $OUT/suffix/
LOG=/tmp/g/floor-calls.csv; echo "utc,round,load_before,load_after,seconds,rc" > $LOG
for r in 0 1 2; do
  l0=$(cut -d' ' -f1 /proc/loadavg); t0=$(date +%s)
  (cd /work/bench-groups && timeout 1200 python -m workloads bench --parts suffix --out $OUT --suffix-warmup 300 --suffix-prompts 12 \
     --suffix-rounds $r --suffix-sets sharegpt,mt-bench,coding --suffix-loads 4,16 --suffix-setups ar,suffix > $OUT-$r.out 2> $OUT-$r.err)
  rc=$?
  echo "$(date -u +%H:%M:%S),$r,$l0,$(cut -d' ' -f1 /proc/loadavg),$(( $(date +%s) - t0 )),$rc" >> $LOG
done
echo finished >> $LOG
