package io.cloudprofiler.spark;

import java.io.InputStream;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.util.Properties;
import org.apache.spark.SparkContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One part of the plugin that Spark calls into: the driver plugin, the executor plugin, a listener,
 * the SQL function. The profiler never takes the application down: whatever a call into a part
 * throws, {@link LinkageError} included (a jar built for another Spark or Scala), disables that
 * part with one log line naming the reason, and the application runs on without it. Spark itself
 * would not: an Error from a listener stops the SparkContext, and one from a session extension
 * fails the session.
 */
public final class Guard {
  private static final Logger LOG = LoggerFactory.getLogger(Guard.class);
  private final String part;
  private volatile boolean disabled;

  public Guard(String part) {
    this.part = part;
  }

  public boolean disabled() {
    return disabled;
  }

  /**
   * Disables the part; the first failure says why in one line (the stack trace at debug level),
   * later ones are quiet.
   */
  public void disable(String call, Throwable failure) {
    synchronized (this) {
      if (disabled) return;
      disabled = true;
    }
    LOG.warn(
        "cloudprofiler: {} is disabled, the application runs on without it: {} threw {}{}",
        part,
        call,
        failure,
        failure instanceof LinkageError ? jarHint() : "");
    LOG.debug("cloudprofiler: {} failed in {}", part, call, failure);
  }

  /**
   * What a linkage failure most likely means: this jar was built for another Scala binary version.
   */
  private static String jarHint() {
    String version = scala.util.Properties.versionNumberString();
    String binary = version.substring(0, version.lastIndexOf('.'));
    return " (this JVM runs Spark "
        + sparkVersion()
        + " with Scala "
        + version
        + ": the plugin jar must be the one "
        + "built for Scala "
        + binary
        + ", cloudprofiler-plugin_"
        + binary
        + ".jar)";
  }

  private static String sparkVersion() {
    try (InputStream in =
        SparkContext.class.getResourceAsStream("/spark-version-info.properties")) {
      Properties info = new Properties();
      if (in != null) info.load(in);
      return info.getProperty("version", "(version unknown)");
    } catch (Exception e) {
      return "(version unknown)";
    }
  }

  /**
   * Generates the proxy class of {@code type} in a daemon thread, ahead of {@link #wrap}: that of a
   * Spark listener takes 20 ms, which the application's start would otherwise wait for.
   */
  static void prepareInBackground(Class<?> type) {
    DaemonThreads.named("cloudprofiler-guard-class")
        .newThread(
            () -> {
              try {
                Proxy.newProxyInstance(
                    type.getClassLoader(), new Class<?>[] {type}, (proxy, method, args) -> null);
              } catch (Throwable e) {
                // wrap() generates it again, and its part says what fails
              }
            })
        .start();
  }

  /**
   * {@code target} behind a {@code type} whose every call is guarded. A disabled part's calls
   * return null (the interfaces guarded here return objects or nothing), except {@code shutdown},
   * still passed on (guarded) so that the part releases what it holds and writes what it has.
   * {@code passOnFromInit}: the exceptions of {@code init} that are the user's to see (the driver's
   * bad options stop the application at start), thrown on as they are; or null.
   */
  public static <T> T wrap(
      Class<T> type, T target, String part, Class<? extends Throwable> passOnFromInit) {
    Guard guard = new Guard(part);
    InvocationHandler handler =
        (proxy, method, args) -> {
          if (method.getDeclaringClass()
              == Object.class) { // equals, hashCode, toString: the proxy's own
            return switch (method.getName()) {
              case "equals" -> proxy == args[0];
              case "hashCode" -> System.identityHashCode(proxy);
              default -> "cloudprofiler " + part;
            };
          }
          if (guard.disabled() && !method.getName().equals("shutdown")) return null;
          try {
            return method.invoke(target, args);
          } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            if (passOnFromInit != null
                && method.getName().equals("init")
                && passOnFromInit.isInstance(cause)) throw cause;
            guard.disable(method.getName(), cause);
          } catch (Throwable e) {
            guard.disable(method.getName(), e);
          }
          return null;
        };
    return type.cast(Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type}, handler));
  }
}
