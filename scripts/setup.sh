#!/usr/bin/env bash
# Installs what df needs to build and test, only what is missing; silent
# when everything is present. Safe to run any number of times.
set -euo pipefail

packages=(cmake ninja-build gcc llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
          clang-22 libclang-rt-22-dev libcmocka-dev xxd)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq >/dev/null
  "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Python packages used only by tests (pinned); the bindings need none.
# pip is silent and offline when every pin is already satisfied.
req="$(dirname "$0")/../requirements-test.txt"
if grep -q '^[a-zA-Z]' "$req" 2>/dev/null; then
  python3 -m pip install -q --disable-pip-version-check -r "$req"
fi
