/*
 * The live replay's load generator on the Apache Cassandra Java driver 4 (kinds/cassandra/replay/generator.py
 * compiles and runs it; the formats of its plan, its config and its one line of JSON are documented there and in
 * kinds/cassandra/replay/plan.py, config.py and result.py).
 *
 *   java -cp CLASSES:LIB/* Generator PLAN CONFIG
 *   java -cp CLASSES:LIB/* Generator probe PLAN CONFIG ROUNDS WARMUP
 *
 * Probe mode (calibration's client path, kinds/cassandra/calibration.py): each plan arm's statement, bound to its
 * first request's values, executed synchronously one at a time in rounds (arm 0, arm 1, ...), WARMUP rounds
 * uncounted, then ROUNDS timed client-side; it prints each arm's latencies in µs. Same session, node filter and
 * sandbox as a run.
 *
 * Open loop: request i is sent at start + offset_i / rate_scale, whatever the ones before it did; its latency is
 * measured from that intended start (no coordinated omission) into its arm's HDR histogram, and the generator's own
 * lag (actual send - intended) into a histogram of its own. A request is the application's: its queries (one per
 * partition, or one IN per chunk of keys: plan.py) leave together at its send, each on executeAsync, and their
 * CompletionStages are joined by a counter (no thread per request, nothing blocks on an answer): the request
 * completes with its last query's answer, and fails when any query failed. Each query outstanding takes a permit
 * of max_in_flight; a send that finds too few waits for them: that wait is lag (counted in "throttled"), a request
 * is never dropped. With block_s,
 * each arm's latencies are also kept per block of block_s seconds of intended send time (block b holds the requests
 * intended in [b, b + 1) x block_s from the start), at 2 significant digits: what the live replay's block
 * bootstrap resamples.
 *
 * One session; one execution profile per arm (consistency, request timeout, speculative execution policy, slow
 * replica avoidance), every statement prepared per arm and marked idempotent (the driver hedges no other). Every
 * profile's load balancing policy is given one node distance evaluator that sets every node whose address and port
 * are not in the config's allow-list IGNORED: the driver opens no connection to it. The contact points must be in
 * the list. The netty timer's tick (speculative executions and request timeouts fire on it) is the config's.
 *
 * Exit status: 0 a result; 2 the plan or the config refused; 3 aborted (errors and timeouts over the config's
 * fraction: the partial result, with "status": "aborted"); 4 the session could not be opened or a statement not
 * prepared. Always one JSON object on stdout; the password (environment TAILTUNE_GENERATOR_PASSWORD) is never
 * printed.
 */

import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.CqlSessionBuilder;
import com.datastax.oss.driver.api.core.DriverTimeoutException;
import com.datastax.oss.driver.api.core.config.DefaultDriverOption;
import com.datastax.oss.driver.api.core.config.DriverConfigLoader;
import com.datastax.oss.driver.api.core.config.DriverExecutionProfile;
import com.datastax.oss.driver.api.core.config.ProgrammaticDriverConfigLoaderBuilder;
import com.datastax.oss.driver.api.core.cql.AsyncResultSet;
import com.datastax.oss.driver.api.core.cql.BoundStatementBuilder;
import com.datastax.oss.driver.api.core.cql.PreparedStatement;
import com.datastax.oss.driver.api.core.cql.SimpleStatement;
import com.datastax.oss.driver.api.core.loadbalancing.NodeDistance;
import com.datastax.oss.driver.api.core.loadbalancing.NodeDistanceEvaluator;
import com.datastax.oss.driver.api.core.metadata.Node;
import com.datastax.oss.driver.api.core.servererrors.ReadTimeoutException;
import com.datastax.oss.driver.api.core.servererrors.WriteTimeoutException;
import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.StringWriter;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicIntegerFieldUpdater;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongFieldUpdater;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.AtomicReferenceFieldUpdater;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BiConsumer;
import java.util.regex.Pattern;
import org.HdrHistogram.Histogram;

public final class Generator {
  static final int EXIT_BAD_INPUT = 2;
  static final int EXIT_ABORTED = 3;
  static final int EXIT_FAILED = 4;

  static final byte[] PLAN_MAGIC = "TTPLAN1\n".getBytes(StandardCharsets.US_ASCII);
  static final int MAX_HEADER = 1 << 24;
  static final int MAX_ARMS = 64;
  static final int MAX_STATEMENT = 16384;
  static final int MAX_VALUES = 64;
  static final int MAX_VALUE_BYTES = 1 << 16;
  static final long MAX_REQUESTS = 50_000_000L;
  static final int MAX_QUERIES = 16384;
  static final long MAX_TOTAL_QUERIES = 100_000_000L;
  /** Rows per page: above any query a plan can bind (an IN list of at most 64 KiB holds at most 16384 keys), so a
   * query's answer is its first page. */
  static final int PAGE_SIZE = 32768;
  /** Histograms in microseconds, 1 µs to one hour, 3 significant digits (the Python side's layout). */
  static final long HIGHEST_US = 3_600_000_000L;
  static final int DIGITS = 3;
  /** The per-block histograms' digits (buckets 1 % wide: an eighth of the memory of 3 digits). */
  static final int BLOCK_DIGITS = 2;
  /** Most block histograms of one run (arms x blocks): about 27 KiB each. */
  static final long MAX_BLOCK_HISTOGRAMS = 4096;
  static final Pattern ARM_NAME = Pattern.compile("[A-Za-z0-9_-]{1,64}");
  static final Set<String> CONSISTENCIES =
      Set.of("ANY", "ONE", "TWO", "THREE", "QUORUM", "ALL", "LOCAL_ONE", "LOCAL_QUORUM", "EACH_QUORUM");
  static final Set<String> SPECULATIVE_CLASSES =
      Set.of("NoSpeculativeExecutionPolicy", "ConstantSpeculativeExecutionPolicy");

  /** A refusal of the plan or the config (exit 2). */
  static final class BadInput extends Exception {
    private static final long serialVersionUID = 1L;

    BadInput(String message) {
      super(message);
    }
  }

  // --- the plan ---------------------------------------------------------------------------------------------

  static final class PlanArm {
    String name;
    String statement;
  }

  static final class Plan {
    List<PlanArm> arms = new ArrayList<>();
    long[] offsetsUs;
    short[] arm;
    /** Per request its queries, per query its values. */
    ByteBuffer[][][] queries;
  }

