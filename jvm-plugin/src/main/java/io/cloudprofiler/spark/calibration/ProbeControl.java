package io.cloudprofiler.spark.calibration;

import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.spark.Config;
import io.cloudprofiler.spark.DaemonThreads;
import io.cloudprofiler.spark.Guard;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Lets the driver ask an executor to probe a responder (the executor's domain probing the driver
 * back, or another host): a TCP socket through which the driver, one request per connection, asks
 * for a probe run and gets its (send, remote, recv) triples. Spark's plugin messages only go from
 * executors to the driver, so the driver needs a way in of its own to clock every probe run of the
 * cluster, one at a time.
 *
 * <p>The exchange, a line of ASCII each way: the client sends {@code PROBE <n> <address> <port>
 * <count> <timeoutMs> <mac>} as soon as it connects, the control answers {@code OK <send> <remote>
 * <recv> ... <mac>} or {@code ERR <message> <mac>}. Each mac is HMAC-SHA256 in hex, under the
 * application's probe secret (made at random by the driver, handed to executors over Spark's RPC;
 * see {@link TscDomain#newSecret}), of the line before it ({@link #mac}; a reply's with its
 * request's n): only the driver can ask for a run and no one else can answer in the control's name.
 * {@code n} counts the driver's requests and the control takes only an n above the last it took, so
 * that a request seen on the network cannot be sent again. A run goes only to a probe responder
 * that the driver registered for this application ({@link Targets}), and the control listens only
 * on the address where the driver reaches this executor.
 *
 * <p>One thread reads every request without blocking, as the connection is accepted (the driver's
 * has usually arrived by then) or later within {@link #REQUEST_TIMEOUT_MS}; only an authenticated
 * request takes one of the {@link #WORKERS} workers. A peer address keeps at most {@link
 * #PENDING_PER_PEER} connections waiting for their request (all peers {@link #PENDING}); past that
 * its oldest is closed, so that silent or garbage connections, however many, cost a file descriptor
 * each for at most 2 s and do not hold the driver's request back.
 */
public final class ProbeControl implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(ProbeControl.class);

  /** Probes sent first to tell an unreachable peer quickly, before the full run. */
  static final int FIRST_PROBES = 2;

  /** How long a connection may take to send its request line. */
  static final int REQUEST_TIMEOUT_MS = 2000;

  /** Authenticated requests run at once, and waiting for a worker. */
  static final int WORKERS = 4, QUEUED = 16;

  /** Connections waiting for their request, from one peer address and from all. */
  static final int PENDING_PER_PEER = 64, PENDING = 256;

  /** The longest request line: PROBE, n, an address, a port, a count, a timeout, a 64-digit mac. */
  private static final int MAX_LINE = 512;

  /** The requests this JVM (the driver) sent: each request's n. */
  private static final AtomicLong SENT = new AtomicLong();

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

  /** A connection that has not sent its request yet. */
  private static final class Pending {
    final SocketChannel channel;
    final InetAddress peer;
    final long deadlineNanos;
    final ByteBuffer line = ByteBuffer.allocate(MAX_LINE);

    Pending(SocketChannel channel, InetAddress peer, long deadlineNanos) {
      this.channel = channel;
      this.peer = peer;
      this.deadlineNanos = deadlineNanos;
    }
  }

  private final ServerSocketChannel server;
  private final Selector selector;
  private final byte[] secret;
  private final Targets targets;
  private final ThreadPoolExecutor workers;
  private final Guard guard = new Guard("the probe control");

  /** Oldest first (their deadlines in the same order), and how many of them each peer has. */
  private final LinkedHashSet<Pending> pending = new LinkedHashSet<>();

  private final Map<InetAddress, Integer> pendingOf = new HashMap<>();
  private boolean saidClosing;

  /** The n of the last request taken (read and written by the accepting thread only). */
  private long lastTaken;

  /** A control on a free port of {@code bindAddress}, answering runs to {@code targets} only. */
  public ProbeControl(byte[] secret, String bindAddress, Targets targets) throws IOException {
    this.secret = secret.clone();
    this.targets = targets;
    selector = Selector.open();
    server = ServerSocketChannel.open();
    try {
      server.bind(new InetSocketAddress(bindAddress, 0), PENDING);
      server.configureBlocking(false);
      server.register(selector, SelectionKey.OP_ACCEPT);
    } catch (IOException | RuntimeException e) {
      server.close();
      selector.close();
      throw e;
    }
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

  public int port() {
    return server.socket().getLocalPort();
  }

  /** HMAC-SHA256 under {@code secret} of {@code text}, in hex. */
  static String mac(byte[] secret, String text) {
    return HexFormat.of().formatHex(TscDomain.hmac(secret, text));
  }

  /** What a reply's mac covers: the request's n, then the reply. */
  private static String replied(long n, String body) {
    return "REPLY " + n + "\n" + body;
  }

  private void serve() {
    try {
      while (server.isOpen()) {
        long wait = 0; // select without a timeout while nothing waits for its request
        if (!pending.isEmpty()) {
          long left = pending.iterator().next().deadlineNanos - System.nanoTime();
          wait = Math.max(1, TimeUnit.NANOSECONDS.toMillis(left) + 1);
        }
        selector.select(wait);
        if (!server.isOpen()) return;
        List<Pending> complete = new ArrayList<>();
        for (Iterator<SelectionKey> it = selector.selectedKeys().iterator(); it.hasNext(); ) {
          SelectionKey key = it.next();
          it.remove();
          if (!key.isValid()) continue;
          if (key.isAcceptable()) acceptAll();
          else if (key.isReadable() && read((Pending) key.attachment())) {
            key.cancel();
            complete.add((Pending) key.attachment());
          }
        }
        long now = System.nanoTime();
        while (!pending.isEmpty() && pending.iterator().next().deadlineNanos - now <= 0)
          drop(pending.iterator().next());
        if (!complete.isEmpty()) {
          selector.selectNow(); // deregisters the cancelled keys: their channels may block again
          for (Pending p : complete) dispatch(p);
        }
      }
    } catch (IOException e) {
      if (server.isOpen()) {
        LOG.warn("cloudprofiler: probe control stops accepting: {}", e.toString());
        close();
      }
    } catch (Throwable e) { // an Error would end the thread with the control's port still open
      guard.disable("the probe control's requests", e);
      close();
    } finally {
      for (Pending p : new ArrayList<>(pending)) drop(p);
      closeQuietly(selector);
    }
  }

  /**
   * Accepts every waiting connection: one whose request is there already is dispatched at once (the
   * selector never saw it), the others wait for theirs.
   */
  private void acceptAll() throws IOException {
    for (SocketChannel c; (c = server.accept()) != null; ) {
      InetAddress peer = ((InetSocketAddress) c.getRemoteAddress()).getAddress();
      Pending p =
          new Pending(
              c, peer, System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(REQUEST_TIMEOUT_MS));
      try {
        c.configureBlocking(false);
      } catch (IOException e) {
        closeQuietly(c);
        continue;
      }
      pending.add(p); // read() forgets or drops it
      pendingOf.merge(peer, 1, Integer::sum);
      if (read(p)) {
        dispatch(p);
        continue;
      }
      if (!c.isOpen()) continue;
      try {
        c.register(selector, SelectionKey.OP_READ, p);
      } catch (IOException e) {
        drop(p);
        continue;
      }
      if (pendingOf.getOrDefault(peer, 0) > PENDING_PER_PEER) {
        for (Pending old : pending) {
          if (old.peer.equals(peer)) {
            drop(old);
            break;
          }
        }
        closingSaid(peer);
      }
      if (pending.size() > PENDING) {
        drop(pending.iterator().next());
        closingSaid(peer);
      }
    }
  }

  /** One line, once, the first time connections that sent no request are closed early. */
  private void closingSaid(InetAddress peer) {
    if (saidClosing) return;
    saidClosing = true;
    LOG.warn(
        "cloudprofiler: probe control on port {}: more than {} connections from {} (or {} from all)"
            + " sent no request; the oldest are closed",
        port(),
        PENDING_PER_PEER,
        peer.getHostAddress(),
        PENDING);
  }

  /**
   * Reads what the connection sent; whether its line is complete (false: dropped or still open).
   */
  private boolean read(Pending p) {
    int n;
    try {
      n = p.channel.read(p.line);
    } catch (IOException e) {
      n = -1;
    }
    if (n < 0) {
      drop(p);
      return false;
    }
    byte[] bytes = p.line.array();
    for (int i = p.line.position() - n; i < p.line.position(); i++) {
      if (bytes[i] == '\n') {
        forget(p);
        return true;
      }
    }
    if (!p.line.hasRemaining()) drop(p); // no request is that long
    return false;
  }

  private void forget(Pending p) {
    if (pending.remove(p)) pendingOf.computeIfPresent(p.peer, (k, v) -> v == 1 ? null : v - 1);
  }

  private void drop(Pending p) {
    forget(p);
    closeQuietly(p.channel);
  }

  /**
   * A complete request: to a worker when made with the secret and new, else refused at once (the
   * reply's mac then covers n 0).
   */
  private void dispatch(Pending p) {
    String line = requestLine(p);
    String[] f = line.split(" ");
    long n = f.length == 7 && f[1].matches("[0-9]{1,18}") ? Long.parseLong(f[1]) : 0;
    boolean authentic =
        n > 0
            && f[0].equals("PROBE")
            && MessageDigest.isEqual(
                f[6].getBytes(StandardCharsets.US_ASCII),
                mac(secret, line.substring(0, line.lastIndexOf(' ')))
                    .getBytes(StandardCharsets.US_ASCII));
    if (!authentic || n <= lastTaken) {
      reply(
          p,
          0,
          authentic
              ? "ERR request " + n + " is not after request " + lastTaken + ": sent again"
              : "ERR expected PROBE <n> <address> <port> <count> <timeoutMs> <mac of this"
                  + " application>");
      closeQuietly(p.channel);
      return;
    }
    lastTaken = n;
    try {
      p.channel.configureBlocking(true);
      workers.execute(() -> handle(p, n, f));
    } catch (IOException | RejectedExecutionException busy) {
      closeQuietly(p.channel);
    }
  }

  private static String requestLine(Pending p) {
    String text = new String(p.line.array(), 0, p.line.position(), StandardCharsets.US_ASCII);
    return text.substring(0, text.indexOf('\n')).trim();
  }

  /** Sends a reply line, authenticated; on a non-blocking channel as much as its buffer takes. */
  private void reply(Pending p, long n, String body) {
    String line = body + " " + mac(secret, replied(n, body)) + "\n";
    try {
      ByteBuffer out = ByteBuffer.wrap(line.getBytes(StandardCharsets.US_ASCII));
      while (out.hasRemaining()) if (p.channel.write(out) == 0) return;
    } catch (IOException e) {
      // the client went away: nothing to answer
    }
  }

  private void handle(Pending p, long n, String[] request) {
    try {
      DaemonThreads.faultPoint();
      reply(p, n, answer(Arrays.copyOfRange(request, 1, request.length)));
    } catch (Exception e) {
      LOG.warn("cloudprofiler: probe control connection failed: {}", e.toString());
    } catch (Throwable e) { // an Error would end the worker, and on a cluster the executor's JVM
      guard.disable("a probe run", e);
      close();
    } finally {
      closeQuietly(p.channel);
    }
  }

  private static void closeQuietly(java.io.Closeable c) {
    try {
      c.close();
    } catch (IOException ignored) {
      // a connection refused or done with: nothing to recover
    }
  }

  /** The reply to an authenticated request: f = {n, address, port, count, timeoutMs, mac}. */
  private String answer(String[] f) {
    Integer count = Config.CALIBRATION_PROBES.parse(f[3]),
        timeoutMs = Config.CALIBRATION_TIMEOUT.parse(f[4]);
    if (count == null || timeoutMs == null) {
      return "ERR count "
          + f[3]
          + " or timeout "
          + f[4]
          + " is not "
          + Config.CALIBRATION_PROBES.expected
          + " and "
          + Config.CALIBRATION_TIMEOUT.expected;
    }
    try {
      int port = Integer.parseInt(f[2]);
      if (port < 1 || port > 65535)
        return "ERR port " + port + " is out of range: expected 1 to 65535";
      if (!targets.registered(f[1], port)) {
        return "ERR " + f[1] + ":" + port + " is not a probe responder of this application";
      }
      StringBuilder out = new StringBuilder("OK");
      for (long v : probe(f[1], port, count, timeoutMs, secret)) out.append(' ').append(v);
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
  public static long[] probe(String address, int port, int count, int timeoutMs, byte[] secret) {
    long[] first =
        CloudProfiler.probePeer(
            address, port, Math.min(count, FIRST_PROBES), timeoutMs, secret, true);
    if (count <= FIRST_PROBES) return first;
    return ProbeRuns.joined(
        first,
        ProbeRuns.inBursts(
            count - FIRST_PROBES,
            (size, spin) -> CloudProfiler.probePeer(address, port, size, timeoutMs, secret, spin)));
  }

  /**
   * Asks the process whose control socket is host:controlPort to probe address:port; throws on any
   * failure: {@link RunFailed} when the control answered with an error.
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
    String where = "probe control at " + host + ":" + controlPort;
    long n = SENT.incrementAndGet();
    try (Socket s = new Socket()) {
      s.connect(new InetSocketAddress(host, controlPort), 2000);
      String line =
          String.join(
              " ",
              "PROBE",
              String.valueOf(n),
              address,
              String.valueOf(port),
              String.valueOf(count),
              String.valueOf(timeoutMs));
      line += " " + mac(secret, line);
      s.getOutputStream().write((line + "\n").getBytes(StandardCharsets.US_ASCII));
      s.setSoTimeout(count * timeoutMs + 5000);
      String reply =
          new BufferedReader(new InputStreamReader(s.getInputStream(), StandardCharsets.US_ASCII))
              .readLine();
      if (reply == null) throw new IOException(where + ": no answer");
      int cut = reply.lastIndexOf(' ');
      String body = cut < 0 ? "" : reply.substring(0, cut);
      if (cut < 0
          || !MessageDigest.isEqual(
              reply.substring(cut + 1).getBytes(StandardCharsets.US_ASCII),
              mac(secret, replied(n, body)).getBytes(StandardCharsets.US_ASCII)))
        throw new IOException(
            where + ": a reply not made with this application's secret: " + reply);
      if (!body.startsWith("OK")) throw new RunFailed(where + ": " + body);
      String[] f = body.substring(2).trim().split(" ");
      long[] out = new long[f[0].isEmpty() ? 0 : f.length];
      for (int i = 0; i < out.length; i++) out[i] = Long.parseLong(f[i]);
      return out;
    }
  }

  @Override
  public void close() {
    try {
      server.close();
      selector.wakeup();
    } catch (IOException ignored) {
      // closing a listening socket: nothing to recover
    }
    workers.shutdownNow();
  }
}
