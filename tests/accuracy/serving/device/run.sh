#!/bin/bash
# On the device: build llama.cpp (CUDA, sm_90) once, then run the cases; logs to $OUT.
cd "$(dirname "$0")"
B=build
if [ ! -x $B/bin/llama-completion ] || [ ! -x $B/bin/llama-fit-params ] || [ ! -x $B/bin/llama-bench ]; then
  if [ ! -f $B/build.ninja ]; then
    cmake -S src -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DLLAMA_BUILD_APP=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
      -DLLAMA_BUILD_SERVER=OFF -DGGML_NATIVE=OFF > /tmp/cfg.log 2>&1 || { tail -30 /tmp/cfg.log; exit 1; }
  fi
  timeout ${BUILD_S:-520} cmake --build $B -j16 --target llama-completion llama-fit-params llama-bench > /tmp/build.log 2>&1
  echo "build rc=$?"; tail -3 /tmp/build.log
  [ -x $B/bin/llama-completion ] || exit 3
fi
nvidia-smi --query-gpu=name,memory.total,memory.used,memory.free --format=csv > $OUT/gpu.txt
mkdir -p /tmp/g
for s in specs/*.json; do n=$(basename $s .json); [ -f /tmp/g/$n.gguf ] || python3 mk_gguf.py /tmp/g/$n.gguf $s; done
run() { # name, tool, args...: the log, and the GPU memory nvidia-smi saw at its highest while it ran
  local name=$1; shift; local tool=$1; shift
  if [[ $name == *_dbg ]]; then export GGML_SCHED_DEBUG=1; else unset GGML_SCHED_DEBUG; fi
  ( while true; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits; sleep 0.05; done ) > /tmp/mem.$name &
  local poll=$!
  timeout 120 $B/bin/$tool "$@" > $OUT/$name.log 2>&1; local rc=$?
  kill $poll; wait $poll 2>/dev/null
  echo "$name rc=$rc peak_used_mib=$(sort -n /tmp/mem.$name | tail -1) idle_used_mib=$(sort -n /tmp/mem.$name | head -1)" >> $OUT/rc.txt
}
# "cards" of a given size on whatever GPU this is: --fit-target = free memory less the card's size
FREE=$(nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits | head -1)
FITT_12G=$((FREE - 12288)); FITT_6G=$((FREE - 6144)); FITT_48G=$((FREE - 49152)); FITT_16G=$((FREE - 16384)); FITT_24G=$((FREE - 24576))
echo "free $FREE MiB" >> $OUT/gpu.txt
while read -r name tool args; do
  [ -z "$name" ] && continue
  eval "run $name $tool $args"
done < cases.txt
grep -h -E "model buffer size|KV buffer size|compute buffer size|llama_context: n_ctx  |context size reduced|projected to use|will leave|cannot meet|^-c [0-9]+ -ngl|free device memory" $OUT/*.log | head -150; cat $OUT/gpu.txt $OUT/rc.txt