  static Plan readPlan(String path) throws IOException, BadInput {
    try (DataInputStream in =
        new DataInputStream(new BufferedInputStream(new FileInputStream(path), 1 << 16))) {
      byte[] magic = new byte[PLAN_MAGIC.length];
      in.readFully(magic);
      if (!java.util.Arrays.equals(magic, PLAN_MAGIC)) {
        throw new BadInput("the plan does not start with TTPLAN1");
      }
      int headerLength = in.readInt();
      if (headerLength <= 0 || headerLength > MAX_HEADER) {
        throw new BadInput("the plan's header length " + headerLength + " is out of range");
      }
      byte[] header = new byte[headerLength];
      in.readFully(header);
      JsonNode h = new ObjectMapper().readTree(header);
      if (h == null || !h.isObject()) throw new BadInput("the plan's header is not a JSON object");
      JsonNode version = h.get("version");
      if (version == null || !version.isInt() || (version.asInt() != 1 && version.asInt() != 2)) {
        throw new BadInput("the plan's header: version 1 or 2 expected");
      }
      boolean v1 = version.asInt() == 1;
      Plan plan = new Plan();
      JsonNode arms = h.get("arms");
      if (arms == null || !arms.isArray() || arms.size() == 0 || arms.size() > MAX_ARMS) {
        throw new BadInput("the plan's arms: 1 to " + MAX_ARMS + " expected");
      }
      for (JsonNode a : arms) {
        PlanArm arm = new PlanArm();
        arm.name = text(a, "name", "plan arm");
        if (!ARM_NAME.matcher(arm.name).matches()) {
          throw new BadInput("plan arm name " + quote(arm.name) + " is not [A-Za-z0-9_-]{1,64}");
        }
        arm.statement = text(a, "statement", "plan arm " + arm.name);
        if (arm.statement.length() > MAX_STATEMENT) throw new BadInput("plan arm " + arm.name + ": statement too long");
        plan.arms.add(arm);
      }
      JsonNode n = h.get("requests");
      if (n == null || !n.canConvertToLong() || n.asLong() < 0 || n.asLong() > MAX_REQUESTS) {
        throw new BadInput("the plan's requests: a count from 0 to " + MAX_REQUESTS + " expected");
      }
      int count = (int) n.asLong();
      long total = count;
      if (!v1) {
        JsonNode q = h.get("queries");
        if (q == null || !q.canConvertToLong() || q.asLong() < 0 || q.asLong() > MAX_TOTAL_QUERIES) {
          throw new BadInput("the plan's queries: a count from 0 to " + MAX_TOTAL_QUERIES + " expected");
        }
        total = q.asLong();
      }
      plan.offsetsUs = new long[count];
      plan.arm = new short[count];
      plan.queries = new ByteBuffer[count][][];
      long previous = 0;
      long seen = 0;
      for (int i = 0; i < count; i++) {
        long offset = in.readLong();
        if (offset < previous) throw new BadInput("plan request " + i + ": offset before the previous one's");
        int armIndex = in.readUnsignedShort();
        if (armIndex >= plan.arms.size()) throw new BadInput("plan request " + i + ": no arm " + armIndex);
        ByteBuffer[][] qs;
        if (v1) {
          qs = new ByteBuffer[][] {values(in, i)};
        } else {
          int q = in.readUnsignedShort();
          if (q < 1 || q > MAX_QUERIES) throw new BadInput("plan request " + i + ": " + q + " queries");
          seen += q;
          if (seen > total) throw new BadInput("plan request " + i + ": more queries than the header's " + total);
          qs = new ByteBuffer[q][];
          for (int j = 0; j < q; j++) qs[j] = values(in, i);
        }
        plan.offsetsUs[i] = offset;
        plan.arm[i] = (short) armIndex;
        plan.queries[i] = qs;
        previous = offset;
      }
      if (!v1 && seen != total) throw new BadInput("the plan has " + seen + " queries, its header says " + total);
      if (in.read() != -1) throw new BadInput("the plan has bytes after its last request");
      return plan;
    } catch (EOFException e) {
      throw new BadInput("the plan ends before its last request");
    }
  }

  /** One query's values: u16 k, then k of (i32 length, -1 null; bytes). */
  static ByteBuffer[] values(DataInputStream in, int i) throws IOException, BadInput {
    int k = in.readUnsignedShort();
    if (k > MAX_VALUES) throw new BadInput("plan request " + i + ": " + k + " values");
    ByteBuffer[] vs = new ByteBuffer[k];
    for (int j = 0; j < k; j++) {
      int len = in.readInt();
      if (len == -1) {
        vs[j] = null;
      } else if (len < 0 || len > MAX_VALUE_BYTES) {
        throw new BadInput("plan request " + i + ": value length " + len);
      } else {
        byte[] b = new byte[len];
        in.readFully(b);
        vs[j] = ByteBuffer.wrap(b);
      }
    }
    return vs;
  }

  // --- the config -------------------------------------------------------------------------------------------

  static final class ArmConfig {
    String name;
    String consistency;
    long requestTimeoutMs;
    String speculativeClass;
    int speculativeMax;
    long speculativeDelayMs;
    boolean slowReplicaAvoidance;
  }

  static final class Config {
    List<InetSocketAddress> contactPoints = new ArrayList<>();
    Set<String> allowed = new HashSet<>();
    String localDc;
    String keyspace;
    String username;
    long timerTickMs;
    double rateScale;
    double durationS;
    double blockS;
    double warmupS;
    int maxInFlight;
    double maxErrorFraction;
    long abortAfter;
    long spinUs;
    long connectTimeoutMs;
    List<ArmConfig> arms = new ArrayList<>();
  }

  static String text(JsonNode o, String field, String where) throws BadInput {
    JsonNode v = o == null ? null : o.get(field);
    if (v == null || !v.isTextual()) throw new BadInput(where + ": " + field + " (text) expected");
    return v.asText();
  }

  static double number(JsonNode o, String field, double lo, double hi) throws BadInput {
    JsonNode v = o.get(field);
    if (v == null || !v.isNumber() || !(v.asDouble() >= lo && v.asDouble() <= hi)) {
      throw new BadInput("config " + field + ": a number from " + lo + " to " + hi + " expected");
    }
    return v.asDouble();
  }

