package io.cloudprofiler.spark;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;

/**
 * A TSC domain is a machine: the processes that share one TSC. A process claims its machine's boot
 * id; the claim is checked, never assumed: the process probes a member of every domain of that boot
 * id and joins the first whose TSC agrees with its own (see {@link #check}). A process whose TSC
 * agrees with none (another socket with an unsynchronized TSC, a TSC simulation in tests) founds a
 * domain of its own, {@code <boot id>#<n>}. Executor ids never define a domain.
 *
 * <p>The shared probe secret is derived from the application id, so responders answer only their
 * own application's probes; with {@code spark.authenticate} on, also from the application's
 * authentication secret, so that only processes that hold it can probe.
 */
final class TscDomain {
  private TscDomain() {}

  /**
   * This JVM, among the application's processes. An executor in the driver's JVM (local mode) reads
   * the driver's TSC by construction: it joins the driver's domain without probing it, which on a
   * small machine would take CPU from the application's start.
   */
  static final String PROCESS = java.util.UUID.randomUUID().toString();

  /** This machine's boot id (the claim every process of the machine makes). */
  static String bootId() {
    try {
      return Files.readString(Path.of("/proc/sys/kernel/random/boot_id")).trim();
    } catch (Exception e) {
      return "unknown-boot";
    }
  }

  static byte[] secret(String appId) {
    String seed = "cloudprofiler:" + appId;
    org.apache.spark.SecurityManager security = org.apache.spark.SparkEnv.get().securityManager();
    if (security.isAuthenticationEnabled()) seed += ":" + security.getSecretKey();
    try {
      byte[] digest =
          MessageDigest.getInstance("SHA-256").digest(seed.getBytes(StandardCharsets.UTF_8));
      return java.util.Arrays.copyOf(digest, 32);
    } catch (Exception e) {
      throw new IllegalStateException("SHA-256 is not available", e);
    }
  }

  /** The outcome of probing another process that claims the same boot id. */
  static final class Check {
    final boolean agrees;
    final long offset, bound;
    final int probes;

    Check(boolean agrees, long offset, long bound, int probes) {
      this.agrees = agrees;
      this.offset = offset;
      this.bound = bound;
      this.probes = probes;
    }

    /**
     * The text recorded with the process, e.g. "agrees with D: offset -12 ticks within +-9000 (100
     * probes)".
     */
    String describe(String domain) {
      return (agrees ? "agrees with " : "differs from ")
          + domain
          + ": offset "
          + offset
          + " ticks "
          + (agrees ? "within" : "beyond")
          + " +-"
          + bound
          + " ("
          + probes
          + " probes)";
    }
  }

  /**
   * Probes (send, remote, recv triples; recv 0 where unanswered) from this process to another one.
   * If both read one TSC, every answer was read between its probe's send and recv: the remote value
   * minus the midpoint (the offset) lies within half the round trip (the bound). The probe with the
   * smallest round trip decides; every answered probe must also keep send <= remote <= recv.
   */
  static Check check(long[] probes) {
    long bestRtt = Long.MAX_VALUE, offset = 0;
    int answered = 0;
    boolean causal = true;
    for (int i = 0; i < probes.length; i += 3) {
      long send = probes[i], remote = probes[i + 1], recv = probes[i + 2];
      if (recv == 0) continue;
      answered++;
      causal &= send <= remote && remote <= recv;
      if (recv - send < bestRtt) {
        bestRtt = recv - send;
        offset = remote - (send + (recv - send) / 2);
      }
    }
    long bound = answered == 0 ? 0 : (bestRtt + 1) / 2;
    return new Check(answered > 0 && causal && Math.abs(offset) <= bound, offset, bound, answered);
  }
}
