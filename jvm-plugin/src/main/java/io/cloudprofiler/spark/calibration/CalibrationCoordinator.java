package io.cloudprofiler.spark.calibration;

import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.NativeLoader;
import io.cloudprofiler.spark.Config;
import io.cloudprofiler.spark.DaemonThreads;
import io.cloudprofiler.spark.Messages;
import io.cloudprofiler.spark.tables.ArrowSpool;
import io.cloudprofiler.spark.tables.ArrowTables;
import io.cloudprofiler.spark.tables.Table;
import java.io.IOException;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Driver side of the calibration; the driver's machine is the reference TSC domain.
 *
 * <p>Domains. An executor says {@link Messages.Hello} with its boot id and gets the domains of that
 * boot id (a member of each and its responder); it probes them (see {@link TscDomain#check}) and
 * {@link Messages.Join}s the first that agrees, or founds a new one. The first member of a domain
 * is its representative; a representative that stops answering is replaced by the next member.
 *
 * <p>Rounds (when a domain appears, after a job ends, and every interval). For every calibrated
 * pair: the reference with every other domain, and host pairs among the other domains (all of them
 * for up to peers + 1 domains, else {@code peers} each, see {@link #hostPairs}), one probe run in
 * each direction, one run at a time: the driver probes itself or asks an executor through its
 * {@link ProbeControl}. A pair that fails is retried after 2, 4, ..., 16 rounds. The round after a
 * job gives the job's last records an anchor after them while the executors are still there; it
 * waits until a second after the previous round began, and one such round at most is pending, so
 * that short jobs in a stream do not turn calibration into constant traffic.
 *
 * <p>Last runs. By the time the driver plugin shuts down, the executors have been told to stop, so
 * a round then would find them gone. Instead each executor outside the reference domain asks for a
 * {@link Messages.Last} run as it shuts down, its responder still up: one run each way between it
 * and the driver, which anchors every record it logged. Shutdown waits up to {@link #LAST_WAIT_MS}
 * for them (not for executors Spark already removed: lost ones never ask), finishes the round under
 * way (never interrupts it) and the tables.
 *
 * <p>After each round {@link #PROBES} (every probe, with its pair and direction) and {@link
 * #DOMAINS} (every process, its domain and the check that put it there) are rewritten.
 */
public final class CalibrationCoordinator {
  /**
   * Round: the driver's count of rounds (an int: at most one round a second lasts 68 years before
   * it wraps).
   */
  public static final Table PROBES =
      new Table(
          "calibration",
          "calibration.arrows",
          Table.APPLICATION,
          "a row per probe of every calibration round: the pair of TSC domains, the direction, the"
              + " round, the hosts, the TSCs read at send, at the remote end and at receipt",
          List.of(
              "domain_a",
              "domain_b",
              "direction",
              "round",
              "host_a",
              "host_b",
              "send_tsc",
              "remote_tsc",
              "recv_tsc"),
          List.of(
              String.class,
              String.class,
              String.class,
              Integer.class,
              String.class,
              String.class,
              Long.class,
              Long.class,
              Long.class));

  public static final Table DOMAINS =
      new Table(
          "tsc_domains",
          "tsc-domains.arrows",
          Table.APPLICATION,
          "a row per process with a probe responder: its TSC domain, boot id, role in the domain,"
              + " host, executor, pid, ports, the TSC check that put it there and its TSC's"
              + " simulation (\"null\": none)",
          List.of(
              "domain",
              "boot_id",
              "role",
              "host",
              "executor_id",
              "pid",
              "responder_port",
              "control_port",
              "check",
              "tsc_simulation"),
          List.of(
              String.class,
              String.class,
              String.class,
              String.class,
              String.class,
              Long.class,
              Integer.class,
              Integer.class,
              String.class,
              String.class));

  /**
   * How long the driver's shutdown waits for executors' last runs (an executor that was killed
   * never asks).
   */
  static final long LAST_WAIT_MS = 5000;

  /** A round after a job ends starts at least this long after the previous round started. */
  static final long JOB_END_SPACING_NANOS = TimeUnit.SECONDS.toNanos(1);

  /** A pair that keeps failing is tried again every this many rounds at most. */
  static final int RETRY_MAX_ROUNDS = 16;

  private static final Logger LOG = LoggerFactory.getLogger(CalibrationCoordinator.class);

  /**
   * A process with a probe responder: the driver (control port 0: it probes by itself) or an
   * executor.
   */
  private static final class Member {
    String domain, host, executorId, process, check, simulation;
    int responderPort, controlPort;
    long pid;
    double hz; // its TSC's frequency; 0 where unknown
  }

  private static final class Domain {
    final String key, boot;
    final List<Member> members = new ArrayList<>(); // the first one represents the domain

    Domain(String key, String boot) {
      this.key = key;
      this.boot = boot;
    }
  }

  /** Back-off of a pair that failed: skipped until round {@code next}. */
  private static final class Failure {
    int count, next;
  }

  private final String driverHost, bindAddress;
  private final byte[] secret = TscDomain.newSecret();
  private final int count, timeoutMs, peers;
  private final boolean force;
  private final Map<String, Domain> domains = new LinkedHashMap<>();

  /** Probes of the round under way; every round's go to the spool of {@link #PROBES}. */
  private final List<Object[]> probes = new ArrayList<>();

  private ArrowSpool spool;
  private final Map<String, Failure> failures = new HashMap<>();

  /**
   * Per pair and direction, the smallest round trip seen (prober ticks; under `probing`): runs far
   * above it are taken again.
   */
  private final Map<String, Long> bestRtt = new HashMap<>();

  /** Per pair, the latest round's MinRTT and bound, for the tab and the metrics. */
  private final PairQuality quality = new PairQuality();

  private final ScheduledThreadPoolExecutor rounds;
  private final AtomicBoolean roundPending = new AtomicBoolean();
  private volatile long lastRoundStartNanos;

  /** Set at shutdown: the round under way skips its remaining pairs (the executors are gone). */
  private volatile boolean stopping;

  /** Held for every probe run that the driver clocks: rounds and last runs take turns. */
  private final Object probing = new Object();

  /** Executors outside the reference domain that have not had their last run. */
  private final Set<String> awaitingLast = new HashSet<>();

  private Domain reference;
  private String folder;
  private long driverResponder;
  private int round;

  /**
   * {@code driverHost}: where executors reach the driver; {@code bindAddress}: where the driver's
   * probe responder listens (Spark's {@code spark.driver.bindAddress}, else the host).
   */
  public CalibrationCoordinator(
      String driverHost,
      String bindAddress,
      int intervalSeconds,
      int count,
      int timeoutMs,
      int peers,
      boolean force) {
    this.driverHost = driverHost;
    this.bindAddress = bindAddress;
    this.force = force;
    this.count = count;
    this.timeoutMs = timeoutMs;
    this.peers = peers;
    rounds = new ScheduledThreadPoolExecutor(1, DaemonThreads.named("cloudprofiler-calibration"));
    rounds.setExecuteExistingDelayedTasksAfterShutdownPolicy(false);
    lastRoundStartNanos = System.nanoTime() - JOB_END_SPACING_NANOS;
    rounds.scheduleWithFixedDelay(
        DaemonThreads.guarded("the calibration rounds", this::round),
        intervalSeconds,
        intervalSeconds,
        TimeUnit.SECONDS);
  }

  /** The answer to an executor's message (see {@link Messages}), null for another message. */
  public Object receive(Object message) {
    if (message instanceof Messages.Hello hello) return hello(hello);
    if (message instanceof Messages.Join join) return join(join);
    if (message instanceof Messages.Last last) return last(last.executorId());
    if (message instanceof Messages.Responders) return responders();
    return null;
  }

  /** Every registered probe responder: the only targets of the executors' probe controls. */
  private synchronized Messages.Candidates responders() {
    List<Messages.Candidate> out = new ArrayList<>();
    for (Domain d : domains.values()) {
      for (Member m : d.members)
        out.add(new Messages.Candidate(d.key, m.host, m.responderPort, m.process));
    }
    return new Messages.Candidates(out);
  }

  private synchronized Messages.Welcome hello(Messages.Hello hello) {
    if (folder == null) start(hello.appId(), hello.logDir());
    return new Messages.Welcome(
        reference == null ? "" : HexFormat.of().formatHex(secret),
        candidates(hello.bootId()).domains());
  }

  /**
   * The IPv4 address of {@code host} (a name or an address), where the driver's responder binds.
   */
  static String ipv4(String host) throws UnknownHostException {
    InetAddress address = InetAddress.getByName(host);
    if (!(address instanceof Inet4Address))
      throw new UnknownHostException(host + " is not an IPv4 address (the probes use IPv4)");
    return address.getHostAddress();
  }

  private void start(String appId, String logDir) {
    folder = Config.appFolder(logDir, appId);
    if (!NativeLoader.isLoaded()) return; // the driver's plugin has said why
    try {
      CloudProfiler.requireInvariantTsc(force);
    } catch (RuntimeException e) {
      LOG.warn(
          "cloudprofiler: no calibration ({}=true to calibrate anyway): {}",
          Config.CALIBRATION_FORCE.name,
          e.getMessage());
      return;
    }
    try { // where Spark's driver listens, not on every interface
      driverResponder = CloudProfiler.responderStart(ipv4(bindAddress), 0, secret);
    } catch (IOException | RuntimeException e) {
      LOG.warn(
          "cloudprofiler: no calibration: the driver's probe responder cannot listen on {}: {}",
          bindAddress,
          e.toString());
      return;
    }
    Member driver = new Member();
    driver.host = driverHost;
    driver.responderPort = CloudProfiler.responderPort(driverResponder);
    driver.executorId = "driver";
    driver.pid = ProcessHandle.current().pid();
    driver.process = TscDomain.PROCESS;
    driver.check = "reference";
    driver.hz = TscDomain.tscHz();
    driver.simulation = TscDomain.simulation();
    reference = add(new Domain(TscDomain.bootId(), TscDomain.bootId()), driver);
    LOG.info(
        "cloudprofiler: calibration reference domain {}, responder {}:{}",
        reference.key,
        driverHost,
        driver.responderPort);
  }

  private Domain add(Domain domain, Member member) {
    domains.putIfAbsent(domain.key, domain);
    member.domain = domain.key;
    domains.get(domain.key).members.add(member);
    return domains.get(domain.key);
  }

  /** The domains of this boot id, each with its representative. */
  private Messages.Candidates candidates(String boot) {
    List<Messages.Candidate> out = new ArrayList<>();
    for (Domain d : domains.values()) {
      Member m = d.members.get(0);
      if (d.boot.equals(boot))
        out.add(new Messages.Candidate(d.key, m.host, m.responderPort, m.process));
    }
    return new Messages.Candidates(out);
  }

  /**
   * {@link Messages.Joined}, or the candidates again when domains of this boot id appeared
   * meanwhile.
   */
  private Object join(Messages.Join join) {
    Domain joined;
    synchronized (this) {
      String boot = join.bootId(), key = join.domain();
      if (reference == null)
        return new Messages.Joined(boot + "#uncalibrated"); // the driver does not calibrate
      long ofBoot = domains.values().stream().filter(d -> d.boot.equals(boot)).count();
      if (!key.isEmpty() && !domains.containsKey(key) || key.isEmpty() && ofBoot > join.checked()) {
        return candidates(boot);
      }
      boolean founds = key.isEmpty();
      if (founds) key = ofBoot == 0 ? boot : boot + "#" + ofBoot;
      Member m = new Member();
      m.host = join.host();
      m.responderPort = join.responderPort();
      m.controlPort = join.controlPort();
      m.executorId = join.executorId();
      m.pid = join.pid();
      m.process = join.process();
      m.check = join.check();
      m.hz = join.tscHz() > 0 && Double.isFinite(join.tscHz()) ? join.tscHz() : 0;
      m.simulation = join.tscSimulation();
      joined = add(new Domain(key, boot), m);
      if (joined != reference) awaitingLast.add(m.executorId);
      LOG.info(
          "cloudprofiler: executor {} at {} is in TSC domain {} ({})",
          m.executorId,
          m.host,
          key,
          m.check);
      publishDomains();
      if (!founds) return new Messages.Joined(key);
    }
    schedule(0); // a new domain: calibrate it now
    return new Messages.Joined(joined.key);
  }

  /**
   * {@link #DOMAINS} rewritten on the calibration thread: an executor that joins does not wait for
   * the file.
   */
  private void publishDomains() {
    try {
      rounds.execute(this::writeDomains);
    } catch (RejectedExecutionException shuttingDown) {
      // the shutdown writes the tables
    }
  }

  /**
   * Pairs among n domains: none for peers = 0, all of them when n - 1 <= peers, else each domain
   * with the max(1, peers / 2) next ones around a ring (a circulant graph: every domain has peers
   * rounded down to an even number, at least 2, partners, and n times half that many pairs in all).
   */
  static List<int[]> hostPairs(int n, int peers) {
    List<int[]> out = new ArrayList<>();
    if (peers == 0) return out;
    if (n - 1 <= peers) {
      for (int i = 0; i < n; i++) for (int j = i + 1; j < n; j++) out.add(new int[] {i, j});
      return out;
    }
    Set<Long> seen = new LinkedHashSet<>();
    for (int i = 0; i < n; i++) {
      for (int step = 1; step <= Math.max(1, peers / 2); step++) {
        int j = (i + step) % n, lo = Math.min(i, j), hi = Math.max(i, j);
        if (seen.add((long) lo * n + hi)) out.add(new int[] {lo, hi});
      }
    }
    return out;
  }

  /**
   * The pairs of a round among n domains, domain 0 the reference: the reference with every other
   * domain, then the {@link #hostPairs} of the others.
   */
  static List<int[]> roundPairs(int n, int peers) {
    List<int[]> out = new ArrayList<>();
    for (int d = 1; d < n; d++) out.add(new int[] {0, d});
    for (int[] p : hostPairs(Math.max(0, n - 1), peers)) out.add(new int[] {p[0] + 1, p[1] + 1});
    return out;
  }

  /** A job ended: a round soon, so that its records end before an anchor (one waits at most). */
  public void jobEnded() {
    long sinceLast = System.nanoTime() - lastRoundStartNanos;
    if (roundPending.compareAndSet(false, true)) schedule(jobEndDelayNanos(sinceLast));
  }

  /**
   * How long a job-end round waits, the previous round having started this long ago: rounds stay
   * spaced.
   */
  static long jobEndDelayNanos(long sinceLastRoundStartNanos) {
    return Math.max(0, JOB_END_SPACING_NANOS - sinceLastRoundStartNanos);
  }

  /**
   * The round in which a pair that failed {@code failures} times in a row, the last time in round
   * {@code now}, is tried again: 2, 4, 8, then every 16 rounds later.
   */
  static int retryRound(int now, int failures) {
    return now + Math.min(RETRY_MAX_ROUNDS, 1 << Math.min(failures, 30));
  }

  private void schedule(long delayNanos) {
    try {
      rounds.schedule(
          () -> {
            roundPending.set(false);
            round();
          },
          delayNanos,
          TimeUnit.NANOSECONDS);
    } catch (RejectedExecutionException shuttingDown) {
      // the application ends: the executors' last runs anchor their records
    }
  }

  /** A round of every pair. */
  private void round() {
    synchronized (probing) {
      List<Domain[]> pairs = new ArrayList<>();
      int now;
      synchronized (this) {
        if (reference == null || domains.size() < 2) return;
        now = ++round;
        lastRoundStartNanos = System.nanoTime();
        List<Domain> all = new ArrayList<>(domains.values());
        all.remove(reference);
        all.add(0, reference);
        for (int[] p : roundPairs(all.size(), peers))
          pairs.add(new Domain[] {all.get(p[0]), all.get(p[1])});
      }
      for (Domain[] p : pairs) {
        if (stopping) break;
        runPair(p[0], p[1], now);
      }
      write(false);
    }
  }

  /**
   * An executor that is gone (lost, or stopped after its last run) is not waited for at shutdown.
   */
  public synchronized void executorRemoved(String executorId) {
    if (awaitingLast.remove(executorId)) notifyAll();
  }

  /**
   * One run each way between the driver and this executor, which is shutting down; whether they
   * ran.
   */
  private boolean last(String executorId) {
    synchronized (probing) {
      Domain d;
      Member driver, m = null;
      int now;
      synchronized (this) {
        if (!awaitingLast.remove(executorId) || driverResponder == 0) return false;
        notifyAll();
        for (Domain candidate : domains.values()) {
          for (Member member : candidate.members)
            if (member.executorId.equals(executorId)) m = member;
        }
        d = domains.get(m.domain);
        driver = reference.members.get(0);
        now = ++round;
      }
      try {
        ranBothWays(reference, d, driver, m, now);
      } catch (IOException | RuntimeException e) {
        quality.failed(reference.key, d.key, driver.host, m.host);
        LOG.warn(
            "cloudprofiler: the last calibration run of executor {} failed ({})",
            executorId,
            e.getMessage());
        return false;
      }
      write(false);
      return true;
    }
  }

  /**
   * Both directions of one pair, a -> b first; a failure backs the pair off, unless a domain got a
   * new representative from it (the next round tries that one).
   */
  private void runPair(Domain a, Domain b, int now) {
    String pair = a.key + " <-> " + b.key;
    Failure failed = failures.get(pair);
    if (failed != null && now < failed.next) return;
    Member ma, mb;
    synchronized (this) {
      ma = a.members.get(0);
      mb = b.members.get(0);
    }
    try {
      ranBothWays(a, b, ma, mb, now);
      if (failed != null) LOG.info("cloudprofiler: calibration of {} works again", pair);
      failures.remove(pair);
    } catch (IOException | RuntimeException e) {
      boolean handedOver;
      synchronized (this) {
        handedOver = a.members.get(0) != ma || b.members.get(0) != mb;
      }
      quality.failed(a.key, b.key, ma.host, mb.host);
      Failure f = failures.computeIfAbsent(pair, k -> new Failure());
      if (!handedOver) f.count++;
      f.next = handedOver ? now + 1 : retryRound(now, f.count);
      LOG.warn(
          "cloudprofiler: calibration round {} of {} failed ({}); next try in round {}",
          now,
          pair,
          e.getMessage(),
          f.next);
    }
  }

  /** A probe run a -> b, then b -> a: their probes recorded, the pair's quality updated. */
  private void ranBothWays(Domain a, Domain b, Member ma, Member mb, int now) throws IOException {
    long[] forward = run(a, ma, b, mb);
    record(a, b, ma, mb, true, now, forward);
    long[] backward = run(b, mb, a, ma);
    record(a, b, ma, mb, false, now, backward);
    quality.ran(a.key, b.key, ma.host, mb.host, now, forward, backward, ma.hz, mb.hz);
  }

  /**
   * Tick {@code tick} of TSC domain {@code domain} as ns of the driver's TSC within a bound: {ns,
   * bound ns} (the driver's own ticks exactly; another domain's from its pair with the driver's
   * latest round, {@link PairQuality#toReference}); null where no round relates them yet.
   */
  public double[] toReference(String domain, long tick) {
    Domain ref;
    double hz;
    synchronized (this) {
      ref = reference;
      hz = ref == null ? 0 : ref.members.get(0).hz;
    }
    if (ref == null) return null;
    if (ref.key.equals(domain)) return hz > 0 ? new double[] {tick / hz * 1e9, 0} : null;
    return quality.toReference(ref.key, domain, tick);
  }

  /** Per pair of domains, the calibration's quality so far ({@link PairQuality#rows}). */
  public List<Map<String, Object>> quality() {
    return quality.rows();
  }

  /**
   * One probe run from `from` (of domain fd) to `to` (of domain td), taken again while delayed (see
   * {@link ProbeRuns#retaken}). A process that the driver cannot reach, its control socket or (when
   * the driver probes it) its responder, hands its domain on to the next member.
   */
  private long[] run(Domain fd, Member from, Domain td, Member to) throws IOException {
    String path = fd.key + " -> " + td.key;
    long[] r =
        ProbeRuns.retaken(
            () -> runOnce(fd, from, td, to), bestRtt.getOrDefault(path, Long.MAX_VALUE));
    bestRtt.merge(path, ProbeRuns.minRtt(r), Math::min);
    return r;
  }

  private long[] runOnce(Domain fd, Member from, Domain td, Member to) throws IOException {
    if (from.controlPort == 0) {
      try {
        return ProbeControl.probe(to.host, to.responderPort, count, timeoutMs, secret);
      } catch (RuntimeException e) {
        handOver(td, to);
        throw e;
      }
    }
    try {
      return ProbeControl.request(
          from.host, from.controlPort, secret, to.host, to.responderPort, count, timeoutMs);
    } catch (ProbeControl.RunFailed e) {
      throw e; // the process answered: its probe run failed, not the process
    } catch (IOException e) {
      handOver(fd, from);
      throw e;
    }
  }

  /** The process is gone or cut off: if it represents its domain, the next member does. */
  private synchronized void handOver(Domain d, Member gone) {
    if (d.members.size() > 1 && d.members.get(0) == gone) {
      d.members.remove(0);
      d.members.add(gone);
      LOG.warn(
          "cloudprofiler: executor {} does not answer; executor {} now represents TSC domain {}",
          gone.executorId,
          d.members.get(0).executorId,
          d.key);
    }
  }

  private synchronized void record(
      Domain a, Domain b, Member ma, Member mb, boolean forward, int now, long[] r) {
    for (int i = 0; i < r.length; i += 3) {
      if (r[i + 2] == 0) continue;
      probes.add(
          new Object[] {
            a.key, b.key, forward ? "a->b" : "b->a", now, ma.host, mb.host, r[i], r[i + 1], r[i + 2]
          });
    }
  }

  /** The executors' last runs (waited for a while), then the tables. */
  public void shutdown() {
    stopping = true;
    rounds.shutdown(); // no interrupt: it would close the spool's file channel in the middle of a
    // batch
    try {
      rounds.awaitTermination(30, TimeUnit.SECONDS);
      long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(LAST_WAIT_MS);
      synchronized (this) {
        for (long left; !awaitingLast.isEmpty() && (left = deadline - System.nanoTime()) > 0; ) {
          TimeUnit.NANOSECONDS.timedWait(this, left);
        }
        if (!awaitingLast.isEmpty()) {
          LOG.warn(
              "cloudprofiler: no last calibration run from executors {}: their last records may"
                  + " come out extrapolated",
              awaitingLast);
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    synchronized (probing) {
      synchronized (this) {
        if (reference == null) return;
        write(true);
        if (driverResponder != 0) CloudProfiler.responderStop(driverResponder);
        driverResponder = 0;
      }
    }
  }

  /**
   * The round's probes appended to {@link #PROBES}, published with the domains; the last time,
   * finished.
   */
  private synchronized void write(boolean last) {
    String target = PROBES.in(folder);
    try {
      if (spool == null) {
        Map<String, String> meta =
            Map.of("reference.domain", reference.key, "probes.per_run", String.valueOf(count));
        spool = new ArrowSpool(PROBES, () -> meta);
      }
      spool.append(probes);
      if (last) spool.finish(target);
      else spool.copyTo(target);
    } catch (Exception e) {
      LOG.warn("cloudprofiler: writing " + target + " failed", e);
    }
    probes.clear();
    writeDomains();
  }

  private synchronized void writeDomains() {
    List<Object[]> rows = new ArrayList<>();
    for (Domain d : domains.values()) {
      for (int i = 0; i < d.members.size(); i++) {
        Member m = d.members.get(i);
        String role = d == reference && i == 0 ? "reference" : i == 0 ? "representative" : "member";
        rows.add(
            new Object[] {
              d.key,
              d.boot,
              role,
              m.host,
              m.executorId,
              m.pid,
              m.responderPort,
              m.controlPort,
              m.check,
              m.simulation
            });
      }
    }
    try {
      ArrowTables.writeRows(DOMAINS, folder, Map.of("reference.domain", reference.key), rows);
    } catch (Exception e) {
      LOG.warn("cloudprofiler: writing " + DOMAINS.in(folder) + " failed", e);
    }
  }
}
