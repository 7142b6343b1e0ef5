#!/bin/bash
# the suffix drafter at C = 16 with the arrival phase and the drain recorded (8fc9d76): ar and suffix, three sets, 5 rounds
OUT=runs/suffix-c16; mkdir -p $OUT/suffix; cp runs/suffix-bench/suffix/warmup.json $OUT/suffix/
LOG=runs/suffix-c16-calls.csv; echo "utc,round,load_before,load_after,seconds,rc" > $LOG
for r in 0 1 2 3 4; do
  l0=$(cut -d' ' -f1 /proc/loadavg); t0=$(date +%s)
  (cd <clone at 8fc9d76> && timeout 1200 python -m workloads bench --parts suffix --out $OUT --suffix-warmup 300 --suffix-prompts 12 \
     --suffix-rounds $r --suffix-sets sharegpt,mt-bench,coding --suffix-loads 16 --suffix-setups ar,suffix > $OUT-$r.out 2> $OUT-$r.err)
  rc=$?
  echo "$(date -u +%H:%M:%S),$r,$l0,$(cut -d' ' -f1 /proc/loadavg),$(( $(date +%s) - t0 )),$rc" >> $LOG
done
echo finished >> $LOG
