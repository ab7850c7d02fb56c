#!/usr/bin/env bash
# Builds jvm-plugin/build/cloudprofiler-plugin.jar: the plugin classes compiled with javac against the jars of
# the installed pyspark, and libcloudprofiler_jni.so (JNI glue + the static native library) as a resource.
# `sbt package` builds the same jar (build.sbt). Beside it, cloudprofiler-bench.jar: the JNI benchmark
# (src/bench), run with the plugin jar on its class path.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
python=${PYTHON:-$root/.venv/bin/python}
spark_jars=$("$python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
out=$here/build
rm -rf "$out/classes" && mkdir -p "$out/classes"
bash "$here/build-jni.sh" "$out/classes/io/cloudprofiler/native/linux-x86_64/libcloudprofiler_jni.so"
javac --release 17 -Xlint:all,-processing,-serial -Werror -nowarn -cp "$spark_jars/*" -d "$out/classes" \
  $(find "$here/src/main/java" -name '*.java')
# the option table, declared in Config.java, for the Python helper (cloudprofiler.spark reads it from the jar)
java -cp "$out/classes:$spark_jars/*" io.cloudprofiler.spark.Config "$out/classes/io/cloudprofiler/spark/options.json"
rm -rf "$out/bench-classes" && mkdir -p "$out/bench-classes"
javac --release 17 -Xlint:all,-processing,-serial -Werror -nowarn -cp "$out/classes" -d "$out/bench-classes" \
  $(find "$here/src/bench/java" -name '*.java')
# written aside and renamed: a running JVM that has the old jar open keeps reading the old file
for name in plugin bench; do
  classes=$out/classes; [ "$name" = bench ] && classes=$out/bench-classes
  jar --create --file "$out/cloudprofiler-$name.jar.tmp" -C "$classes" .
  mv -f "$out/cloudprofiler-$name.jar.tmp" "$out/cloudprofiler-$name.jar"
  echo "built $out/cloudprofiler-$name.jar"
done
