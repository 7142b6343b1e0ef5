#!/bin/bash
# before (8fc9d76) and after (e197c1f: plain steps settled) the settle change: suffix and ar, alternating sides
W=runs/suffix-bench/suffix/warmup.json
for side in before after; do mkdir -p runs/settle/$side/suffix runs/settle/$side-low/suffix; cp $W runs/settle/$side/suffix/; cp $W runs/settle/$side-low/suffix/; done
LOG=runs/settle/calls.csv; echo "utc_end,side,call,round,load_before,load_after,seconds,rc" > $LOG
clone() { [ $1 = before ] && echo <clone at 8fc9d76> || echo <clone at e197c1f>; }
call() {  # side kind round
  local side=$1 kind=$2 r=$3 l0=$(cut -d' ' -f1 /proc/loadavg) t0=$(date +%s)
  if [ $kind = c16 ]; then
    (cd $(clone $side) && timeout 1200 python -m workloads bench --parts suffix --out runs/settle/$side --suffix-warmup 300 --suffix-prompts 12 \
       --suffix-rounds $r --suffix-sets sharegpt,mt-bench,coding --suffix-loads 16 --suffix-setups ar,suffix > runs/settle/$side-$kind-$r.out 2> runs/settle/$side-$kind-$r.err)
  else
    (cd $(clone $side) && timeout 1200 python -m workloads bench --parts suffix --out runs/settle/$side-low --suffix-warmup 300 --suffix-prompts 12 \
       --suffix-rounds $r --suffix-sets sharegpt --suffix-loads 1,4 --suffix-setups ar,suffix > runs/settle/$side-$kind-$r.out 2> runs/settle/$side-$kind-$r.err)
  fi
  echo "$(date -u +%H:%M:%S),$side,$kind,$r,$l0,$(cut -d' ' -f1 /proc/loadavg),$(( $(date +%s) - t0 )),$?" >> $LOG
}
for r in 0 1 2 3; do
  if [ $((r % 2)) = 0 ]; then a=before; b=after; else a=after; b=before; fi
  call $a c16 $r; call $b c16 $r
done
for r in 0 1; do
  if [ $((r % 2)) = 0 ]; then a=after; b=before; else a=before; b=after; fi
  call $a low $r; call $b low $r
done
echo finished >> $LOG
