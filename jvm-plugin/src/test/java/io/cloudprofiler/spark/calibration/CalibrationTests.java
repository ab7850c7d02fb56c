package io.cloudprofiler.spark.calibration;

import static io.cloudprofiler.spark.JvmTests.check;
import static io.cloudprofiler.spark.JvmTests.equal;
import static io.cloudprofiler.spark.JvmTests.loadNative;

import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.spark.Messages;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Tests of the calibration: the coordinator's pairs and rounds, the TSC check, probe runs and the
 * probe control (on the real native library and real sockets).
 */
public final class CalibrationTests {
  private CalibrationTests() {}

  /** The pairs as "i-j" strings; every pair once, i < j. */
  static Set<String> pairs(int n, int peers) {
    Set<String> out = new HashSet<>();
    for (int[] p : CalibrationCoordinator.hostPairs(n, peers)) {
      check(p[0] < p[1] && p[1] < n, () -> Arrays.toString(p));
      check(out.add(p[0] + "-" + p[1]), () -> "pair " + Arrays.toString(p) + " twice");
    }
    return out;
  }

  /**
   * b's TSC is a's + 1000. A probe a -> b sent at 100, seen by b at 1120, back at 140; one b -> a
   * sent at b's 2000 (a's 1000), seen by a at 1010, back at b's 2030: b's 2000 lies at a's time in
   * [980, 1020] by the first and [980, 1010] by the second, a bound of 15 ticks; an unanswered
   * probe counts for nothing; an uncertain rate widens each interval by its uncertainty times the
   * ticks it moved over and its round trip (880 and 30: at 1%, the second's [979.7, 1010.3] binds).
   * A second round 10,000 ticks later, b 2 ticks further ahead: its rate from the MinRTT anchors.
   */
  public static void testAPairsBoundIsTheMinPairAnchorsOfItsRound() {
    long[] forward = {100, 1120, 140, 150, 1200, 0};
    long[] backward = {2000, 1010, 2030};
    equal(15.0, PairQuality.boundTicks(forward, backward, 1, 0));
    double widened = PairQuality.boundTicks(forward, backward, 1, 0.01);
    check(Math.abs(widened - (1010.3 - 979.7) / 2) < 1e-9, () -> "widened: " + widened);
    check(
        Double.isNaN(PairQuality.boundTicks(new long[] {1, 2, 0}, new long[0], 1, 0)),
        () -> "none");
    PairQuality quality = new PairQuality();
    quality.failed("a", "b", "h1", "h2");
    quality.ran("a", "b", "h1", "h2", 7, forward, backward, 1e9, 2e9);
    var row = quality.rows().get(0);
    equal(7, row.get("round"));
    equal(1L, row.get("rounds"));
    equal(1L, row.get("failures"));
    equal(false, row.get("failing"));
    double first = PairQuality.boundTicks(forward, backward, 1, PairQuality.RATE_PRIOR);
    equal(first / 1e9, row.get("bound_s"));
    equal(40e-9, row.get("min_rtt_a_b_s"));
    equal(15e-9, row.get("min_rtt_b_a_s"));
    long[] later = {10_100, 11_122, 10_140};
    long[] laterBack = {12_002, 11_010, 12_032};
    quality.ran("a", "b", "h1", "h2", 8, later, laterBack, 1e9, 2e9);
    // both rounds' fastest probe is the backward one (30 ticks): anchors at b's midpoints 2015 and
    // 12017, a's ticks 1010 and 11010, each within 15 ticks at the rate's upper end plus half a
    // tick
    double rate = 10_000.0 / 10_002,
        coarse = 2 * (15 * (1 + PairQuality.RATE_PRIOR) + 0.5) / 10_002;
    double rateErr = 2 * (15 * (rate + coarse) + 0.5 * rate) / 10_002;
    double[] found = PairQuality.rate(forward, backward, later, laterBack);
    check(
        Math.abs(found[0] - rate) < 1e-15 && Math.abs(found[1] - rateErr) < 1e-15,
        () -> "rate: " + Arrays.toString(found));
    equal(
        PairQuality.boundTicks(later, laterBack, rate, rateErr) / 1e9,
        quality.rows().get(0).get("bound_s"));
    quality.ran("a", "b", "h1", "h2", 9, forward, backward, 0, 0); // frequencies unknown
    check(quality.rows().get(0).get("bound_s") == null, () -> "a bound without a frequency");
  }

