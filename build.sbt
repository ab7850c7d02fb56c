// Compiles the plugin's Java classes for sbt users (`sbt package`). The distributed jar, which also carries
// libcloudprofiler_jni.so, is built by jvm-plugin/build.sh (`make build`).
name := "cloudprofiler-plugin"
version := "0.1.0"
organization := "io.cloudprofiler"
crossPaths := false
autoScalaLibrary := false
scalaVersion := "2.13.16"
javacOptions ++= Seq("--release", "17")
Compile / javaSource := baseDirectory.value / "jvm-plugin" / "src" / "main" / "java"
libraryDependencies ++= Seq(
  "org.apache.spark" %% "spark-core" % "4.3.0" % Provided,
  "org.apache.spark" %% "spark-sql" % "4.3.0" % Provided
)