  static long integer(JsonNode o, String field, long lo, long hi) throws BadInput {
    JsonNode v = o.get(field);
    if (v == null || !v.isIntegralNumber() || v.asLong() < lo || v.asLong() > hi) {
      throw new BadInput("config " + field + ": an integer from " + lo + " to " + hi + " expected");
    }
    return v.asLong();
  }

  /** An IP literal (never a name: nothing is resolved) and a port, as "address:port" keys of the allow-list. */
  static InetSocketAddress endpoint(JsonNode e, String where) throws BadInput {
    String address = text(e, "address", where);
    JsonNode p = e.get("port");
    if (p == null || !p.isIntegralNumber() || p.asInt() <= 0 || p.asInt() > 65535) {
      throw new BadInput(where + ": port 1..65535 expected");
    }
    if (!address.matches("[0-9A-Fa-f:.]{2,45}")) {
      throw new BadInput(where + ": " + quote(address) + " is not an IP address");
    }
    try {
      return new InetSocketAddress(InetAddress.getByName(address), p.asInt());
    } catch (IOException ex) {
      throw new BadInput(where + ": " + quote(address) + " is not an IP address");
    }
  }

  static String key(InetAddress address, int port) {
    return address.getHostAddress() + "|" + port;
  }

  static Config readConfig(String path) throws IOException, BadInput {
    JsonNode c = new ObjectMapper().readTree(new java.io.File(path));
    if (c == null || !c.isObject()) throw new BadInput("the config is not a JSON object");
    Config cfg = new Config();
    JsonNode contacts = c.get("contact_points");
    if (contacts == null || !contacts.isArray() || contacts.size() == 0 || contacts.size() > 64) {
      throw new BadInput("config contact_points: 1 to 64 endpoints expected");
    }
    JsonNode allowed = c.get("allowed");
    if (allowed == null || !allowed.isArray() || allowed.size() == 0 || allowed.size() > 4096) {
      throw new BadInput("config allowed: 1 to 4096 endpoints expected");
    }
    for (JsonNode e : allowed) {
      InetSocketAddress a = endpoint(e, "config allowed");
      cfg.allowed.add(key(a.getAddress(), a.getPort()));
    }
    for (JsonNode e : contacts) {
      InetSocketAddress a = endpoint(e, "config contact_points");
      if (!cfg.allowed.contains(key(a.getAddress(), a.getPort()))) {
        throw new BadInput("contact point " + a.getAddress().getHostAddress() + ":" + a.getPort()
            + " is not in the allow-list: the generator connects to allowed nodes only");
      }
      cfg.contactPoints.add(a);
    }
    cfg.localDc = text(c, "local_dc", "config");
    JsonNode ks = c.get("keyspace");
    cfg.keyspace = ks == null || ks.isNull() ? null : text(c, "keyspace", "config");
    JsonNode user = c.get("username");
    cfg.username = user == null || user.isNull() ? null : text(c, "username", "config");
    cfg.timerTickMs = integer(c, "timer_tick_ms", 1, 1000);
    cfg.rateScale = number(c, "rate_scale", 1e-6, 1e6);
    cfg.durationS = c.hasNonNull("duration_s") ? number(c, "duration_s", 1e-3, 1e7) : Double.POSITIVE_INFINITY;
    cfg.blockS = c.hasNonNull("block_s") ? number(c, "block_s", 1e-3, 1e7) : 0.0;
    cfg.warmupS = number(c, "warmup_s", 0, 3600);
    cfg.maxInFlight = (int) integer(c, "max_in_flight", 1, 1 << 20);
    cfg.maxErrorFraction = number(c, "max_error_fraction", 0, 1);
    cfg.abortAfter = integer(c, "abort_after", 1, Long.MAX_VALUE);
    cfg.spinUs = integer(c, "spin_us", 0, 100_000);
    cfg.connectTimeoutMs = integer(c, "connect_timeout_ms", 1, 600_000);
    JsonNode arms = c.get("arms");
    if (arms == null || !arms.isArray() || arms.size() == 0 || arms.size() > MAX_ARMS) {
      throw new BadInput("config arms: 1 to " + MAX_ARMS + " expected");
    }
    for (JsonNode a : arms) {
      if (!a.isObject()) throw new BadInput("config arms: objects expected");
      ArmConfig arm = new ArmConfig();
      arm.name = text(a, "name", "config arm");
      if (!ARM_NAME.matcher(arm.name).matches()) {
        throw new BadInput("config arm name " + quote(arm.name) + " is not [A-Za-z0-9_-]{1,64}");
      }
      arm.consistency = text(a, "consistency", "config arm " + arm.name);
      if (!CONSISTENCIES.contains(arm.consistency)) {
        throw new BadInput("config arm " + arm.name + ": consistency " + quote(arm.consistency) + " unknown");
      }
      arm.requestTimeoutMs = integer(a, "request_timeout_ms", 1, 600_000);
      arm.speculativeClass = text(a, "speculative_class", "config arm " + arm.name);
      if (!SPECULATIVE_CLASSES.contains(arm.speculativeClass)) {
        throw new BadInput("config arm " + arm.name + ": speculative_class " + quote(arm.speculativeClass)
            + " is not one of " + String.join(", ", new java.util.TreeSet<>(SPECULATIVE_CLASSES)));
      }
      arm.speculativeMax = (int) integer(a, "speculative_max_executions", 1, 16);
      arm.speculativeDelayMs = integer(a, "speculative_delay_ms", 0, 600_000);
      JsonNode sra = a.get("slow_replica_avoidance");
      if (sra == null || !sra.isBoolean()) {
        throw new BadInput("config arm " + arm.name + ": slow_replica_avoidance (true/false) expected");
      }
      arm.slowReplicaAvoidance = sra.asBoolean();
      if (arm.speculativeMax > 1 && arm.speculativeDelayMs > 0 && arm.speculativeDelayMs < cfg.timerTickMs) {
        throw new BadInput("config arm " + arm.name + ": a speculative delay of " + arm.speculativeDelayMs
            + " ms under a timer tick of " + cfg.timerTickMs + " ms fires on the tick, late: lower timer_tick_ms");
      }
      cfg.arms.add(arm);
    }
    return cfg;
  }