  public static void testHostPairsAreAllPairsUpToPeersPlusOneHosts() {
    equal(Set.of(), pairs(1, 8));
    equal(Set.of("0-1"), pairs(2, 8));
    equal(9 * 8 / 2, pairs(9, 8).size());
    equal(Set.of(), pairs(5, 0));
  }

  public static void testHostPairsBeyondPeersPlusOneFormARingOfEvenDegree() {
    for (int[] c : new int[][] {{10, 8, 8}, {10, 3, 2}, {20, 1, 2}, {7, 4, 4}}) {
      int n = c[0], peers = c[1], degree = c[2];
      Set<String> pairs = pairs(n, peers);
      equal(n * degree / 2, pairs.size());
      for (int host = 0; host < n; host++) {
        String h = String.valueOf(host);
        long partners = pairs.stream().filter(p -> Arrays.asList(p.split("-")).contains(h)).count();
        check(
            partners == degree,
            () -> "host " + h + " of " + n + " (peers " + peers + "): " + partners + " partners");
      }
    }
  }

  public static void testARoundPairsTheReferenceWithEveryDomainAndTheOthersInOneConnectedRing() {
    equal(List.of(), CalibrationCoordinator.roundPairs(1, 8));
    for (int n : new int[] {2, 3, 9, 10, 50, 1000}) {
      List<int[]> round = CalibrationCoordinator.roundPairs(n, 8);
      Set<String> seen = new HashSet<>();
      int[] parent = new int[n]; // union-find over the host-to-host pairs alone
      for (int d = 0; d < n; d++) parent[d] = d;
      Set<Integer> withReference = new HashSet<>();
      for (int[] p : round) {
        check(
            p[0] < p[1] && p[1] < n && seen.add(p[0] + "-" + p[1]),
            () -> n + " domains: " + Arrays.toString(p));
        if (p[0] == 0) withReference.add(p[1]);
        else parent[root(parent, p[0])] = root(parent, p[1]);
      }
      equal(n - 1, withReference.size());
      // host pairs: all of them up to 9 domains besides the reference, else 8 partners each: 4 (n -
      // 1) pairs
      int hostPairs = n - 1 <= 9 ? (n - 1) * (n - 2) / 2 : 4 * (n - 1);
      equal(n - 1 + hostPairs, round.size());
      Set<Integer> components = new HashSet<>();
      for (int d = 1; d < n; d++) components.add(root(parent, d));
      check(
          components.size() <= 1,
          () -> n + " domains: the host pairs leave " + components.size() + " groups");
    }
  }

  static int root(int[] parent, int d) {
    while (parent[d] != d) d = parent[d];
    return d;
  }

  public static void testAFailingPairIsRetriedAfter2Then4Then8ThenEvery16Rounds() {
    List<Integer> tried = new ArrayList<>();
    int next = 0, failures = 0;
    for (int round = 1; round <= 80; round++) {
      if (round < next) continue;
      tried.add(round); // and it fails again
      next = CalibrationCoordinator.retryRound(round, ++failures);
    }
    equal(List.of(1, 3, 7, 15, 31, 47, 63, 79), tried);
    for (int many : new int[] {31, 32, 1000}) { // a pair failing for hours: still every 16 rounds
      equal(100 + 16, CalibrationCoordinator.retryRound(100, many));
    }
  }

  public static void testAJobEndRoundStartsAtLeastASecondAfterThePreviousRound() {
    long second = 1_000_000_000L;
    equal(second, CalibrationCoordinator.JOB_END_SPACING_NANOS);
    equal(second, CalibrationCoordinator.jobEndDelayNanos(0));
    equal(700_000_000L, CalibrationCoordinator.jobEndDelayNanos(300_000_000L));
    equal(0L, CalibrationCoordinator.jobEndDelayNanos(second));
    equal(0L, CalibrationCoordinator.jobEndDelayNanos(60 * second));
    for (long since = 0; since < 2 * second; since += 7_919_113) {
      long delay = CalibrationCoordinator.jobEndDelayNanos(since);
      check(
          delay >= 0 && since + delay >= second, () -> "a round " + delay + " ns after a job end");
    }
  }

