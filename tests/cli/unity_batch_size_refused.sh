#!/usr/bin/env bash
# A unity batch size that is not a whole number from 1 up stops the configure, naming the option
# and the value (cmake/UnityBuild.cmake, read in CMake's script mode: nothing is configured); 1 and
# 8 are taken.
#   unity_batch_size_refused.sh CMAKE_COMMAND MODULE
set -u
cmake_command="$1" module="$2"
for value in 0 -1 abc '' 1.5; do
  if out=$("$cmake_command" -DMOEBENCH_UNITY_BATCH_SIZE="$value" -P "$module" 2>&1); then
    echo "FAILED: batch size '$value' was taken"
    exit 1
  fi
  grep -q "MOEBENCH_UNITY_BATCH_SIZE: '$value' is not allowed" <<< "$out" ||
    { echo "FAILED: batch size '$value' refused without naming it: $out"; exit 1; }
done
for value in 1 8; do
  "$cmake_command" -DMOEBENCH_UNITY_BATCH_SIZE="$value" -P "$module" || { echo "FAILED: batch size $value refused"; exit 1; }
done
echo "every bad batch size refused, 1 and 8 taken"
