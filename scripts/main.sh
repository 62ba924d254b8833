#!/usr/bin/env bash
# The main job: build df, compile the bundled example programs through
# df-opt and print what they hold.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$root/build" -j "$(nproc)" >/dev/null
for ex in "$root"/examples/seed/*.mlir; do
  echo "== ${ex#$root/}"
  "$root/build/bin/df-opt" "$ex" | "$root/build/bin/df-translate" --df-program-dump
done
