#!/bin/bash
# before = /work/bench-omp-refined (503792a, one padded call), after = /work/bench-groups (465be5b, groups)
LOG=/tmp/g/calls.csv
echo "utc,side,round,part,load_before,load_after,seconds,rc" > $LOG
call() { # side round part args...
  side=$1; r=$2; part=$3; shift 3
  dir=/work/bench-omp-refined; [ $side = after ] && dir=/work/bench-groups
  l0=$(cut -d' ' -f1 /proc/loadavg); t0=$(date +%s)
  (cd $dir && timeout 900 python -m workloads bench "$@" > /tmp/g/$side-$r-$part.out 2> /tmp/g/$side-$r-$part.err)
  rc=$?
  echo "$(date -u +%H:%M:%S),$side,$r,$part,$l0,$(cut -d' ' -f1 /proc/loadavg),$(( $(date +%s) - t0 )),$rc" >> $LOG
}
for r in 0 1; do
  call after $r padding --parts forward-cost --forward-cost-measures padding --forward-cost-round $r --forward-cost-csv /tmp/g/padding.csv --out /tmp/g/pad-$r
done
for r in 0 1; do
  if [ $r = 0 ]; then order="before after"; else order="after before"; fi
  for side in $order; do
    call $side $r load --parts load --load-loads 1,4,16 --load-engines ar,baseline,pd,pdv --out /tmp/g/load-$side-$r --conditions "shared 2-core machine; nothing else running; load recorded per call"
  done
done
echo finished >> $LOG