  public static void testTscCheckAgreesOnlyWithinHalfTheSmallestRoundTrip() {
    // (send, remote, recv): one TSC read by both sides, the remote value inside every round trip
    check(
        TscDomain.check(new long[] {100, 150, 200, 300, 305, 310}).agrees,
        () -> "one TSC disagrees");
    TscDomain.Check far = TscDomain.check(new long[] {100, 5000, 200, 300, 5305, 310});
    check(!far.agrees && far.bound == 5 && far.offset == 5000, far::toString);
    check(!TscDomain.check(new long[] {100, 150, 0}).agrees, () -> "no answer agrees");
  }

  /** A run of one answered probe whose round trip is `rtt`, and one unanswered. */
  static long[] runOf(long rtt) {
    return new long[] {1000, 5, 1000 + rtt, 2000, 6, 0};
  }

  public static void testARunGoesInEvenBurstsWithTheirTriplesInOrder() {
    equal("[10, 10, 10, 10, 10, 10, 10, 10, 10, 10]", Arrays.toString(ProbeRuns.burstSizes(100)));
    equal("[10, 10, 10, 10, 10, 10, 10, 10, 9, 9]", Arrays.toString(ProbeRuns.burstSizes(98)));
    equal("[1, 1, 1]", Arrays.toString(ProbeRuns.burstSizes(3)));
    List<Integer> sizes = new ArrayList<>();
    List<Boolean> spinning = new ArrayList<>();
    long[] sent = {0};
    long start = System.nanoTime();
    long[] run =
        ProbeRuns.inBursts(
            23,
            (size, spin) -> {
              sizes.add(size);
              spinning.add(spin);
              long[] part = new long[3 * size];
              for (int i = 0; i < part.length; i++) part[i] = sent[0]++;
              return part;
            });
    long tookNanos = System.nanoTime() - start;
    equal(List.of(3, 3, 3, 2, 2, 2, 2, 2, 2, 2), sizes);
    // every second burst waits asleep: a busy machine holds a spinning prober back for milliseconds
    equal(List.of(true, false, true, false, true, false, true, false, true, false), spinning);
    for (int i = 0; i < run.length; i++) equal((long) i, run[i]);
    check(
        tookNanos >= 9 * ProbeRuns.BURST_GAP_NANOS,
        () -> "bursts only " + tookNanos + " ns apart in all");
  }

  public static void testADelayedRunIsTakenAgainAndTheBestKept() throws Exception {
    equal(50L, ProbeRuns.minRtt(new long[] {0, 1, 80, 100, 1, 150, 200, 1, 0}));
    equal(Long.MAX_VALUE, ProbeRuns.minRtt(new long[] {0, 1, 0}));
    long[][] runs = {runOf(1000), runOf(500), runOf(300), runOf(50)};
    int[] taken = {0};
    ProbeRuns.Run take = () -> runs[taken[0]++];
    equal(
        300L,
        ProbeRuns.minRtt(ProbeRuns.retaken(take, 100))); // within 4 x 100 at the third run: kept
    equal(3, taken[0]);
    taken[0] = 0;
    equal(
        1000L,
        ProbeRuns.minRtt(ProbeRuns.retaken(take, Long.MAX_VALUE))); // nothing seen yet: taken once
    equal(1, taken[0]);
    long[][] late = {runOf(1000), runOf(50), runOf(500), runOf(300)};
    taken[0] = 0;
    long[] kept =
        ProbeRuns.retaken(() -> late[taken[0]++], 10); // never within 4 x 10: RETRIES more
    equal(50L, ProbeRuns.minRtt(kept)); // the best, not the last
    equal(1 + ProbeRuns.RETRIES, taken[0]);
  }

