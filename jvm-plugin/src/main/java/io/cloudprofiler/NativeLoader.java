package io.cloudprofiler;

import java.io.File;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.reflect.InvocationTargetException;
import java.nio.channels.Channels;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.OpenOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.UUID;

/**
 * Loads libcloudprofiler_jni once per JVM, trying in this order:
 *
 * <ol>
 *   <li>an explicit path (configuration {@code spark.cloudprofiler.native.path} or the system
 *       property {@code cloudprofiler.native.path});
 *   <li>the library bundled in this jar, extracted into a fresh folder only this user can write
 *       (0700, random name) and loaded once its owner and mode are checked, then removed;
 *   <li>{@code SparkFiles.get("libcloudprofiler_jni.so")}: a library shipped with {@code --files}
 *       (when Spark is in this JVM);
 *   <li>{@code System.loadLibrary("cloudprofiler_jni")} ({@code java.library.path}).
 * </ol>
 *
 * The first that loads wins, then the version is checked. When none loads, the reason of every step
 * is kept in the one failure message, which later calls with the same explicit path return too; a
 * call with another path (the plugin's configured one, after a first call that had none) tries
 * again.
 */
public final class NativeLoader {
  static final String FILE_NAME = "libcloudprofiler_jni.so";
  static final String RESOURCE = "/io/cloudprofiler/native/linux-x86_64/" + FILE_NAME;
  private static boolean loaded;
  private static String source;
  private static String failure;

  /** The explicit path of the call that failed. */
  private static String failedPath;

  private NativeLoader() {}

  /**
   * One way to find the library: returns the path loaded, or throws with the reason it could not.
   */
  private interface Step {
    String load() throws Exception;
  }

  /**
   * Loads the library; returns null on success, else the reason (also on later calls with the same
   * path).
   */
  public static synchronized String load(String explicitPath) {
    String configured =
        explicitPath != null && !explicitPath.isEmpty()
            ? explicitPath
            : System.getProperty("cloudprofiler.native.path");
    if (loaded) return null;
    if (failure != null && Objects.equals(configured, failedPath)) return failure;
    failedPath = configured;
    List<String> reasons = new ArrayList<>();
    String[] names = {"configured path", "jar resource", "SparkFiles", "System.loadLibrary"};
    Step[] steps = {
      () -> loadFile(configured),
      NativeLoader::loadResource,
      NativeLoader::loadSparkFile,
      NativeLoader::loadFromLibraryPath
    };
    for (int i = 0; i < steps.length && source == null; i++) {
      try {
        source = names[i] + " " + steps[i].load();
      } catch (Exception
          | UnsatisfiedLinkError e) { // the reason of this step; the next step is tried
        reasons.add(names[i] + ": " + e.getMessage());
      }
    }
    if (source == null) {
      failure =
          "cannot load libcloudprofiler_jni ("
              + String.join("; ", reasons)
              + "): set "
              + "spark.cloudprofiler.native.path to a "
              + FILE_NAME
              + " built for this platform, or ship one with --files";
      return failure;
    }
    int version = CloudProfiler.version();
    if (version / 100 != CloudProfiler.VERSION_NUMBER / 100) {
      failure =
          "libcloudprofiler version number "
              + version
              + " ("
              + source
              + ") does not match the plugin's "
              + CloudProfiler.VERSION_NUMBER
              + ": use the jar and library of one build";
      return failure;
    }
    loaded = true;
    return null;
  }

  public static synchronized boolean isLoaded() {
    return loaded;
  }

  /**
   * Which step loaded the library and from where (for example "SparkFiles
   * /tmp/.../libcloudprofiler_jni.so").
   */
  public static synchronized String source() {
    return source;
  }

  private static String loadFile(String path) {
    if (path == null || path.isEmpty()) throw new IllegalStateException("not set");
    String absolute = new File(path).getAbsolutePath();
    System.load(absolute);
    return absolute;
  }

  /**
   * Extracts the jar's library into a fresh folder of this user (0700, a random name, created
   * exclusively: no other user can have made it or swap anything in it), as a file created
   * exclusively 0700, and loads it once its owner and mode are checked; then removes both.
   */
  private static String loadResource() throws Exception {
    if (NativeLoader.class.getResource(RESOURCE) == null) {
      throw new IllegalStateException("this jar has no " + RESOURCE);
    }
    Path dir =
        Files.createTempDirectory(
            Path.of(System.getProperty("java.io.tmpdir")),
            "cloudprofiler-jni-",
            PrivateFiles.FOLDER_MODE);
    Path target =
        dir.resolve(
            "libcloudprofiler_jni-"
                + CloudProfiler.VERSION_NUMBER
                + "-"
                + UUID.randomUUID()
                + ".so");
    // the loaded library stays mapped without its file: a killed process leaves no copy behind
    try {
      try (InputStream in = NativeLoader.class.getResourceAsStream(RESOURCE);
          OutputStream out =
              Channels.newOutputStream(
                  Files.newByteChannel(
                      target,
                      Set.<OpenOption>of(
                          StandardOpenOption.CREATE_NEW,
                          StandardOpenOption.WRITE,
                          LinkOption.NOFOLLOW_LINKS),
                      PosixFilePermissions.asFileAttribute(
                          PosixFilePermissions.fromString("rwx------"))))) {
        in.transferTo(out);
      }
      String why = PrivateFiles.untrustedFolder(dir);
      if (why == null) why = PrivateFiles.untrustedFile(target);
      if (why == null
          && !Files.getPosixFilePermissions(target, LinkOption.NOFOLLOW_LINKS).stream()
              .allMatch(p -> p.name().startsWith("OWNER_"))) {
        why = target + " can be read or written by other users";
      }
      if (why != null)
        throw new IllegalStateException("refusing to load the extracted library: " + why);
      return loadFile(target.toString());
    } finally {
      Files.deleteIfExists(target);
      Files.deleteIfExists(dir);
    }
  }

  /**
   * SparkFiles through reflection: this class also runs where Spark is absent (the JNI benchmark,
   * plain JVMs).
   */
  private static String loadSparkFile() throws Exception {
    Class<?> sparkFiles;
    try {
      sparkFiles = Class.forName("org.apache.spark.SparkFiles");
    } catch (ClassNotFoundException e) {
      throw new IllegalStateException("no Spark in this JVM", e);
    }
    String path;
    try {
      path = (String) sparkFiles.getMethod("get", String.class).invoke(null, FILE_NAME);
    } catch (InvocationTargetException e) { // no SparkEnv yet: SparkFiles has no folder
      throw new IllegalStateException("no SparkFiles folder in this JVM (" + e.getCause() + ")", e);
    }
    if (!new File(path).isFile())
      throw new IllegalStateException(path + " does not exist (not shipped with --files)");
    return loadFile(path);
  }

  private static String loadFromLibraryPath() {
    System.loadLibrary("cloudprofiler_jni");
    return "java.library.path";
  }
}
