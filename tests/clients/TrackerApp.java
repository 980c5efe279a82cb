// An application of the Java driver 4 with tailtune's request tracker configured (tests/clients/test_java_tracker.py):
// args host port datacenter keyspace url deployment-id [caps]; the token in TAILTUNE_TRACKER_TOKEN. With `caps`: 40
// single-key reads under a 1 KiB memory cap and a bandwidth cap no record fits in; without: known single-key and IN
// reads, a write, a composite-key read, a statement without keys and a failed read. Then it closes the session (the
// tracker uploads what it holds) and prints "ok".
import com.datastax.oss.driver.api.core.AllNodesFailedException;
import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.DefaultConsistencyLevel;
import com.datastax.oss.driver.api.core.config.DefaultDriverOption;
import com.datastax.oss.driver.api.core.config.DriverConfigLoader;
import com.datastax.oss.driver.api.core.cql.PreparedStatement;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.List;

public class TrackerApp {
  public static void main(String[] args) {
    String ks = args[3];
    boolean caps = args.length > 6 && args[6].equals("caps");
    DriverConfigLoader loader = DriverConfigLoader.programmaticBuilder()
        .withStringList(DefaultDriverOption.REQUEST_TRACKER_CLASSES,
                        List.of("io.tailtune.tracker.TailtuneRequestTracker"))
        .withDouble(() -> "advanced.tailtune-tracker.rate", 1.0)
        .withString(() -> "advanced.tailtune-tracker.url", args[4])
        .withLong(() -> "advanced.tailtune-tracker.deployment-id", Long.parseLong(args[5]))
        .withLong(() -> "advanced.tailtune-tracker.config-version", 7)
        .withDouble(() -> "advanced.tailtune-tracker.upload-bytes-per-second", caps ? 0.001 : 1e9)
        .withLong(() -> "advanced.tailtune-tracker.max-bytes", caps ? 1024 : 1 << 20)
        .build();
    try (CqlSession session = CqlSession.builder()
        .addContactPoint(new InetSocketAddress(args[0], Integer.parseInt(args[1])))
        .withLocalDatacenter(args[2]).withConfigLoader(loader).build()) {
      PreparedStatement one = session.prepare("SELECT v FROM " + ks + ".t WHERE k = ?");
      if (caps) {
        for (int i = 0; i < 40; i++) {
          session.execute(one.bind("k" + i));
        }
        System.out.println("ok");
        return;
      }
      PreparedStatement in = session.prepare("SELECT v FROM " + ks + ".t WHERE k IN ?");
      PreparedStatement write = session.prepare("INSERT INTO " + ks + ".t (k, v) VALUES (?, ?)");
      PreparedStatement composite = session.prepare("SELECT v FROM " + ks + ".c WHERE a = ? AND b = ?");
      for (int i = 0; i < 5; i++) {
        session.execute(one.bind("k" + i));
      }
      session.execute(in.bind(List.of("k1", "k2", "k3")));
      session.execute(in.bind(List.of("k4")));
      session.execute(write.bind("k9", ByteBuffer.wrap(new byte[8])));
      session.execute(composite.bind(1, "x:y"));
      session.execute("SELECT release_version FROM system.local");
      try { // three replicas asked of a keyspace of one: Unavailable, a failed request
        session.execute(one.bind("k5").setConsistencyLevel(DefaultConsistencyLevel.THREE));
        throw new IllegalStateException("a read at THREE on one replica succeeded");
      } catch (AllNodesFailedException expected) { // Unavailable, retried on the next node: there is none
      }
    }
    System.out.println("ok");
  }
}
