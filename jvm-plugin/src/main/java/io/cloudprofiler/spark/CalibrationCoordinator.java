package io.cloudprofiler.spark;

import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.NativeLoader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Driver side of the calibration: the driver's machine is the reference TSC domain. Executors register their
 * probe responder; the driver runs a MinRTT round against each other domain when it first registers, every
 * interval, and at shutdown, and rewrites {@code calibration.arrows} (every probe) after each round.
 */
final class CalibrationCoordinator {
  static final String REGISTER = "cloudprofiler.calibration.register";
  private static final Logger LOG = LoggerFactory.getLogger(CalibrationCoordinator.class);

  private static final class Peer {
    final String domain, host;
    final int port;

    Peer(String domain, String host, int port) {
      this.domain = domain;
      this.host = host;
      this.port = port;
    }
  }

  private static final class Probe {
    String domain, host;
    int round;
    long send, remote, recv;
  }

  private final String referenceDomain = TscDomain.key();
  private final Map<String, Peer> peers = new LinkedHashMap<>();
  private final List<Probe> probes = new ArrayList<>();
  private final int count;
  private final ScheduledExecutorService rounds;
  private String appId, target;
  private int round;

  CalibrationCoordinator(int intervalSeconds, int count) {
    this.count = count;
    rounds = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "cloudprofiler-calibration");
      t.setDaemon(true);
      return t;
    });
    rounds.scheduleWithFixedDelay(this::roundAll, intervalSeconds, intervalSeconds, TimeUnit.SECONDS);
  }

  /** A registration "REGISTER \t domain \t host \t port \t appId \t logDir" from an executor. */
  void register(String message) {
    String[] f = message.split("\t");
    if (f.length != 6) return;
    synchronized (this) {
      appId = f[4];
      target = f[5] + "/" + appId + "/calibration.arrows";
      if (f[1].equals(referenceDomain) || peers.containsKey(f[1])) return;
      peers.put(f[1], new Peer(f[1], f[2], Integer.parseInt(f[3])));
    }
    rounds.execute(this::roundAll);
  }

  private void roundAll() {
    List<Peer> now;
    synchronized (this) {
      if (peers.isEmpty()) return;
      now = new ArrayList<>(peers.values());
      round++;
    }
    if (NativeLoader.load(null) != null) return;
    for (Peer p : now) {
      try {
        long[] r = CloudProfiler.probePeer(p.host, p.port, count, 200, TscDomain.secret(appId));
        synchronized (this) {
          for (int i = 0; i < r.length; i += 3) {
            if (r[i + 2] == 0) continue;
            Probe q = new Probe();
            q.domain = p.domain;
            q.host = p.host;
            q.round = round;
            q.send = r[i];
            q.remote = r[i + 1];
            q.recv = r[i + 2];
            probes.add(q);
          }
        }
      } catch (RuntimeException e) {
        LOG.warn("cloudprofiler: calibration round against {}:{} failed: {}", p.host, p.port, e.getMessage());
      }
    }
    write();
  }

  /** A last round, then the table. */
  void shutdown() {
    rounds.shutdownNow();
    roundAll();
  }

  private synchronized void write() {
    if (target == null || probes.isEmpty()) return;
    int n = probes.size();
    try (BufferAllocator allocator = new RootAllocator();
        VarCharVector domain = new VarCharVector("domain", allocator);
        VarCharVector host = new VarCharVector("host", allocator);
        IntVector roundNo = new IntVector("round", allocator);
        BigIntVector send = new BigIntVector("send_tsc", allocator);
        BigIntVector remote = new BigIntVector("remote_tsc", allocator);
        BigIntVector recv = new BigIntVector("recv_tsc", allocator)) {
      List<FieldVector> vectors = List.of(domain, host, roundNo, send, remote, recv);
      for (FieldVector v : vectors) v.allocateNew();
      for (int i = 0; i < n; i++) {
        Probe q = probes.get(i);
        domain.setSafe(i, q.domain.getBytes(StandardCharsets.UTF_8));
        host.setSafe(i, q.host.getBytes(StandardCharsets.UTF_8));
        roundNo.setSafe(i, q.round);
        send.setSafe(i, q.send);
        remote.setSafe(i, q.remote);
        recv.setSafe(i, q.recv);
      }
      for (FieldVector v : vectors) v.setValueCount(n);
      Map<String, String> meta = Map.of("reference.domain", referenceDomain);
      org.apache.arrow.vector.types.pojo.Schema schema = new org.apache.arrow.vector.types.pojo.Schema(
          vectors.stream().map(FieldVector::getField).toList(), meta);
      try (VectorSchemaRoot root = new VectorSchemaRoot(schema, vectors, n)) {
        ArrowTables.write(target, root);
      }
    } catch (Exception e) {
      LOG.warn("cloudprofiler: writing the calibration table to " + target + " failed", e);
    }
  }
}
