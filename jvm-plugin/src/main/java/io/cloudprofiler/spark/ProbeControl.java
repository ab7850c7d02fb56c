package io.cloudprofiler.spark;

import io.cloudprofiler.CloudProfiler;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Lets the driver ask an executor to probe a responder (the executor's domain probing the driver
 * back, or another host): a TCP socket that takes one line {@code PROBE <token> <address> <port>
 * <count> <timeoutMs>} per connection and answers {@code OK <send> <remote> <recv> ...} or {@code
 * ERR <message>}. Spark's plugin messages only go from executors to the driver, so the driver needs
 * a way in of its own to clock every probe run of the cluster, one at a time. The token is derived
 * from the application id: like the responder's secret it keeps other applications out, it does not
 * defend against an attacker who can read the network.
 *
 * <p>Whoever learns the token (an application id is shown in UIs and logs) can ask for probe runs,
 * so a run goes only to a probe responder that the driver registered for this application ({@link
 * Targets}), and the control listens only on the address where the driver reaches this executor.
 * Each connection is served by a small pool, with a deadline for its request line, so that a client
 * that connects and stays silent holds one worker for {@link #REQUEST_TIMEOUT_MS} at most and never
 * the others; connections past the pool and its queue are closed.
 */
final class ProbeControl implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(ProbeControl.class);

  /** Probes sent first to tell an unreachable peer quickly, before the full run. */
  static final int FIRST_PROBES = 2;

  /** How long a connection may take to send its request line. */
  static final int REQUEST_TIMEOUT_MS = 2000;

  /** Connections served at once, and waiting for a worker. */
  static final int WORKERS = 4, QUEUED = 16;

  /** The longest request line: PROBE, a 64-digit token, an address, a port, a count, a timeout. */
  private static final int MAX_LINE = 512;

  /** The probe responders a run may go to: those the driver registered for this application. */
  interface Targets {
    boolean registered(String address, int port);
  }

  /** The control answered, with an error: the process is there, its probe run failed. */
  static final class RunFailed extends IOException {
    RunFailed(String message) {
      super(message);
    }
  }

  private final ServerSocket server;
  private final String token;
  private final byte[] secret;
  private final Targets targets;
  private final ThreadPoolExecutor workers;
  private final Guard guard = new Guard("the probe control");

  /** A control on a free port of {@code bindAddress}, answering runs to {@code targets} only. */
  ProbeControl(byte[] secret, String bindAddress, Targets targets) throws IOException {
    this.secret = secret;
    this.targets = targets;
    token = HexFormat.of().formatHex(secret);
    server = new ServerSocket();
    server.bind(new InetSocketAddress(bindAddress, 0), QUEUED);
    workers =
        new ThreadPoolExecutor(
            WORKERS,
            WORKERS,
            30,
            TimeUnit.SECONDS,
            new ArrayBlockingQueue<>(QUEUED),
            DaemonThreads.named("cloudprofiler-probe-control-worker"));
    workers.allowCoreThreadTimeOut(true);
    DaemonThreads.start("cloudprofiler-probe-control", this::serve);
  }

  int port() {
    return server.getLocalPort();
  }

  private void serve() {
    while (!server.isClosed()) {
      Socket s;
      try {
        s = server.accept();
      } catch (IOException e) {
        if (!server.isClosed())
          LOG.warn("cloudprofiler: probe control stops accepting: {}", e.toString());
        return;
      }
      try {
        workers.execute(() -> handle(s));
      } catch (RejectedExecutionException busy) {
        closeQuietly(s);
      }
    }
  }

  private void handle(Socket connection) {
    try (Socket s = connection) {
      s.setSoTimeout(REQUEST_TIMEOUT_MS);
      DaemonThreads.faultPoint();
      String reply = answer(readLine(s));
      OutputStream out = s.getOutputStream();
      out.write((reply + "\n").getBytes(StandardCharsets.US_ASCII));
      out.flush();
    } catch (SocketException closed) {
      if (!server.isClosed())
        LOG.warn("cloudprofiler: probe control connection failed: {}", closed.toString());
    } catch (Exception e) {
      LOG.warn("cloudprofiler: probe control connection failed: {}", e.toString());
    } catch (Throwable e) { // an Error would end the worker, and on a cluster the executor's JVM
      guard.disable("a probe run", e);
      close();
    }
  }

  /**
   * The request line, read whole within {@link #REQUEST_TIMEOUT_MS} (not per byte) and at most
   * MAX_LINE long.
   */
  private static String readLine(Socket s) throws IOException {
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(REQUEST_TIMEOUT_MS);
    StringBuilder line = new StringBuilder();
    java.io.InputStream in = s.getInputStream();
    while (line.length() < MAX_LINE) {
      long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
      if (left <= 0)
        throw new java.net.SocketTimeoutException(
            "no request line within " + REQUEST_TIMEOUT_MS + " ms");
      s.setSoTimeout((int) left);
      int c = in.read();
      if (c == -1 || c == '\n') return line.toString();
      line.append((char) c);
    }
    return line.toString();
  }

  private static void closeQuietly(Socket s) {
    try {
      s.close();
    } catch (IOException ignored) {
      // a connection refused for lack of workers: nothing to recover
    }
  }

  private String answer(String line) {
    String[] f = line == null ? new String[0] : line.trim().split(" ");
    if (f.length != 6 || !f[0].equals("PROBE")) {
      return "ERR expected PROBE <token> <address> <port> <count> <timeoutMs>";
    }
    if (!MessageDigest.isEqual(
        f[1].getBytes(StandardCharsets.US_ASCII), token.getBytes(StandardCharsets.US_ASCII))) {
      return "ERR wrong token";
    }
    Integer count = Config.CALIBRATION_PROBES.parse(f[4]),
        timeoutMs = Config.CALIBRATION_TIMEOUT.parse(f[5]);
    if (count == null || timeoutMs == null) {
      return "ERR count "
          + f[4]
          + " or timeout "
          + f[5]
          + " is not "
          + Config.CALIBRATION_PROBES.expected
          + " and "
          + Config.CALIBRATION_TIMEOUT.expected;
    }
    try {
      int port = Integer.parseInt(f[3]);
      if (port < 1 || port > 65535)
        return "ERR port " + port + " is out of range: expected 1 to 65535";
      if (!targets.registered(f[2], port)) {
        return "ERR " + f[2] + ":" + port + " is not a probe responder of this application";
      }
      StringBuilder out = new StringBuilder("OK");
      for (long v : probe(f[2], port, count, timeoutMs, secret)) out.append(' ').append(v);
      return out.toString();
    } catch (RuntimeException e) {
      return "ERR " + String.valueOf(e.getMessage()).replace('\n', ' ');
    }
  }

  /**
   * A probe run from this process: {@link #FIRST_PROBES} probes (an unreachable peer fails after
   * their timeouts, not after count of them), then the rest in bursts ({@link ProbeRuns#inBursts});
   * (send, remote, recv) triples, recv 0 where unanswered.
   */
  static long[] probe(String address, int port, int count, int timeoutMs, byte[] secret) {
    long[] first =
        CloudProfiler.probePeer(address, port, Math.min(count, FIRST_PROBES), timeoutMs, secret);
    if (count <= FIRST_PROBES) return first;
    return ProbeRuns.joined(
        first,
        ProbeRuns.inBursts(
            count - FIRST_PROBES,
            size -> CloudProfiler.probePeer(address, port, size, timeoutMs, secret)));
  }

  /**
   * Asks the process whose control socket is host:controlPort to probe address:port; throws on any
   * failure.
   */
  static long[] request(
      String host,
      int controlPort,
      byte[] secret,
      String address,
      int port,
      int count,
      int timeoutMs)
      throws IOException {
    try (Socket s = new Socket()) {
      s.connect(new InetSocketAddress(host, controlPort), 2000);
      s.setSoTimeout(count * timeoutMs + 5000);
      String line =
          String.join(
              " ",
              "PROBE",
              HexFormat.of().formatHex(secret),
              address,
              String.valueOf(port),
              String.valueOf(count),
              String.valueOf(timeoutMs));
      s.getOutputStream().write((line + "\n").getBytes(StandardCharsets.US_ASCII));
      InputStreamReader in = new InputStreamReader(s.getInputStream(), StandardCharsets.US_ASCII);
      String reply = new BufferedReader(in).readLine();
      if (reply == null)
        throw new IOException("probe control at " + host + ":" + controlPort + ": no answer");
      if (!reply.startsWith("OK"))
        throw new RunFailed("probe control at " + host + ":" + controlPort + ": " + reply);
      String[] f = reply.substring(2).trim().split(" ");
      long[] out = new long[f[0].isEmpty() ? 0 : f.length];
      for (int i = 0; i < out.length; i++) out[i] = Long.parseLong(f[i]);
      return out;
    }
  }

  @Override
  public void close() {
    try {
      server.close();
    } catch (IOException ignored) {
      // closing a listening socket: nothing to recover
    }
    workers.shutdownNow();
  }
}
