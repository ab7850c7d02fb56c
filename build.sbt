// `sbt package` builds target/cloudprofiler-plugin-<version>.jar, the same jar as jvm-plugin/build.sh: the
// plugin's Java classes and libcloudprofiler_jni.so (built by jvm-plugin/build-jni.sh, which needs gcc,
// make and libzstd-dev) as a resource.
//
// Spark is a provided dependency, resolved from Maven Central at version `-Dspark.version=...` (default below),
// unless `-Dspark.jars.dir=<folder>` names the jars of an installed Spark (for example pyspark's `jars/`): then
// the classes compile against those jars, as build.sh does, and nothing of Spark is downloaded.
import scala.sys.process._

name := "cloudprofiler-plugin"
version := IO.read(baseDirectory.value / "VERSION").trim
organization := "io.cloudprofiler"
crossPaths := false
autoScalaLibrary := false
scalaVersion := "2.13.16"

val sparkVersion = sys.props.getOrElse("spark.version", "4.2.0")
val sparkJarsDir = sys.props.get("spark.jars.dir").filter(_.nonEmpty).map(file)

Compile / javaSource := baseDirectory.value / "jvm-plugin" / "src" / "main" / "java"
Compile / compile / javacOptions ++= Seq("--release", "17", "-Xlint:all,-processing,-serial", "-Werror", "-nowarn")
Compile / doc / javacOptions ++= Seq("--release", "17")

libraryDependencies ++= (if (sparkJarsDir.isDefined) Nil else Seq(
  "org.apache.spark" % "spark-core_2.13" % sparkVersion % Provided,
  "org.apache.spark" % "spark-sql_2.13" % sparkVersion % Provided
))
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
