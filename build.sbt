// `sbt +package` builds target/scala-<v>/cloudprofiler-plugin_<v>-<version>.jar for each Scala binary version v,
// 2.13 (Spark 4) and 2.12 (Spark 3.5), the same jars as jvm-plugin/build.sh: the plugin's Java classes (those of
// jvm-plugin/src/main/java and the version's shim, jvm-plugin/src/main/scala-<v>) and libcloudprofiler_jni.so (built
// by jvm-plugin/build-jni.sh, which needs gcc, make and libzstd-dev) as a resource. `sbt package` builds the 2.13 one,
// `sbt ++2.12 package` the 2.12 one.
//
// Spark is a provided dependency, resolved from Maven Central at version `-Dspark.version=...` (default below, per
// Scala version), unless `-Dspark.jars.dir=<folder>` names the jars of an installed Spark (for example pyspark's
// `jars/`; build one Scala version then): the classes compile against those jars, as build.sh does, and nothing of
// Spark is downloaded.
import scala.sys.process._

name := "cloudprofiler-plugin"
version := IO.read(baseDirectory.value / "VERSION").trim
organization := "io.cloudprofiler"
autoScalaLibrary := false
crossScalaVersions := Seq("2.13.16", "2.12.18")
scalaVersion := crossScalaVersions.value.head

val defaultSparkVersion = Map("2.13" -> "4.2.0", "2.12" -> "3.5.9")
val sparkJarsDir = sys.props.get("spark.jars.dir").filter(_.nonEmpty).map(file)

Compile / javaSource := baseDirectory.value / "jvm-plugin" / "src" / "main" / "java"
Compile / resourceDirectory := baseDirectory.value / "jvm-plugin" / "src" / "main" / "resources"
Compile / unmanagedSourceDirectories += baseDirectory.value / "jvm-plugin" / "src" / "main" /
  s"scala-${scalaBinaryVersion.value}"
Compile / compile / javacOptions ++= Seq("--release", "17", "-Xlint:all,-processing,-serial", "-Werror", "-nowarn")
Compile / doc / javacOptions ++= Seq("--release", "17")

libraryDependencies ++= {
  val sparkVersion = sys.props.getOrElse("spark.version", defaultSparkVersion(scalaBinaryVersion.value))
  if (sparkJarsDir.isDefined) Nil else Seq(
    "org.apache.spark" %% "spark-core" % sparkVersion % Provided,
    "org.apache.spark" %% "spark-sql" % sparkVersion % Provided
  )
}
Compile / unmanagedJars ++= sparkJarsDir.toSeq.flatMap(dir => (dir * "*.jar").classpath)

// The JNI library, built from jvm-plugin/src/main/native and native/ into the jar's resources.
Compile / resourceGenerators += Def.task {
  val root = baseDirectory.value
  val so = (Compile / resourceManaged).value / "io" / "cloudprofiler" / "native" / "linux-x86_64" / "libcloudprofiler_jni.so"
  val log = streams.value.log
  val rc = Process(Seq("bash", (root / "jvm-plugin" / "build-jni.sh").getPath, so.getPath), root) ! log
  if (rc != 0) sys.error(s"jvm-plugin/build-jni.sh failed with exit code $rc")
  Seq(so)
}.taskValue

// The declarations the Python side reads from the jar, written by the compiled classes as build.sh writes them: the
// option table (Config.java) and the tables' file names and schemas (Tables.java).
Compile / resourceGenerators += Def.task {
  (Compile / compile).value
  val classpath = ((Compile / classDirectory).value +: (Compile / dependencyClasspath).value.files).mkString(":")
  val folder = (Compile / resourceManaged).value / "io" / "cloudprofiler" / "spark"
  val log = streams.value.log
  IO.createDirectory(folder)
  Seq("Config" -> "options.json", "Tables" -> "tables.json").map { case (declaration, name) =>
    val json = folder / name
    val rc = Process(Seq("java", "-cp", classpath, s"io.cloudprofiler.spark.$declaration", json.getPath)) ! log
    if (rc != 0) sys.error(s"io.cloudprofiler.spark.$declaration failed with exit code $rc writing $name")
    json
  }
}.taskValue
