package io.cloudprofiler.spark.calibration;

import io.cloudprofiler.spark.Messages;
import java.util.List;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The probe responders that the driver registered for this application, the only targets of an
 * executor's probe control: learnt from the driver ({@link Messages.Responders}) after the executor
 * joins its domain, and asked again when a run names one not known yet (an executor that joined
 * later), at most once per {@link #ASK_INTERVAL_MS}, so that requests naming other addresses cannot
 * make an executor flood the driver.
 */
public final class RegisteredResponders implements ProbeControl.Targets {
  private static final Logger LOG = LoggerFactory.getLogger(RegisteredResponders.class);
  static final long ASK_INTERVAL_MS = 200;

  private final Callable<List<Messages.Candidate>> driver;
  private final Set<String> known = ConcurrentHashMap.newKeySet();
  private long lastAskNanos;
  private boolean asked;

  /** {@code driver}: asks the driver for the registered responders (a bounded wait). */
  public RegisteredResponders(Callable<List<Messages.Candidate>> driver) {
    this.driver = driver;
  }

  private static String key(String address, int port) {
    return address + ":" + port;
  }

  /** Asks the driver now; keeps what was known when the driver does not answer. */
  public synchronized void refresh() {
    asked = true;
    lastAskNanos = System.nanoTime();
    try {
      for (Messages.Candidate c : driver.call()) known.add(key(c.host(), c.responderPort()));
    } catch (Exception e) {
      LOG.warn(
          "cloudprofiler: could not ask the driver for the probe responders of this application:"
              + " {}",
          e.toString());
    }
  }

  @Override
  public boolean registered(String address, int port) {
    if (known.contains(key(address, port))) return true;
    synchronized (this) {
      if (asked
          && System.nanoTime() - lastAskNanos < TimeUnit.MILLISECONDS.toNanos(ASK_INTERVAL_MS))
        return false;
      refresh();
    }
    return known.contains(key(address, port));
  }
}
