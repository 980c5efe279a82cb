// A request tracker for the Apache Cassandra Java driver 4 (java-driver-core 4.19.0): a sample of the application's
// own requests, uploaded to tailtune as `tailtune-client` traces (docs/formats.md § tailtune-client; how an
// application configures it: clients/java/README.md). JDK and driver classes only.
//
// The driver calls onSuccess / onError once per logical request, after its retries and speculative executions, so
// a record is one application request. A request is sampled there, once, with probability `rate`; a sampled bound
// statement is recorded with its start (epoch s = now - latency), its latency, the values of its prepared
// statement's partition-key columns (`WHERE k IN ?`: the list's elements, one key each; a composite key: the
// columns' strings joined by `:`, as the full query log's reader writes them), its table, the config version of
// the execution profile it ran under, and whether it failed. A sampled statement whose partition key the tracker
// cannot read (a simple statement, a batch, a bound statement that does not bind every partition-key column) is
// counted (`dropped.unkeyed`), not recorded.
//
// Limits, each counted: at most `max-bytes` of records are held (a record past it: `dropped.memory`); an upload
// sends at most `upload-bytes-per-second` x the seconds since the previous one (at most `max-bytes`; the rest:
// `dropped.bandwidth`). A failed upload puts its records back (as far as `max-bytes` allows). Uploads run every
// `upload-interval` on a daemon thread and once more when the session closes.
package io.tailtune.tracker;

import com.datastax.oss.driver.api.core.ProtocolVersion;
import com.datastax.oss.driver.api.core.config.DriverExecutionProfile;
import com.datastax.oss.driver.api.core.config.DriverOption;
import com.datastax.oss.driver.api.core.context.DriverContext;
import com.datastax.oss.driver.api.core.cql.BoundStatement;
import com.datastax.oss.driver.api.core.cql.ColumnDefinition;
import com.datastax.oss.driver.api.core.cql.ColumnDefinitions;
import com.datastax.oss.driver.api.core.cql.PreparedStatement;
import com.datastax.oss.driver.api.core.metadata.Node;
import com.datastax.oss.driver.api.core.metadata.schema.ColumnMetadata;
import com.datastax.oss.driver.api.core.metadata.schema.TableMetadata;
import com.datastax.oss.driver.api.core.session.Request;
import com.datastax.oss.driver.api.core.session.Session;
import com.datastax.oss.driver.api.core.tracker.RequestTracker;
import com.datastax.oss.driver.api.core.type.DataType;
import com.datastax.oss.driver.api.core.type.DataTypes;
import com.datastax.oss.driver.api.core.type.ListType;
import com.datastax.oss.driver.api.core.type.SetType;
import com.datastax.oss.driver.api.core.type.codec.registry.CodecRegistry;
import java.net.InetAddress;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Optional;
import java.util.Random;
import java.util.UUID;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

public class TailtuneRequestTracker implements RequestTracker {
  public static final String SCHEMA = "tailtune.client.capture/1";
  public static final String VERSION = "1";
  /** The variable a bearer token is read from when `token` is not in the driver's config. */
  public static final String TOKEN_ENV = "TAILTUNE_TRACKER_TOKEN";

  /** The tracker's options, under `advanced.tailtune-tracker` of the driver's config. */
  public enum Option implements DriverOption {
    RATE("rate"),
    URL("url"),
    TOKEN("token"),
    DEPLOYMENT_ID("deployment-id"),
    DEPLOYMENT("deployment"),
    CONFIG_VERSION("config-version"),
    MAX_BYTES("max-bytes"),
    UPLOAD_BYTES_PER_SECOND("upload-bytes-per-second"),
    UPLOAD_INTERVAL("upload-interval"),
    TIMEOUT("timeout"),
    SEED("seed");

    private final String path;

    Option(String leaf) {
      this.path = "advanced.tailtune-tracker." + leaf;
    }

    @Override
    public String getPath() {
      return path;
    }
  }

  private static final System.Logger LOG = System.getLogger(TailtuneRequestTracker.class.getName());
  private final DriverContext context;
  private final double rate;
  private final String url;
  private final String token;
  private final Long deploymentId;
  private final String deployment;
  private final long maxBytes;
  private final double uploadBytesPerSecond;
  private final Duration timeout;
  private final String id = UUID.randomUUID().toString();
  private final Random rng;
  private final Object lock = new Object();
  private final Object sendLock = new Object();
  private final ArrayDeque<byte[]> lines = new ArrayDeque<>();
  private final ScheduledExecutorService uploader;
  private final HttpClient http;
  private long held, seen, sampled, recorded, uploads, uploadBytes;
  private long droppedMemory, droppedBandwidth, unkeyed, sentMemory, sentBandwidth, sentUnkeyed;
  private double lastUpload = now();
  private volatile String lastError;
  private volatile boolean closed;