  static String quote(String s) {
    String cut = s.length() > 80 ? s.substring(0, 80) + "…" : s;
    return "'" + cut.replaceAll("[^\\x20-\\x7e…]", "?") + "'";
  }

  // --- measurement ------------------------------------------------------------------------------------------

  /** One arm's counts and histograms of one pass (recorded from the driver's threads: synchronized). */
  static final class ArmStats {
    final String name;
    long planned;
    long sent;
    long queries;
    long rows;
    long ok;
    long errors;
    long timeouts;
    final Map<String, Long> errorKinds = new TreeMap<>();
    final Histogram latency = new Histogram(1, HIGHEST_US, DIGITS);
    final Histogram service = new Histogram(1, HIGHEST_US, DIGITS);
    final Histogram[] blocks;

    ArmStats(String name, int blocks) {
      this.name = name;
      this.blocks = new Histogram[blocks];
      for (int b = 0; b < blocks; b++) this.blocks[b] = new Histogram(1, HIGHEST_US, BLOCK_DIGITS);
    }
  }

  static long micros(long nanos) {
    long us = Math.max(1, nanos / 1000);
    return Math.min(us, HIGHEST_US);
  }

  static final class Pass {
    final ArmStats[] arms;
    final Histogram lag = new Histogram(1, HIGHEST_US, DIGITS);
    final AtomicLong completed = new AtomicLong();
    final AtomicLong failed = new AtomicLong();
    final AtomicReference<String> abort = new AtomicReference<>();
    long throttled;
    long lost;
    long sent;
    long queries;
    long startNs;
    long lastSendNs;
    long endNs;
    double intendedS;

    Pass(List<PlanArm> planArms, int blocks) {
      arms = new ArmStats[planArms.size()];
      for (int i = 0; i < arms.length; i++) arms[i] = new ArmStats(planArms.get(i).name, blocks);
    }

    void complete(int a, int block, long intended, long sentAt, Throwable error, long rows, Config cfg) {
      long done = System.nanoTime();
      ArmStats s = arms[a];
      synchronized (s) {
        s.rows += rows;
        long us = micros(done - intended);
        s.latency.recordValue(us);
        s.service.recordValue(micros(done - sentAt));
        if (block >= 0) s.blocks[block].recordValue(us);
        if (error == null) {
          s.ok++;
        } else {
          Throwable e = error instanceof java.util.concurrent.CompletionException && error.getCause() != null
              ? error.getCause() : error;
          if (e instanceof DriverTimeoutException || e instanceof ReadTimeoutException
              || e instanceof WriteTimeoutException) {
            s.timeouts++;
          } else {
            s.errors++;
          }
          String kind = e.getClass().getSimpleName();
          if (s.errorKinds.containsKey(kind) || s.errorKinds.size() < 16) {
            s.errorKinds.merge(kind, 1L, Long::sum);
          }
        }
      }
      long n = completed.incrementAndGet();
      long bad = error == null ? failed.get() : failed.incrementAndGet();
      if (n >= cfg.abortAfter && bad > cfg.maxErrorFraction * n && abort.get() == null) {
        abort.compareAndSet(null, bad + " of " + n + " requests failed or timed out, over the limit of "
            + cfg.maxErrorFraction);
      }
    }
  }

  /**
   * One request's queries in flight, joined without a thread: each query's CompletionStage calls accept on
   * completion (on the driver's I/O thread), and the last one to complete completes the request (its latency to
   * that answer; its outcome the first failure's, if any) and returns its permits.
   */
  static final class Join implements BiConsumer<AsyncResultSet, Throwable> {
    // one object per request (as a callback lambda would be): its counters are its own fields, updated atomically
    static final AtomicIntegerFieldUpdater<Join> LEFT = AtomicIntegerFieldUpdater.newUpdater(Join.class, "left");
    static final AtomicLongFieldUpdater<Join> ROWS = AtomicLongFieldUpdater.newUpdater(Join.class, "rows");
    static final AtomicReferenceFieldUpdater<Join, Throwable> ERROR =
        AtomicReferenceFieldUpdater.newUpdater(Join.class, Throwable.class, "error");
    final Pass pass;
    final Config cfg;
    final Semaphore inFlight;
    final int arm;
    final int block;
    final int permits;
    final long intended;
    final long sentAt;
    volatile int left;
    volatile long rows;
    volatile Throwable error;

    Join(Pass pass, Config cfg, Semaphore inFlight, int arm, int block, int queries, int permits, long intended,
        long sentAt) {
      this.pass = pass;
      this.cfg = cfg;
      this.inFlight = inFlight;
      this.arm = arm;
      this.block = block;
      this.permits = permits;
      this.intended = intended;
      this.sentAt = sentAt;
      this.left = queries;
    }

    @Override
    public void accept(AsyncResultSet rs, Throwable err) {
      if (err != null) {
        ERROR.compareAndSet(this, null, err);
      } else if (rs != null) {
        ROWS.addAndGet(this, rs.remaining());
      }
      if (LEFT.decrementAndGet(this) == 0) {
        // recorded before the permits return: the end of a pass waits for every permit, then reads the records
        pass.complete(arm, block, intended, sentAt, error, rows, cfg);
        inFlight.release(permits);
      }
    }
  }

  static void waitUntil(long deadline, long spinNs) {
    while (true) {
      long left = deadline - System.nanoTime();
      if (left <= 0) return;
      if (left > spinNs) {
        LockSupport.parkNanos(left - spinNs);
      } else {
        Thread.onSpinWait();
      }
    }
  }

  /** The block of a request intended at offsetUs (scaled: seconds from the start), or -1 without blocks. */
  static int block(long offsetUs, Config cfg) {
    return cfg.blockS > 0 ? (int) Math.floor(offsetUs / cfg.rateScale / 1e6 / cfg.blockS) : -1;
  }

  /** Blocks of a measured run of requests [0, end): the last one's block and those before it. */
  static int blocks(Plan plan, Config cfg, int end) {
    return cfg.blockS > 0 && end > 0 ? block(plan.offsetsUs[end - 1], cfg) + 1 : 0;
  }

