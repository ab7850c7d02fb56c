package io.cloudprofiler.spark;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;

/**
 * A TSC domain is a machine: every process of one boot shares its TSC, so the key is the boot id (plus the TSC
 * simulation, which makes a process a domain of its own in tests). The shared probe secret is derived from the
 * application id, so responders answer only their own application's probes.
 */
final class TscDomain {
  private TscDomain() {}

  static String key() {
    String boot;
    try {
      boot = Files.readString(Path.of("/proc/sys/kernel/random/boot_id")).trim();
    } catch (Exception e) {
      boot = "unknown-boot";
    }
    String simulation = System.getenv("CLOUDPROFILER_SIMULATE_TSC");
    return simulation == null || simulation.isEmpty() ? boot : boot + "|" + simulation;
  }

  static byte[] secret(String appId) {
    try {
      byte[] digest = MessageDigest.getInstance("SHA-256").digest(("cloudprofiler:" + appId).getBytes(StandardCharsets.UTF_8));
      return java.util.Arrays.copyOf(digest, 32);
    } catch (Exception e) {
      throw new IllegalStateException("SHA-256 is not available", e);
    }
  }
}
