package io.cloudprofiler;

import java.nio.file.Files;
import java.nio.file.Path;

/**
 * ns per {@link CloudProfiler#log} call through JNI for every handler, one thread, after a warm-up.
 * Built apart from the plugin (cloudprofiler-bench.jar). Usage: {@code java -cp
 * cloudprofiler-plugin.jar:cloudprofiler-bench.jar io.cloudprofiler.JniBenchmark [iterations]};
 * prints one JSON object per line: {"handler": ..., "caller": "jni", "tsc_read": ...,
 * "ns_per_call": ..., "mrec_per_s": ...}.
 */
public final class JniBenchmark {
  private JniBenchmark() {}

  private static void row(String handler, long[] params, String tscRead, long n) {
    long ch = CloudProfiler.openChannel("jni-bench", handler, params, new String[0], new String[0]);
    for (long i = 0; i < n / 10; i++) CloudProfiler.log(ch, i); // warm-up: JIT, blocks
    long t0 = System.nanoTime();
    for (long i = 0; i < n; i++) CloudProfiler.log(ch, i);
    double ns = (double) (System.nanoTime() - t0) / n;
    CloudProfiler.close(ch);
    System.out.printf(
        "{\"handler\": \"%s\", \"caller\": \"jni\", \"tsc_read\": \"%s\", \"ns_per_call\": %.3f, "
            + "\"mrec_per_s\": %.3f}%n",
        handler, tscRead, ns, 1e3 / ns);
  }

  public static void main(String[] args) throws Exception {
    long n = args.length > 0 ? Long.parseLong(args[0]) : 20_000_000L;
    String failure = NativeLoader.load(null);
    if (failure != null) throw new IllegalStateException(failure);
    Path dir = Files.createTempDirectory("cp-jni-bench");
    Object[][] cases = {
      {"null", new long[0]},
      {"spc", new long[] {1_000_000}},
      {"mpc", new long[] {1_000_000}},
      {"buffered", new long[0]},
      {"xoy", new long[] {2, 1024}},
      {"downsample", new long[] {64}},
      {"firstlast", new long[0]}
    };
    CloudProfiler.start(
        dir.toString(),
        CloudProfiler.COMPRESSION_NONE,
        0,
        0,
        CloudProfiler.FULL_BLOCK,
        CloudProfiler.TSC_ORDERED,
        -1);
    for (Object[] c : cases) row((String) c[0], (long[]) c[1], "ordered", n);
    CloudProfiler.stop();
    // the buffered handler again with the unordered TSC read, side by side in this run
    CloudProfiler.start(
        dir.toString(),
        CloudProfiler.COMPRESSION_NONE,
        0,
        0,
        CloudProfiler.FULL_BLOCK,
        CloudProfiler.TSC_UNORDERED,
        -1);
    row("buffered", new long[0], "unordered", n);
    CloudProfiler.stop();
    try (var files = Files.list(dir)) {
      for (Path p : (Iterable<Path>) files::iterator) Files.delete(p);
    }
    Files.delete(dir);
  }
}