  /**
   * Sends requests [0, end) of the plan open loop from now; returns when all are answered (or lost). A request's
   * queries leave one after the other at its send, each taking a permit of max_in_flight (a request of more
   * queries than that takes them all); its completion is its last query's (Join).
   */
  static Pass run(CqlSession session, Plan plan, Config cfg, PreparedStatement[] prepared, int end, int blocks)
      throws InterruptedException {
    Pass pass = new Pass(plan.arms, blocks);
    for (int i = 0; i < end; i++) pass.arms[plan.arm[i]].planned++;
    Semaphore inFlight = new Semaphore(cfg.maxInFlight);
    String[] profiles = new String[plan.arms.size()];
    for (int a = 0; a < profiles.length; a++) profiles[a] = cfg.arms.get(a).name;
    long spinNs = cfg.spinUs * 1000L;
    double nsPerUs = 1000.0 / cfg.rateScale;
    pass.startNs = System.nanoTime();
    for (int i = 0; i < end; i++) {
      long intended = pass.startNs + (long) (plan.offsetsUs[i] * nsPerUs);
      waitUntil(intended, spinNs);
      if (pass.abort.get() != null) break;
      ByteBuffer[][] qs = plan.queries[i];
      int permits = Math.min(qs.length, cfg.maxInFlight);
      if (!inFlight.tryAcquire(permits)) {
        pass.throttled++;
        inFlight.acquire(permits);
      }
      long sentAt = System.nanoTime();
      pass.lag.recordValue(Math.min(HIGHEST_US, Math.max(0, sentAt - intended) / 1000));
      int a = plan.arm[i];
      pass.arms[a].sent++;
      pass.arms[a].queries += qs.length;
      pass.sent++;
      pass.queries += qs.length;
      int inBlock = blocks > 0 ? block(plan.offsetsUs[i], cfg) : -1;
      Join join = new Join(pass, cfg, inFlight, a, inBlock, qs.length, permits, intended, sentAt);
      for (ByteBuffer[] vs : qs) {
        BoundStatementBuilder b = prepared[a].boundStatementBuilder();
        for (int j = 0; j < vs.length; j++) b.setBytesUnsafe(j, vs[j] == null ? null : vs[j].duplicate());
        b.setIdempotence(true).setExecutionProfileName(profiles[a]);
        CompletionStage<AsyncResultSet> f;
        try {
          f = session.executeAsync(b.build());
        } catch (RuntimeException e) {
          join.accept(null, e);
          continue;
        }
        f.whenComplete(join);
      }
    }
    pass.lastSendNs = System.nanoTime();
    long longest = 0;
    for (ArmConfig a : cfg.arms) longest = Math.max(longest, a.requestTimeoutMs * a.speculativeMax);
    if (!inFlight.tryAcquire(cfg.maxInFlight, longest + 10_000, TimeUnit.MILLISECONDS)) {
      pass.lost = cfg.maxInFlight - inFlight.availablePermits();
    }
    pass.endNs = System.nanoTime();
    pass.intendedS = end == 0 ? 0 : plan.offsetsUs[end - 1] / 1e6 / cfg.rateScale;
    return pass;
  }

  // --- the session ------------------------------------------------------------------------------------------

  static CqlSession open(Config cfg, Set<String> ignored) {
    ProgrammaticDriverConfigLoaderBuilder c = DriverConfigLoader.programmaticBuilder()
        .withDuration(DefaultDriverOption.NETTY_TIMER_TICK_DURATION, Duration.ofMillis(cfg.timerTickMs))
        .withDuration(DefaultDriverOption.CONNECTION_CONNECT_TIMEOUT, Duration.ofMillis(cfg.connectTimeoutMs))
        .withDuration(DefaultDriverOption.CONNECTION_INIT_QUERY_TIMEOUT, Duration.ofMillis(cfg.connectTimeoutMs))
        .withDuration(DefaultDriverOption.CONTROL_CONNECTION_TIMEOUT, Duration.ofMillis(cfg.connectTimeoutMs))
        .withDuration(DefaultDriverOption.METADATA_SCHEMA_REQUEST_TIMEOUT, Duration.ofMillis(cfg.connectTimeoutMs))
        .withInt(DefaultDriverOption.CONNECTION_MAX_REQUESTS, Math.max(1024, Math.min(32768, cfg.maxInFlight * 4)))
        .withInt(DefaultDriverOption.REQUEST_PAGE_SIZE, PAGE_SIZE)
        .withBoolean(DefaultDriverOption.REQUEST_LOG_WARNINGS, false)
        .withString(DefaultDriverOption.LOAD_BALANCING_LOCAL_DATACENTER, cfg.localDc);
    for (ArmConfig a : cfg.arms) {
      c = c.startProfile(a.name)
          .withString(DefaultDriverOption.REQUEST_CONSISTENCY, a.consistency)
          .withDuration(DefaultDriverOption.REQUEST_TIMEOUT, Duration.ofMillis(a.requestTimeoutMs))
          .withString(DefaultDriverOption.SPECULATIVE_EXECUTION_POLICY_CLASS, a.speculativeClass)
          .withInt(DefaultDriverOption.SPECULATIVE_EXECUTION_MAX, a.speculativeMax)
          .withDuration(DefaultDriverOption.SPECULATIVE_EXECUTION_DELAY, Duration.ofMillis(a.speculativeDelayMs))
          .withBoolean(DefaultDriverOption.LOAD_BALANCING_POLICY_SLOW_AVOIDANCE, a.slowReplicaAvoidance)
          .endProfile();
    }
    NodeDistanceEvaluator filter = (node, dc) -> {
      if (allowed(node, cfg.allowed)) return null;
      synchronized (ignored) {
        ignored.add(describe(node));
      }
      return NodeDistance.IGNORED;
    };
    CqlSessionBuilder b = CqlSession.builder()
        .withConfigLoader(c.build())
        .addContactPoints(cfg.contactPoints)
        .withLocalDatacenter(cfg.localDc)
        .withNodeDistanceEvaluator(DriverExecutionProfile.DEFAULT_NAME, filter);
    // every profile's load balancing policy (one per distinct policy setting) filters, in the local datacenter
    for (ArmConfig a : cfg.arms) b = b.withNodeDistanceEvaluator(a.name, filter).withLocalDatacenter(a.name, cfg.localDc);
    if (cfg.keyspace != null) b = b.withKeyspace(cfg.keyspace);
    if (cfg.username != null) {
      String password = System.getenv("TAILTUNE_GENERATOR_PASSWORD");
      b = b.withAuthCredentials(cfg.username, password == null ? "" : password);
    }
    return b.build();
  }