  /**
   * An executor's probe control runs probes only to the responders its driver registered, as the
   * executor wires them (RegisteredResponders asking the driver's CalibrationCoordinator): the
   * driver's responder answers, so does an executor's that joined later (asked again once the ask
   * interval has passed), and a live responder made with the application's secret but never
   * registered, or another address, is refused without a probe; requests naming unknown targets ask
   * the driver at most once per interval.
   */
  public static void testTheProbeControlProbesOnlyTheRespondersTheDriverRegistered()
      throws Exception {
    loadNative();
    Path logDir = Files.createTempDirectory("cp-registered-");
    CalibrationCoordinator driver =
        new CalibrationCoordinator("127.0.0.1", "127.0.0.1", 3600, 5, 500, 8, true);
    long later = 0, stranger = 0;
    try {
      Messages.Welcome welcome =
          (Messages.Welcome)
              driver.receive(new Messages.Hello(TscDomain.bootId(), "app-1", logDir.toString()));
      byte[] secret = HexFormat.of().parseHex(welcome.secret());
      Messages.Candidate reference = welcome.domains().get(0);
      AtomicInteger asked = new AtomicInteger();
      RegisteredResponders targets =
          new RegisteredResponders(
              () -> {
                asked.incrementAndGet();
                return ((Messages.Candidates) driver.receive(new Messages.Responders())).domains();
              });
      later = CloudProfiler.responderStart("127.0.0.1", 0, secret);
      stranger = CloudProfiler.responderStart("127.0.0.1", 0, secret);
      int laterPort = CloudProfiler.responderPort(later);
      int strangerPort = CloudProfiler.responderPort(stranger);
      try (ProbeControl control = new ProbeControl(secret, "127.0.0.1", targets)) {
        check(
            run(control, secret, "127.0.0.1", reference.responderPort()) == null,
            () -> "the driver's responder was refused");
        driver.receive(
            new Messages.Join(
                TscDomain.bootId(),
                reference.domain(),
                0,
                "127.0.0.1",
                laterPort,
                0,
                "2",
                2,
                "executor-2",
                "agrees",
                2e9,
                "null"));
        Thread.sleep(RegisteredResponders.ASK_INTERVAL_MS + 50);
        check(
            run(control, secret, "127.0.0.1", laterPort) == null,
            () -> "a responder that joined later was refused");
        String[][] unregistered = {
          {"127.0.0.1", String.valueOf(strangerPort)},
          {"127.0.0.2", String.valueOf(reference.responderPort())}
        };
        int before = asked.get();
        long t0 = System.nanoTime();
        for (int i = 0; i < 10; i++) {
          for (String[] target : unregistered) {
            String refusal = run(control, secret, target[0], Integer.parseInt(target[1]));
            check(
                refusal != null
                    && refusal.contains(
                        String.join(":", target) + " is not a probe responder of this application"),
                () -> "probed " + String.join(":", target) + ": " + refusal);
          }
        }
        long intervals =
            (System.nanoTime() - t0) / (RegisteredResponders.ASK_INTERVAL_MS * 1_000_000L);
        int asks = asked.get() - before;
        check(asks <= intervals + 1, () -> asks + " asks in " + intervals + " intervals");
      }
    } finally {
      if (later != 0) CloudProfiler.responderStop(later);
      if (stranger != 0) CloudProfiler.responderStop(stranger);
      driver.shutdown();
      try (var walk = Files.walk(logDir)) {
        for (Path p : walk.sorted(Comparator.reverseOrder()).toList()) Files.delete(p);
      }
    }
  }

  /** Null when a run through {@code control} to {@code address:port} answered, else its refusal. */
  private static String run(ProbeControl control, byte[] secret, String address, int port)
      throws IOException {
    try {
      long[] run = ProbeControl.request("127.0.0.1", control.port(), secret, address, port, 5, 500);
      check(run.length == 15 && run[2] != 0, () -> Arrays.toString(run));
      return null;
    } catch (ProbeControl.RunFailed e) {
      return e.getMessage();
    }
  }

