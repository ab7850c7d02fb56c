package io.cloudprofiler;

import java.io.File;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/**
 * Loads libcloudprofiler_jni once per JVM, in this order: an explicit path (configuration or the system
 * property {@code cloudprofiler.native.path}), the library bundled in this jar (extracted to a file named
 * after the version), then {@code System.loadLibrary("cloudprofiler_jni")}. Then checks the version.
 */
public final class NativeLoader {
  static final String RESOURCE = "/io/cloudprofiler/native/linux-x86_64/libcloudprofiler_jni.so";
  private static boolean loaded;
  private static String failure;

  private NativeLoader() {}

  /** Loads the library; returns null on success, else the reason (also on later calls). */
  public static synchronized String load(String explicitPath) {
    if (loaded) return null;
    if (failure != null) return failure;
    String path = explicitPath != null && !explicitPath.isEmpty() ? explicitPath : System.getProperty("cloudprofiler.native.path");
    try {
      if (path != null && !path.isEmpty()) {
        System.load(new File(path).getAbsolutePath());
      } else if (NativeLoader.class.getResource(RESOURCE) != null) {
        System.load(extract().toString());
      } else {
        System.loadLibrary("cloudprofiler_jni");
      }
      int version = CloudProfiler.version();
      if (version / 100 != CloudProfiler.VERSION_NUMBER / 100) {
        failure = "libcloudprofiler version number " + version + " does not match the plugin's "
            + CloudProfiler.VERSION_NUMBER + ": use the jar and library of one build";
        return failure;
      }
      loaded = true;
      return null;
    } catch (Throwable t) { // UnsatisfiedLinkError or an IO failure: report the first one, do not retry
      failure = "cannot load libcloudprofiler_jni" + (path != null ? " from " + path : "") + ": " + t
          + " (set spark.cloudprofiler.native.path to a libcloudprofiler_jni.so built for this platform)";
      return failure;
    }
  }

  public static synchronized boolean isLoaded() {
    return loaded;
  }

  private static Path extract() throws Exception {
    Path dir = Path.of(System.getProperty("java.io.tmpdir"), "cloudprofiler-" + System.getProperty("user.name"));
    Files.createDirectories(dir);
    Path target = dir.resolve("libcloudprofiler_jni-" + CloudProfiler.VERSION_NUMBER + "-" + ProcessHandle.current().pid() + ".so");
    try (InputStream in = NativeLoader.class.getResourceAsStream(RESOURCE)) {
      Files.copy(in, target, StandardCopyOption.REPLACE_EXISTING);
    }
    target.toFile().deleteOnExit();
    return target;
  }
}
