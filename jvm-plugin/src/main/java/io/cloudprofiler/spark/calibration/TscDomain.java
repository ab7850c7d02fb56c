package io.cloudprofiler.spark.calibration;

import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.spark.Messages;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.SecureRandom;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * A TSC domain is a machine: the processes that share one TSC. A process claims its machine's boot
 * id; the claim is checked, never assumed: the process probes a member of every domain of that boot
 * id and joins the first whose TSC agrees with its own (see {@link #check}). A process whose TSC
 * agrees with none (another socket with an unsynchronized TSC, a TSC simulation in tests) founds a
 * domain of its own, {@code <boot id>#<n>}. Executor ids never define a domain.
 *
 * <p>The probe secret is made at random by the driver as it starts ({@link #newSecret}) and handed
 * to the executors in the answer to their first message ({@link Messages.Welcome}), over Spark's
 * RPC, which Spark authenticates and encrypts when the application turns that on ({@code
 * spark.authenticate}, {@code spark.network.crypto.enabled}). Nothing of it derives from the
 * application id or any other public value. Probes and the probe control's requests and replies
 * carry an HMAC-SHA256 under it.
 */
public final class TscDomain {
  private TscDomain() {}

  /**
   * This JVM, among the application's processes. An executor in the driver's JVM (local mode) reads
   * the driver's TSC by construction: it joins the driver's domain without probing it, which on a
   * small machine would take CPU from the application's start.
   */
  public static final String PROCESS = java.util.UUID.randomUUID().toString();

  /**
   * This machine's name, as the folders of its processes' logs are named (PluginContext.hostname()
   * fails on executors of standalone clusters: their RPC environment has no address).
   */
  public static String hostName() {
    try {
      return InetAddress.getLocalHost().getHostName();
    } catch (Exception e) {
      return "unknown-host";
    }
  }

  /** This machine's boot id (the claim every process of the machine makes). */
  public static String bootId() {
    try {
      return Files.readString(Path.of("/proc/sys/kernel/random/boot_id")).trim();
    } catch (Exception e) {
      return "unknown-boot";
    }
  }

  /**
   * This process's TSC simulation, as its files' metadata states it ("null": none): with the boot
   * id, whose TSC it reads.
   */
  public static String simulation() {
    try {
      return CloudProfiler.tscSimulation();
    } catch (Throwable e) { // a library without the call: no simulation is known
      return "null";
    }
  }

  /** Bytes of a probe secret: HMAC-SHA256's block is 64, its output 32. */
  static final int SECRET_BYTES = 32;

  /** A new probe secret for an application, from the system's strong random source. */
  static byte[] newSecret() {
    byte[] secret = new byte[SECRET_BYTES];
    new SecureRandom().nextBytes(secret);
    return secret;
  }

  /** HMAC-SHA256 of {@code text} (as UTF-8) under {@code secret}. */
  static byte[] hmac(byte[] secret, String text) {
    try {
      Mac mac = Mac.getInstance("HmacSHA256");
      mac.init(new SecretKeySpec(secret, "HmacSHA256"));
      return mac.doFinal(text.getBytes(StandardCharsets.UTF_8));
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("HmacSHA256 is not available in this JVM", e);
    }
  }

  /** The outcome of probing another process that claims the same boot id. */
  public static final class Check {
    public final boolean agrees;
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
    public String describe(String domain) {
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
  public static Check check(long[] probes) {
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

  /**
   * This process's TSC frequency, for the driver's figures of the calibration only: 0 where it
   * cannot be measured.
   */
  public static double tscHz() {
    try {
      return CloudProfiler.tscHz();
    } catch (RuntimeException e) {
      return 0;
    }
  }
}
