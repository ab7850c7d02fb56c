package io.cloudprofiler.spark.sql;

/**
 * A JVM that forgets the SQL side's channels, as the library's stop does, and nothing else: {@code
 * tests/test_java.py} lists the classes it loads.
 */
public final class ForgetOnly {
  private ForgetOnly() {}

  public static void main(String[] args) {
    ChannelCaches.forgetAll();
  }
}