  static boolean allowed(Node node, Set<String> allowed) {
    SocketAddress s = node.getEndPoint().resolve();
    if (!(s instanceof InetSocketAddress)) return false;
    InetSocketAddress a = (InetSocketAddress) s;
    return a.getAddress() != null && allowed.contains(key(a.getAddress(), a.getPort()));
  }

  static String describe(Node node) {
    SocketAddress s = node.getEndPoint().resolve();
    if (s instanceof InetSocketAddress && ((InetSocketAddress) s).getAddress() != null) {
      InetSocketAddress a = (InetSocketAddress) s;
      return a.getAddress().getHostAddress() + ":" + a.getPort();
    }
    return "?";
  }

  // --- output -----------------------------------------------------------------------------------------------

  static void histogram(JsonGenerator g, String field, Histogram h) throws IOException {
    g.writeObjectFieldStart(field);
    g.writeStringField("unit", "us");
    g.writeNumberField("count", h.getTotalCount());
    g.writeNumberField("min", h.getTotalCount() == 0 ? 0 : h.getMinValue());
    g.writeNumberField("max", h.getMaxValue());
    g.writeNumberField("mean", h.getTotalCount() == 0 ? 0.0 : h.getMean());
    g.writeNumberField("p50", h.getValueAtPercentile(50));
    g.writeNumberField("p90", h.getValueAtPercentile(90));
    g.writeNumberField("p95", h.getValueAtPercentile(95));
    g.writeNumberField("p99", h.getValueAtPercentile(99));
    g.writeNumberField("p999", h.getValueAtPercentile(99.9));
    g.writeStringField("encoded", encoded(h));
    g.writeEndObject();
  }

  static String encoded(Histogram h) {
    ByteBuffer buf = ByteBuffer.allocate(h.getNeededByteBufferCapacity());
    int n = h.encodeIntoCompressedByteBuffer(buf);
    byte[] bytes = new byte[n];
    buf.flip();
    buf.get(bytes);
    return Base64.getEncoder().encodeToString(bytes);
  }

  static String result(Pass pass, Config cfg, CqlSession session, Set<String> ignored, long cpuNs,
      long schedulerCpuNs, long threadsCpuNs, long gcCount, long gcMs) throws IOException {
    StringWriter out = new StringWriter();
    JsonGenerator g = new JsonFactory().createGenerator(out);
    g.writeStartObject();
    g.writeStringField("generator", "java-driver-core-4.19.0");
    String abort = pass.abort.get();
    g.writeStringField("status", abort == null ? "ok" : "aborted");
    if (abort != null) g.writeStringField("reason", abort);
    g.writeArrayFieldStart("arms");
    for (ArmStats s : pass.arms) {
      synchronized (s) {
        g.writeStartObject();
        g.writeStringField("name", s.name);
        g.writeNumberField("planned", s.planned);
        g.writeNumberField("sent", s.sent);
        g.writeNumberField("queries", s.queries);
        g.writeNumberField("rows", s.rows);
        g.writeNumberField("ok", s.ok);
        g.writeNumberField("errors", s.errors);
        g.writeNumberField("timeouts", s.timeouts);
        g.writeObjectFieldStart("error_kinds");
        for (Map.Entry<String, Long> e : s.errorKinds.entrySet()) g.writeNumberField(e.getKey(), e.getValue());
        g.writeEndObject();
        histogram(g, "latency", s.latency);
        histogram(g, "service", s.service);
        g.writeArrayFieldStart("blocks");
        for (Histogram h : s.blocks) {
          g.writeStartObject();
          g.writeNumberField("count", h.getTotalCount());
          g.writeStringField("encoded", encoded(h));
          g.writeEndObject();
        }
        g.writeEndArray();
        g.writeEndObject();
      }
    }
    g.writeEndArray();
    histogram(g, "lag", pass.lag);
    g.writeNumberField("sent", pass.sent);
    g.writeNumberField("queries", pass.queries);
    g.writeNumberField("throttled", pass.throttled);
    g.writeNumberField("lost", pass.lost);
    double wall = (pass.endNs - pass.startNs) / 1e9;
    double sending = (pass.lastSendNs - pass.startNs) / 1e9;
    g.writeNumberField("wall_s", wall);
    g.writeNumberField("send_s", sending);
    g.writeNumberField("intended_s", pass.intendedS);
    g.writeNumberField("achieved_rate", sending > 0 ? pass.sent / sending : 0.0);
    g.writeNumberField("cpu_s", cpuNs / 1e9);
    g.writeNumberField("cpu_us_per_request", pass.sent > 0 ? cpuNs / 1e3 / pass.sent : 0.0);
    g.writeNumberField("scheduler_cpu_s", schedulerCpuNs / 1e9);
    g.writeNumberField("threads_cpu_s", threadsCpuNs / 1e9);
    g.writeNumberField("gc_count", gcCount);
    g.writeNumberField("gc_ms", gcMs);
    g.writeArrayFieldStart("nodes");
    for (Node node : session.getMetadata().getNodes().values()) {
      g.writeStartObject();
      g.writeStringField("endpoint", describe(node));
      g.writeStringField("datacenter", String.valueOf(node.getDatacenter()));
      g.writeStringField("distance", node.getDistance().name());
      g.writeNumberField("open_connections", node.getOpenConnections());
      g.writeEndObject();
    }
    g.writeEndArray();
    g.writeArrayFieldStart("ignored");
    synchronized (ignored) {
      for (String s : new java.util.TreeSet<>(ignored)) g.writeString(s);
    }
    g.writeEndArray();
    g.writeObjectFieldStart("settings");
    g.writeNumberField("timer_tick_ms", session.getContext().getConfig().getDefaultProfile()
        .getDuration(DefaultDriverOption.NETTY_TIMER_TICK_DURATION).toMillis());
    g.writeNumberField("rate_scale", cfg.rateScale);
    g.writeNumberField("spin_us", cfg.spinUs);
    g.writeNumberField("max_in_flight", cfg.maxInFlight);
    g.writeNumberField("warmup_s", cfg.warmupS);
    g.writeNumberField("block_s", cfg.blockS);
    g.writeEndObject();
    g.writeEndObject();
    g.close();
    return out.toString();
  }

