#!/usr/bin/env bash
# Builds jvm-plugin/build/cloudprofiler-plugin_<Scala binary version>.jar: the plugin classes compiled with javac
# against the jars of the installed pyspark (Spark 3.5: Scala 2.12, Spark 4: Scala 2.13; the sources of
# src/main/java and the Scala version's shim, src/main/scala-<version>), and libcloudprofiler_jni.so (JNI glue + the
# static native library) as a resource. `sbt +package` builds the same jars (build.sbt). Beside it,
# cloudprofiler-bench.jar: the JNI benchmark (src/bench), run with a plugin jar on its class path.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
python=${PYTHON:-$root/.venv/bin/python}
spark_jars=$("$python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
scala_library=$(cd "$spark_jars" && ls scala-library-*.jar)
scala=$(echo "$scala_library" | sed -E 's/^scala-library-([0-9]+[.][0-9]+)[.].*/\1/')
if [ ! -d "$here/src/main/scala-$scala" ]; then
  echo "build.sh: $spark_jars has Scala $scala; the plugin builds for Scala 2.12 (Spark 3.5) and 2.13 (Spark 4)" >&2
  exit 1
fi
out=$here/build
classes=$out/classes-$scala
rm -rf "$classes" && mkdir -p "$classes"
cp -R "$here/src/main/resources/." "$classes/"  # the data source's registration (META-INF/services)
bash "$here/build-jni.sh" "$classes/io/cloudprofiler/native/linux-x86_64/libcloudprofiler_jni.so"
javac --release 17 -Xlint:all,-processing,-serial -Werror -nowarn -cp "$spark_jars/*" -d "$classes" \
  $(find "$here/src/main/java" "$here/src/main/scala-$scala" -name '*.java')
# the option table, declared in Config.java, for the Python helper (cloudprofiler.spark reads it from the jar)
java -cp "$classes:$spark_jars/*" io.cloudprofiler.spark.Config "$classes/io/cloudprofiler/spark/options.json"
# the tables' file names and schemas, each declared beside its writer, for the Python analysis (cloudprofiler.tables)
java -cp "$classes:$spark_jars/*" io.cloudprofiler.spark.Tables "$classes/io/cloudprofiler/spark/tables.json"
rm -rf "$out/bench-classes" && mkdir -p "$out/bench-classes"
javac --release 17 -Xlint:all,-processing,-serial -Werror -nowarn -cp "$classes" -d "$out/bench-classes" \
  $(find "$here/src/bench/java" -name '*.java')
# written aside and renamed: a running JVM that has the old jar open keeps reading the old file
for name in plugin_$scala bench; do
  from=$classes; [ "$name" = bench ] && from=$out/bench-classes
  jar --create --file "$out/cloudprofiler-$name.jar.tmp" -C "$from" .
  mv -f "$out/cloudprofiler-$name.jar.tmp" "$out/cloudprofiler-$name.jar"
  echo "built $out/cloudprofiler-$name.jar"
done