  /**
   * The control listens on the address it was given only, and a flood of clients that connect and
   * say nothing or send garbage (more than a peer and all peers may keep waiting, more than the
   * workers and their queue) does not delay a run.
   */
  public static void testSilentAndGarbageClientsDoNotHoldTheProbeControlWhichListensOnOneAddress()
      throws Exception {
    loadNative();
    byte[] secret = TscDomain.newSecret();
    long responder = CloudProfiler.responderStart("127.0.0.1", 0, secret);
    int port = CloudProfiler.responderPort(responder);
    List<java.net.Socket> flood = new ArrayList<>();
    try (ProbeControl control = new ProbeControl(secret, "127.0.0.2", (a, p) -> p == port)) {
      try {
        new java.net.Socket("127.0.0.1", control.port()).close();
        throw new AssertionError("the control answers on 127.0.0.1 too");
      } catch (java.net.ConnectException refused) {
        // listening on 127.0.0.2 only
      }
      for (int i = 0; i < ProbeControl.PENDING + 44; i++) {
        java.net.Socket s = new java.net.Socket("127.0.0.2", control.port());
        if (i % 2 == 1) s.getOutputStream().write("\u0000garbage\nmore\n".getBytes());
        flood.add(s);
      }
      long t0 = System.nanoTime();
      long[] run =
          ProbeControl.request("127.0.0.2", control.port(), secret, "127.0.0.1", port, 5, 500);
      long ms = (System.nanoTime() - t0) / 1_000_000;
      check(
          run.length == 15 && ms < ProbeControl.REQUEST_TIMEOUT_MS / 2,
          () -> ms + " ms, " + Arrays.toString(run));
    } finally {
      for (java.net.Socket s : flood) s.close();
      CloudProfiler.responderStop(responder);
    }
  }

  /**
   * Only requests made with the application's secret run: the old token (a hash of the application
   * id), another secret's mac and a request seen on the network sent again are refused; a reply is
   * taken only when made with the secret.
   */
  public static void testTheProbeControlRunsOnlyRequestsMadeWithTheApplicationsSecret()
      throws Exception {
    loadNative();
    byte[] secret = TscDomain.newSecret(), other = TscDomain.newSecret();
    check(!Arrays.equals(secret, other), () -> "two secrets alike");
    long responder = CloudProfiler.responderStart("127.0.0.1", 0, secret);
    int port = CloudProfiler.responderPort(responder);
    String oldToken =
        HexFormat.of()
            .formatHex(
                java.security.MessageDigest.getInstance("SHA-256")
                    .digest("cloudprofiler:app-20260101000000-0000".getBytes()));
    try (ProbeControl control = new ProbeControl(secret, "127.0.0.1", (a, p) -> p == port)) {
      java.util.function.Function<String, String> exchange =
          line -> {
            try (java.net.Socket s = new java.net.Socket("127.0.0.1", control.port())) {
              s.getOutputStream().write((line + "\n").getBytes());
              return new java.io.BufferedReader(new java.io.InputStreamReader(s.getInputStream()))
                  .readLine();
            } catch (IOException e) {
              throw new java.io.UncheckedIOException(e);
            }
          };
      String body = "PROBE 7 127.0.0.1 " + port + " 5 500";
      String request = body + " " + ProbeControl.mac(secret, body); // as the network sees it
      String good = exchange.apply(request);
      check(good.startsWith("OK "), () -> good);
      String replayed = exchange.apply(request);
      check(replayed.startsWith("ERR request 7 is not after request 7"), () -> replayed);
      String[] refused = {
        exchange.apply("PROBE " + oldToken + " 127.0.0.1 " + port + " 5 500"),
        exchange.apply(
            "PROBE 8 127.0.0.1 " + port + " 5 500 " + ProbeControl.mac(other, "PROBE 8 127.0.0.1")),
        exchange.apply("PROBE 9 127.0.0.1 " + port + " 5 500 " + ProbeControl.mac(other, body))
      };
      for (String reply : refused) check(reply.startsWith("ERR expected PROBE"), () -> reply);
      try {
        ProbeControl.request("127.0.0.1", control.port(), other, "127.0.0.1", port, 5, 500);
        throw new AssertionError("a run for another secret");
      } catch (ProbeControl.RunFailed e) {
        throw new AssertionError("a reply taken without this secret: " + e.getMessage());
      } catch (IOException e) {
        check(e.getMessage().contains("not made with this application's secret"), e::getMessage);
      }
    } finally {
      CloudProfiler.responderStop(responder);
    }
  }
}
