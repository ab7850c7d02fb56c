package io.cloudprofiler.spark.executor;

import io.cloudprofiler.spark.Messages;
import io.cloudprofiler.spark.Options;
import io.cloudprofiler.spark.calibration.ProbeControl;
import io.cloudprofiler.spark.calibration.RegisteredResponders;
import io.cloudprofiler.spark.calibration.TscDomain;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Finds an executor's TSC domain with the driver ({@link TscDomain}): joins that of a member in
 * this JVM (the driver's, in local mode) as it is; else has the executor start its probe responder
 * and probe control ({@link CloudProfilerExecutorPlugin#startProbing}), probes a member of each
 * domain of this boot id until one agrees ({@link TscDomain#check}), or founds a new domain.
 */
final class DomainJoin {
  /** How long the probe control waits for the driver's list of probe responders. */
  private static final long RESPONDERS_WAIT_SECONDS = 5;

  private final CloudProfilerExecutorPlugin executor;
  private final String executorId;
  private final Options options;

  DomainJoin(CloudProfilerExecutorPlugin executor, String executorId, Options options) {
    this.executor = executor;
    this.executorId = executorId;
    this.options = options;
  }

  /** Joins a domain of application {@code appId}; returns {domain, what the check found}. */
  String[] join(String appId) throws Exception {
    String boot = TscDomain.bootId();
    if (!(executor.ask(new Messages.Hello(boot, appId, options.logDir()))
        instanceof Messages.Welcome welcome)) throw unassigned(null);
    Object reply = new Messages.Candidates(welcome.domains());
    for (Messages.Candidate c : welcome.domains()) {
      if (TscDomain.PROCESS.equals(c.process())) return joinOwnJvm(boot, c);
    }
    if (welcome.secret().isEmpty()) return joinUncalibrated(boot); // the driver has said why
    byte[] secret =
        HexFormat.of().parseHex(welcome.secret()); // made by the driver, over Spark's RPC
    String address = blockManagerHost(); // what the driver reaches
    RegisteredResponders targets =
        new RegisteredResponders(
            () ->
                ((Messages.Candidates)
                        executor.askWithin(new Messages.Responders(), RESPONDERS_WAIT_SECONDS))
                    .domains());
    executor.startProbing(address, secret, targets);
    int count = options.calibrationProbes();
    int timeoutMs = options.calibrationTimeoutMs();
    List<String> checks = new ArrayList<>();
    int checked = 0;
    for (int attempt = 0;
        attempt < 10 && reply instanceof Messages.Candidates candidates;
        attempt++) {
      String domain = "";
      List<Messages.Candidate> list = candidates.domains();
      for (int i = checked; i < list.size() && domain.isEmpty(); i++) {
        Messages.Candidate c = list.get(i);
        try {
          TscDomain.Check result =
              TscDomain.check(
                  ProbeControl.probe(c.host(), c.responderPort(), count, timeoutMs, secret));
          checks.add(result.describe(c.domain()));
          if (result.agrees) domain = c.domain();
        } catch (RuntimeException e) {
          checks.add(
              "could not probe "
                  + c.domain()
                  + " at "
                  + c.host()
                  + ":"
                  + c.responderPort()
                  + ": "
                  + e.getMessage());
        }
      }
      checked = Math.max(checked, list.size());
      if (domain.isEmpty()) checks.add("founds a domain");
      String check = String.join("; ", checks);
      reply =
          executor.ask(
              new Messages.Join(
                  boot,
                  domain,
                  checked,
                  address,
                  executor.responderPort(),
                  executor.controlPort(),
                  executorId,
                  ProcessHandle.current().pid(),
                  TscDomain.PROCESS,
                  check,
                  TscDomain.tscHz(),
                  TscDomain.simulation()));
      if (reply instanceof Messages.Joined joined) {
        targets
            .refresh(); // the driver's responder among them: the last run, which the driver clocks,
        // probes it
        return new String[] {joined.domain(), check};
      }
      if (domain.isEmpty()) checks.remove(checks.size() - 1);
    }
    throw unassigned(reply);
  }

  /**
   * Joins the domain of {@code member}, a process of this JVM: its responder answers probes for
   * this executor too, and the driver never asks this executor to probe (its domain is the
   * driver's).
   */
  private String[] joinOwnJvm(String boot, Messages.Candidate member) throws Exception {
    String check = "shares the JVM of " + member.domain() + "'s member (no probes needed)";
    return joinAs(boot, member.domain(), member.host(), member.responderPort(), check);
  }

  /** Tells a driver that does not calibrate that this executor is there: no probes, no secret. */
  private String[] joinUncalibrated(String boot) throws Exception {
    return joinAs(boot, "", blockManagerHost(), 0, "not checked: the driver does not calibrate");
  }

  /**
   * Asks the driver to place this executor in {@code domain} ("": a new one) with no probe run,
   * reachable at {@code host} ({@code port}: a responder's, or 0); returns {domain, check}.
   */
  private String[] joinAs(String boot, String domain, String host, int port, String check)
      throws Exception {
    Object reply =
        executor.ask(
            new Messages.Join(
                boot,
                domain,
                0,
                host,
                port,
                0,
                executorId,
                ProcessHandle.current().pid(),
                TscDomain.PROCESS,
                check,
                TscDomain.tscHz(),
                TscDomain.simulation()));
    if (reply instanceof Messages.Joined joined) return new String[] {joined.domain(), check};
    throw unassigned(reply);
  }

  private static IllegalStateException unassigned(Object reply) {
    return new IllegalStateException(
        "the driver did not assign a TSC domain (reply: " + reply + ")");
  }

  /**
   * The host of this executor's block manager (in local mode it gets its id just after the
   * application's).
   */
  private static String blockManagerHost() throws InterruptedException {
    long deadline =
        System.nanoTime()
            + TimeUnit.SECONDS.toNanos(CloudProfilerExecutorPlugin.APPLICATION_ID_WAIT_SECONDS);
    org.apache.spark.storage.BlockManager manager = org.apache.spark.SparkEnv.get().blockManager();
    while (manager.blockManagerId() == null && System.nanoTime() < deadline) Thread.sleep(5);
    if (manager.blockManagerId() == null)
      throw new IllegalStateException("the block manager has no address");
    return manager.blockManagerId().host();
  }
}
