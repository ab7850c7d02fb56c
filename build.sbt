// Builds the same plugin classes as jvm-plugin/build.sh, for sbt users: `sbt package`.
// The JNI library is built by jvm-plugin/build.sh (or `make build`) and added as a resource when present.
name := "cloudprofiler-plugin"
version := "0.1.0"
organization := "io.cloudprofiler"
crossPaths := false
autoScalaLibrary := false
scalaVersion := "2.13.16"
javacOptions ++= Seq("--release", "17")
Compile / javaSource := baseDirectory.value / "jvm-plugin" / "src" / "main" / "java"
Compile / unmanagedResourceDirectories += baseDirectory.value / "jvm-plugin" / "build" / "resources"
libraryDependencies ++= Seq(
  "org.apache.spark" %% "spark-core" % "4.1.0" % Provided cross CrossVersion.for3Use2_13,
  "org.apache.spark" %% "spark-sql" % "4.1.0" % Provided cross CrossVersion.for3Use2_13
)