  static void fail(int status, String kind, String message) {
    try {
      StringWriter out = new StringWriter();
      JsonGenerator g = new JsonFactory().createGenerator(out);
      g.writeStartObject();
      g.writeStringField("error", kind);
      g.writeStringField("message", message == null ? "(no message)" : message);
      g.writeEndObject();
      g.close();
      System.out.println(out);
    } catch (IOException e) {
      System.out.println("{\"error\":\"" + kind + "\",\"message\":\"(unprintable)\"}");
    }
    System.out.flush();
    System.exit(status);
  }

  static long gcCount() {
    long n = 0;
    for (GarbageCollectorMXBean b : ManagementFactory.getGarbageCollectorMXBeans()) n += Math.max(0, b.getCollectionCount());
    return n;
  }

  static long gcMs() {
    long n = 0;
    for (GarbageCollectorMXBean b : ManagementFactory.getGarbageCollectorMXBeans()) n += Math.max(0, b.getCollectionTime());
    return n;
  }

  /** CPU time of every live Java thread (the scheduler, the driver's I/O, admin and timer threads; not the JIT
   * compiler's or the GC's, which are the VM's own). */
  static Map<Long, Long> threadCpu(ThreadMXBean threads) {
    Map<Long, Long> out = new java.util.HashMap<>();
    for (long id : threads.getAllThreadIds()) {
      long t = threads.getThreadCpuTime(id);
      if (t >= 0) out.put(id, t);
    }
    return out;
  }

  static long processCpuNs() {
    return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
        .getProcessCpuTime();
  }

  // --- probe mode -------------------------------------------------------------------------------------------

  /** Most timed or warm-up rounds of a probe. */
  static final long MAX_PROBE_ROUNDS = 1_000_000L;

  /**
   * Probe mode: each arm's statement, bound to the values of its first request in the plan (one query), executed
   * synchronously one at a time, in rounds (arm 0, arm 1, ..., then again), WARMUP rounds uncounted then ROUNDS
   * timed on the client's clock (System.nanoTime around the driver's execute: the driver's whole client path).
   * Prints {"generator", "mode": "probe", "arms": [{"name", "latencies_us": [...]}], "nodes", "ignored"}.
   */
  static void probe(String[] args) {
    Plan plan;
    Config cfg;
    long rounds;
    long warmup;
    try {
      plan = readPlan(args[1]);
      cfg = readConfig(args[2]);
      rounds = Long.parseLong(args[3]);
      warmup = Long.parseLong(args[4]);
      if (rounds < 1 || rounds > MAX_PROBE_ROUNDS || warmup < 0 || warmup > MAX_PROBE_ROUNDS) {
        throw new BadInput("probe rounds: 1 to " + MAX_PROBE_ROUNDS + ", warm-up rounds: 0 to " + MAX_PROBE_ROUNDS);
      }
      if (rounds * plan.arms.size() > 4_000_000L) throw new BadInput("probe: more than 4000000 timed executions");
      checkArms(plan, cfg);
    } catch (NumberFormatException e) {
      fail(EXIT_BAD_INPUT, "bad_input", "probe rounds and warm-up rounds: integers expected");
      return;
    } catch (BadInput e) {
      fail(EXIT_BAD_INPUT, "bad_input", e.getMessage());
      return;
    } catch (IOException e) {
      fail(EXIT_BAD_INPUT, "bad_input", "reading the plan or the config: " + e.getMessage());
      return;
    }
    int arms = plan.arms.size();
    ByteBuffer[][] values = new ByteBuffer[arms][];
    for (int i = 0; i < plan.arm.length; i++) {
      int a = plan.arm[i];
      if (values[a] == null) {
        if (plan.queries[i].length != 1) {
          fail(EXIT_BAD_INPUT, "bad_input", "probe: plan request " + i + " has " + plan.queries[i].length
              + " queries (one expected)");
        }
        values[a] = plan.queries[i][0];
      }
    }
    for (int a = 0; a < arms; a++) {
      if (values[a] == null) fail(EXIT_BAD_INPUT, "bad_input", "probe: arm " + plan.arms.get(a).name + " has no request");
    }
    Set<String> ignored = new HashSet<>();
    CqlSession session;
    try {
      session = open(cfg, ignored);
    } catch (RuntimeException e) {
      fail(EXIT_FAILED, "connect", e.getClass().getSimpleName() + ": " + e.getMessage());
      return;
    }
    com.datastax.oss.driver.api.core.cql.BoundStatement[] bound =
        new com.datastax.oss.driver.api.core.cql.BoundStatement[arms];
    try {
      for (int a = 0; a < arms; a++) {
        PreparedStatement p = session.prepare(SimpleStatement.builder(plan.arms.get(a).statement)
            .setExecutionProfileName(cfg.arms.get(a).name).setIdempotence(true).build());
        int markers = p.getVariableDefinitions().size();
        if (values[a].length != markers) {
          session.close();
          fail(EXIT_BAD_INPUT, "bad_input", "probe: arm " + plan.arms.get(a).name + " gives " + values[a].length
              + " values to a statement that takes " + markers);
        }
        BoundStatementBuilder b = p.boundStatementBuilder();
        for (int j = 0; j < values[a].length; j++) b.setBytesUnsafe(j, values[a][j] == null ? null : values[a][j].duplicate());
        bound[a] = b.setIdempotence(true).setExecutionProfileName(cfg.arms.get(a).name).build();
      }
    } catch (RuntimeException e) {
      session.close();
      fail(EXIT_FAILED, "prepare", e.getClass().getSimpleName() + ": " + e.getMessage());
      return;
    }
    long[][] latencies = new long[arms][(int) rounds];
    for (long r = 0; r < warmup + rounds; r++) {
      for (int a = 0; a < arms; a++) {
        long t0 = System.nanoTime();
        try {
          session.execute(bound[a]);
        } catch (RuntimeException e) {
          session.close();
          fail(EXIT_FAILED, "probe", "arm " + plan.arms.get(a).name + ": " + e.getClass().getSimpleName() + ": "
              + e.getMessage());
          return;
        }
        long dt = System.nanoTime() - t0;
        if (r >= warmup) latencies[a][(int) (r - warmup)] = dt;
      }
    }
    try {
      StringWriter out = new StringWriter();
      JsonGenerator g = new JsonFactory().createGenerator(out);
      g.writeStartObject();
      g.writeStringField("generator", "java-driver-core-4.19.0");
      g.writeStringField("mode", "probe");
      g.writeNumberField("warmup", warmup);
      g.writeArrayFieldStart("arms");
      for (int a = 0; a < arms; a++) {
        g.writeStartObject();
        g.writeStringField("name", plan.arms.get(a).name);
        g.writeArrayFieldStart("latencies_us");
        for (long ns : latencies[a]) g.writeNumber(ns / 1e3);
        g.writeEndArray();
        g.writeEndObject();
      }
      g.writeEndArray();
      g.writeArrayFieldStart("nodes");
      for (Node node : session.getMetadata().getNodes().values()) {
        g.writeStartObject();
        g.writeStringField("endpoint", describe(node));
        g.writeStringField("distance", node.getDistance().name());
        g.writeNumberField("open_connections", node.getOpenConnections());
        g.writeEndObject();
      }
      g.writeEndArray();
      g.writeArrayFieldStart("ignored");
      synchronized (ignored) {
        for (String s : new java.util.TreeSet<>(ignored)) g.writeString(s);
      }
      g.writeEndArray();
      g.writeEndObject();
      g.close();
      session.close();
      System.out.println(out);
      System.out.flush();
      System.exit(0);
    } catch (IOException | RuntimeException e) {
      fail(EXIT_FAILED, "run", e.getClass().getSimpleName() + ": " + e.getMessage());
    }
  }