  public TailtuneRequestTracker(DriverContext context) {
    this.context = context;
    DriverExecutionProfile p = context.getConfig().getDefaultProfile();
    this.rate = p.getDouble(Option.RATE, 0.01);
    if (!(rate > 0 && rate <= 1)) {
      throw new IllegalArgumentException(Option.RATE.getPath() + " must be > 0 and <= 1, got " + rate);
    }
    this.maxBytes = p.getLong(Option.MAX_BYTES, 16L * 1024 * 1024);
    if (maxBytes < 1024) {
      throw new IllegalArgumentException(Option.MAX_BYTES.getPath() + " must be at least 1024, got " + maxBytes);
    }
    this.uploadBytesPerSecond = p.getDouble(Option.UPLOAD_BYTES_PER_SECOND, 1024.0 * 1024);
    if (!(uploadBytesPerSecond > 0)) {
      throw new IllegalArgumentException(Option.UPLOAD_BYTES_PER_SECOND.getPath() + " must be > 0");
    }
    Duration interval = p.getDuration(Option.UPLOAD_INTERVAL, Duration.ofSeconds(60));
    if (interval.isNegative() || interval.isZero()) {
      throw new IllegalArgumentException(Option.UPLOAD_INTERVAL.getPath() + " must be > 0");
    }
    this.timeout = p.getDuration(Option.TIMEOUT, Duration.ofSeconds(10));
    this.url = p.isDefined(Option.URL) ? p.getString(Option.URL) : null;
    if (url != null && !(url.startsWith("http://") || url.startsWith("https://"))) {
      throw new IllegalArgumentException(Option.URL.getPath() + " must be an http(s) URL (the service's /api/v1/traces)");
    }
    String t = p.isDefined(Option.TOKEN) ? p.getString(Option.TOKEN) : System.getenv(TOKEN_ENV);
    this.token = t == null || t.isEmpty() ? null : t;
    this.deploymentId = p.isDefined(Option.DEPLOYMENT_ID) ? p.getLong(Option.DEPLOYMENT_ID) : null;
    this.deployment = p.isDefined(Option.DEPLOYMENT) ? p.getString(Option.DEPLOYMENT) : null;
    this.rng = p.isDefined(Option.SEED) ? new Random(p.getLong(Option.SEED)) : new Random();
    if (url == null) {
      this.uploader = null;
      this.http = null;
    } else {
      this.http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(timeout).build();
      this.uploader = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread th = new Thread(r, "tailtune-tracker uploader");
        th.setDaemon(true);
        return th;
      });
      long ms = interval.toMillis();
      uploader.scheduleWithFixedDelay(this::upload, ms, ms, TimeUnit.MILLISECONDS);
    }
  }

  private static double now() {
    return System.currentTimeMillis() / 1e3;
  }

  // --- the driver's calls ----------------------------------------------------------------------------------
  @Override
  public void onSuccess(Request request, long latencyNanos, DriverExecutionProfile profile, Node node,
                        String requestLogPrefix) {
    observe(request, latencyNanos, profile, false);
  }

  @Override
  public void onError(Request request, Throwable error, long latencyNanos, DriverExecutionProfile profile,
                      Node node, String requestLogPrefix) {
    observe(request, latencyNanos, profile, true);
  }

  @Override
  public void onSessionReady(Session session) {}

  private void observe(Request request, long latencyNanos, DriverExecutionProfile profile, boolean failed) {
    if (!(request instanceof com.datastax.oss.driver.api.core.cql.Statement)) {
      return; // a PREPARE: not an application's read or write
    }
    double end = now();
    synchronized (lock) {
      seen++;
      if (rng.nextDouble() >= rate) {
        return;
      }
      sampled++;
    }
    Keys keys = request instanceof BoundStatement ? keys((BoundStatement) request) : null;
    if (keys == null) {
      synchronized (lock) {
        unkeyed++;
      }
      return;
    }
    double latencyUs = latencyNanos / 1e3;
    StringBuilder b = new StringBuilder(64 + 24 * keys.names.size());
    b.append("{\"ts\":").append(round6(end - latencyUs / 1e6));
    b.append(",\"op\":").append(json(keys.op)).append(",\"keys\":[");
    for (int i = 0; i < keys.names.size(); i++) {
      b.append(i == 0 ? "" : ",").append(json(keys.names.get(i)));
    }
    b.append("],\"sizes\":[");
    for (int i = 0; i < keys.names.size(); i++) {
      b.append(i == 0 ? "null" : ",null");
    }
    b.append("],\"latency_us\":").append(Math.round(latencyUs * 10) / 10.0);
    Long version = configVersion(profile);
    b.append(",\"config_version\":").append(version == null ? "null" : version.toString());
    b.append(",\"failed\":").append(failed);
    if (keys.table != null) {
      b.append(",\"table\":").append(json(keys.table));
    }
    b.append("}\n");
    byte[] line = b.toString().getBytes(StandardCharsets.UTF_8);
    synchronized (lock) {
      if (held + line.length > maxBytes) {
        droppedMemory++;
        return;
      }
      lines.addLast(line);
      held += line.length;
      recorded++;
    }
  }

  private static Long configVersion(DriverExecutionProfile profile) {
    if (profile == null || !profile.isDefined(Option.CONFIG_VERSION)) {
      return null;
    }
    long v = profile.getLong(Option.CONFIG_VERSION);
    return v >= 0 && v <= Integer.MAX_VALUE ? v : null;
  }

  // --- partition keys ----------------------------------------------------------------------------------------
  private static final class Keys {
    final String op;
    final String table;
    final List<String> names;

    Keys(String op, String table, List<String> names) {
      this.op = op;
      this.table = table;
      this.names = names;
    }
  }

  /** The partition keys a bound statement reads or writes, or null when they cannot be read from it. */
  private Keys keys(BoundStatement bound) {
    PreparedStatement ps = bound.getPreparedStatement();
    ColumnDefinitions vars = ps.getVariableDefinitions();
    if (vars.size() == 0) {
      return null;
    }
    String keyspace = vars.get(0).getKeyspace().asInternal();
    String tableName = vars.get(0).getTable().asInternal();
    List<Integer> indices = new ArrayList<>();
    List<Boolean> isIn = new ArrayList<>();
    List<Integer> given = ps.getPartitionKeyIndices();
    if (given != null && !given.isEmpty()) {
      for (Integer i : given) {
        indices.add(i);
        isIn.add(false);
      }
    } else {
      // `WHERE k IN ?`: the server reports no partition-key index (the marker is `in(k)`, a list of k's type);
      // the table's partition key from the driver's schema metadata names the markers.
      Optional<TableMetadata> table = context instanceof com.datastax.oss.driver.internal.core.context.InternalDriverContext
          ? ((com.datastax.oss.driver.internal.core.context.InternalDriverContext) context).getMetadataManager()
              .getMetadata().getKeyspace(vars.get(0).getKeyspace()).flatMap(k -> k.getTable(vars.get(0).getTable()))
          : Optional.empty();
      if (!table.isPresent()) {
        return null;
      }
      for (ColumnMetadata col : table.get().getPartitionKey()) {
        String name = col.getName().asInternal();
        int found = -1;
        boolean in = false;
        for (int i = 0; i < vars.size(); i++) {
          String v = vars.get(i).getName().asInternal();
          if (v.equals(name)) {
            found = i;
            break;
          }
          if (v.equals("in(" + name + ")")) {
            found = i;
            in = true;
            break;
          }
        }
        if (found < 0) {
          return null;
        }
        indices.add(found);
        isIn.add(in);
      }
    }
    CodecRegistry registry = bound.codecRegistry();
    ProtocolVersion pv = bound.protocolVersion();
    List<List<String>> parts = new ArrayList<>();
    for (int j = 0; j < indices.size(); j++) {
      int i = indices.get(j);
      if (!bound.isSet(i) || bound.isNull(i)) {
        return null;
      }
      ColumnDefinition def = vars.get(i);
      DataType type = def.getType();
      List<String> strings = new ArrayList<>();
      if (isIn.get(j)) {
        DataType element = type instanceof ListType ? ((ListType) type).getElementType()
            : type instanceof SetType ? ((SetType) type).getElementType() : null;
        if (element == null) {
          return null;
        }
        Object value = registry.codecFor(type).decode(bound.getBytesUnsafe(i), pv);
        for (Object e : (Collection<?>) value) {
          strings.add(keyString(e, element, registry, pv));
        }
        if (strings.isEmpty()) {
          return null;
        }
      } else {
        strings.add(keyString(registry.codecFor(type).decode(bound.getBytesUnsafe(i), pv), type, registry, pv));
      }
      parts.add(strings);
    }
    List<String> names = new ArrayList<>();
    if (parts.size() == 1) {
      names.addAll(parts.get(0));
    } else {
      compose(parts, 0, new ArrayList<>(), names);
    }
    String query = ps.getQuery().trim();
    int space = query.indexOf(' ');
    String verb = (space < 0 ? query : query.substring(0, space)).toLowerCase(java.util.Locale.ROOT);
    return new Keys(verb.equals("select") ? "read" : "write", keyspace + "." + tableName, names);
  }

  /** The composite keys of the columns' values in key order (every combination of `IN` lists). */
  private static void compose(List<List<String>> parts, int at, List<String> prefix, List<String> out) {
    if (at == parts.size()) {
      StringBuilder b = new StringBuilder();
      for (int i = 0; i < prefix.size(); i++) {
        b.append(i == 0 ? "" : ":").append(prefix.get(i).replace("\\", "\\\\").replace(":", "\\:"));
      }
      out.add(b.toString());
      return;
    }
    for (String s : parts.get(at)) {
      prefix.add(s);
      compose(parts, at + 1, prefix, out);
      prefix.remove(prefix.size() - 1);
    }
  }

  /** A partition-key value as the dataset's key string (the full query log reader's forms, docs/formats.md). */
  private static String keyString(Object v, DataType type, CodecRegistry registry, ProtocolVersion pv) {
    if (v instanceof String || v instanceof Number && !(v instanceof Double || v instanceof Float)
        || v instanceof UUID || v instanceof Boolean) {
      return v.toString();
    }
    if (v instanceof Instant) {
      return Long.toString(((Instant) v).toEpochMilli());
    }
    if (v instanceof java.net.Inet4Address) {
      return ((InetAddress) v).getHostAddress();
    }
    ByteBuffer raw = DataTypes.BLOB.equals(type) ? (ByteBuffer) v : registry.codecFor(type).encode(v, pv);
    StringBuilder b = new StringBuilder("0x");
    ByteBuffer d = raw.duplicate();
    while (d.hasRemaining()) {
      b.append(String.format("%02x", d.get() & 0xff));
    }
    return b.toString();
  }

  // --- uploads -----------------------------------------------------------------------------------------------
  private static String round6(double x) {
    return Double.toString(Math.round(x * 1e6) / 1e6);
  }

  static String json(String s) {
    StringBuilder b = new StringBuilder(s.length() + 2).append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '"' || c == '\\') {
        b.append('\\').append(c);
      } else if (c < 0x20) {
        b.append(String.format("\\u%04x", (int) c));
      } else {
        b.append(c);
      }
    }
    return b.append('"').toString();
  }

  private String header(double start, double end, int records, long dm, long db, long du) {
    String host;
    try {
      host = InetAddress.getLocalHost().getHostName();
    } catch (Exception e) {
      host = "unknown";
    }
    return "{\"schema\":" + json(SCHEMA)
        + ",\"client\":{\"name\":\"tailtune-java-tracker\",\"version\":" + json(VERSION) + ",\"id\":" + json(id)
        + ",\"host\":" + json(host) + ",\"pid\":" + ProcessHandle.current().pid() + "}"
        + ",\"kind\":\"cassandra\",\"tables\":true"
        + ",\"deployment\":" + (deployment == null ? "null" : json(deployment))
        + ",\"deployment_id\":" + (deploymentId == null ? "null" : deploymentId.toString())
        + ",\"servers\":null,\"hashing\":null,\"key_form\":\"plain\""
        + ",\"sample_rate\":" + rate
        + ",\"window\":{\"start\":" + round6(start) + ",\"end\":" + round6(end) + "}"
        + ",\"records\":" + records
        + ",\"dropped\":{\"memory\":" + dm + ",\"bandwidth\":" + db + ",\"unkeyed\":" + du + "}}\n";
  }

  /** One upload's body, its record lines and the figures `putBack` needs to undo it. */
  private static final class Batch {
    byte[] body;
    List<byte[]> lines;
    double start;
    long dm, db, du;
  }

  private Batch take() {
    Batch batch = new Batch();
    synchronized (lock) {
      double t = now();
      long budget = Math.min(maxBytes, (long) (uploadBytesPerSecond * Math.max(0.0, t - lastUpload)));
      batch.lines = new ArrayList<>();
      long used = 0;
      while (!lines.isEmpty() && used + lines.peekFirst().length <= budget) {
        byte[] l = lines.pollFirst();
        used += l.length;
        batch.lines.add(l);
      }
      droppedBandwidth += lines.size();
      lines.clear();
      held = 0;
      batch.dm = droppedMemory - sentMemory;
      batch.db = droppedBandwidth - sentBandwidth;
      batch.du = unkeyed - sentUnkeyed;
      sentMemory = droppedMemory;
      sentBandwidth = droppedBandwidth;
      sentUnkeyed = unkeyed;
      batch.start = lastUpload;
      lastUpload = t;
      byte[] head = header(batch.start, t, batch.lines.size(), batch.dm, batch.db, batch.du)
          .getBytes(StandardCharsets.UTF_8);
      batch.body = new byte[head.length + (int) used];
      System.arraycopy(head, 0, batch.body, 0, head.length);
      int at = head.length;
      for (byte[] l : batch.lines) {
        System.arraycopy(l, 0, batch.body, at, l.length);
        at += l.length;
      }
    }
    return batch;
  }

  private void putBack(Batch batch) {
    synchronized (lock) {
      lastUpload = batch.start;
      sentMemory -= batch.dm;
      sentBandwidth -= batch.db;
      sentUnkeyed -= batch.du;
      for (int i = batch.lines.size() - 1; i >= 0; i--) {
        byte[] l = batch.lines.get(i);
        if (held + l.length > maxBytes) {
          droppedMemory++;
          continue;
        }
        lines.addFirst(l);
        held += l.length;
      }
    }
  }

  /** POSTs the records since the last accepted upload; true when accepted (or nothing to send). Never throws. */
  public boolean upload() {
    if (url == null) {
      return false;
    }
    synchronized (sendLock) {
      Batch batch = take();
      if (batch.lines.isEmpty() && batch.dm == 0 && batch.db == 0 && batch.du == 0) {
        return true;
      }
      String name = "client-" + id.substring(0, 8) + "-" + (uploads + 1);
      StringBuilder target = new StringBuilder(url).append(url.contains("?") ? "&" : "?")
          .append("format=tailtune-client&name=").append(URLEncoder.encode(name, StandardCharsets.UTF_8));
      if (deploymentId != null) {
        target.append("&deployment_id=").append(deploymentId);
      }
      HttpRequest.Builder req = HttpRequest.newBuilder(URI.create(target.toString())).timeout(timeout)
          .header("Content-Type", "application/octet-stream")
          .POST(HttpRequest.BodyPublishers.ofByteArray(batch.body));
      if (token != null) {
        req.header("Authorization", "Bearer " + token);
      }
      String error = null;
      try {
        HttpResponse<String> resp = http.send(req.build(), HttpResponse.BodyHandlers.ofString());
        if (resp.statusCode() < 200 || resp.statusCode() >= 300) {
          String text = resp.body() == null ? "" : resp.body();
          error = "POST " + url + ": HTTP " + resp.statusCode() + ": "
              + text.substring(0, Math.min(200, text.length())).trim();
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        error = "POST " + url + ": interrupted";
      } catch (Exception e) {
        error = "POST " + url + ": " + e.getClass().getSimpleName() + ": " + e.getMessage();
      }
      lastError = error;
      if (error != null) {
        LOG.log(System.Logger.Level.WARNING, "tailtune-tracker: upload failed, records kept for the next one: " + error);
        putBack(batch);
        return false;
      }
      synchronized (lock) {
        uploads++;
        uploadBytes += batch.body.length;
      }
      return true;
    }
  }

  /** Requests seen and sampled, records kept, held and dropped (by cap), uploads: one JSON object. */
  public String stats() {
    synchronized (lock) {
      return "{\"rate\":" + rate + ",\"seen\":" + seen + ",\"sampled\":" + sampled + ",\"recorded\":" + recorded
          + ",\"held\":" + lines.size() + ",\"held_bytes\":" + held
          + ",\"dropped\":{\"memory\":" + droppedMemory + ",\"bandwidth\":" + droppedBandwidth
          + ",\"unkeyed\":" + unkeyed + "},\"uploads\":" + uploads + ",\"upload_bytes\":" + uploadBytes
          + ",\"last_error\":" + (lastError == null ? "null" : json(lastError)) + "}";
    }
  }

  /** Stops the uploader and uploads what is held once more (the driver calls it when the session closes). */
  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    if (uploader != null) {
      uploader.shutdownNow();
      try {
        uploader.awaitTermination(timeout.toMillis() + 5000, TimeUnit.MILLISECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      upload();
    }
    LOG.log(System.Logger.Level.DEBUG, () -> "tailtune-tracker closed: " + stats());
  }
}
