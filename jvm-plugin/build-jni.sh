#!/usr/bin/env bash
# Builds libcloudprofiler_jni.so (the JNI glue linked with the static libcloudprofiler) at the path given as
# the first argument. Used by build.sh and by build.sbt, so that both jars carry the same library.
set -euo pipefail
out=${1:?usage: build-jni.sh OUTPUT.so}
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
java_home=${JAVA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")}
mkdir -p "$(dirname "$out")"
make -C "$root/native" --no-print-directory >/dev/null
gcc -O2 -shared -fPIC -fvisibility=hidden -Wall -Wextra -Werror \
  -I"$java_home/include" -I"$java_home/include/linux" -I"$root/native/include" \
  "$here"/src/main/native/*.c "$root/native/build/libcloudprofiler.a" -lzstd -lpthread -lm -o "$out"