  /** The plan and the config name the same arms in the same order (BadInput naming the first that differs). */
  static void checkArms(Plan plan, Config cfg) throws BadInput {
    if (cfg.arms.size() != plan.arms.size()) {
      throw new BadInput("the plan has " + plan.arms.size() + " arms, the config " + cfg.arms.size());
    }
    for (int a = 0; a < cfg.arms.size(); a++) {
      if (!cfg.arms.get(a).name.equals(plan.arms.get(a).name)) {
        throw new BadInput("arm " + a + " is " + quote(plan.arms.get(a).name) + " in the plan, "
            + quote(cfg.arms.get(a).name) + " in the config");
      }
    }
  }

  public static void main(String[] args) {
    if (args.length == 5 && args[0].equals("probe")) {
      probe(args);
      return;
    }
    if (args.length != 2) fail(EXIT_BAD_INPUT, "usage", "usage: Generator PLAN CONFIG | Generator probe PLAN CONFIG ROUNDS WARMUP");
    Plan plan;
    Config cfg;
    try {
      plan = readPlan(args[0]);
      cfg = readConfig(args[1]);
      checkArms(plan, cfg);
    } catch (BadInput e) {
      fail(EXIT_BAD_INPUT, "bad_input", e.getMessage());
      return;
    } catch (IOException e) {
      fail(EXIT_BAD_INPUT, "bad_input", "reading the plan or the config: " + e.getMessage());
      return;
    }
    int end = plan.offsetsUs.length;
    while (end > 0 && plan.offsetsUs[end - 1] / 1e6 / cfg.rateScale >= cfg.durationS) end--;
    int warm = 0;
    while (warm < end && plan.offsetsUs[warm] / 1e6 / cfg.rateScale < cfg.warmupS) warm++;
    int blocks = blocks(plan, cfg, end);
    if ((long) blocks * plan.arms.size() > MAX_BLOCK_HISTOGRAMS) {
      fail(EXIT_BAD_INPUT, "bad_input", blocks + " blocks of " + plan.arms.size() + " arms: more than "
          + MAX_BLOCK_HISTOGRAMS + " block histograms (longer blocks, or fewer arms)");
      return;
    }
    Set<String> ignored = new HashSet<>();
    CqlSession session;
    PreparedStatement[] prepared = new PreparedStatement[plan.arms.size()];
    try {
      session = open(cfg, ignored);
    } catch (RuntimeException e) {
      fail(EXIT_FAILED, "connect", e.getClass().getSimpleName() + ": " + e.getMessage());
      return;
    }
    try {
      for (int a = 0; a < prepared.length; a++) {
        prepared[a] = session.prepare(SimpleStatement.builder(plan.arms.get(a).statement)
            .setExecutionProfileName(cfg.arms.get(a).name).setIdempotence(true).build());
        int markers = prepared[a].getVariableDefinitions().size();
        for (int i = 0; i < end; i++) {
          if (plan.arm[i] != a) continue;
          for (ByteBuffer[] vs : plan.queries[i]) {
            if (vs.length != markers) {
              session.close();
              fail(EXIT_BAD_INPUT, "bad_input", "plan request " + i + " gives " + vs.length
                  + " values to arm " + plan.arms.get(a).name + "'s statement, which takes " + markers);
            }
          }
        }
      }
    } catch (RuntimeException e) {
      session.close();
      fail(EXIT_FAILED, "prepare", e.getClass().getSimpleName() + ": " + e.getMessage());
      return;
    }
    try {
      if (warm > 0) run(session, plan, cfg, prepared, warm, 0);
      ThreadMXBean threads = ManagementFactory.getThreadMXBean();
      Map<Long, Long> threads0 = threadCpu(threads);
      long cpu0 = processCpuNs();
      long sched0 = threads.getCurrentThreadCpuTime();
      long gc0 = gcCount();
      long gcMs0 = gcMs();
      Pass pass = run(session, plan, cfg, prepared, end, blocks);
      long cpu = processCpuNs() - cpu0;
      long sched = threads.getCurrentThreadCpuTime() - sched0;
      long javaThreads = 0;
      for (Map.Entry<Long, Long> e : threadCpu(threads).entrySet()) {
        javaThreads += e.getValue() - threads0.getOrDefault(e.getKey(), 0L);
      }
      String out = result(pass, cfg, session, ignored, cpu, sched, javaThreads, gcCount() - gc0, gcMs() - gcMs0);
      session.close();
      System.out.println(out);
      System.out.flush();
      System.exit(pass.abort.get() == null ? 0 : EXIT_ABORTED);
    } catch (InterruptedException | IOException | RuntimeException e) {
      fail(EXIT_FAILED, "run", e.getClass().getSimpleName() + ": " + e.getMessage());
    }
  }
}
