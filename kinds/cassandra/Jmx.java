import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;
import javax.management.remote.JMXConnectorFactory;
import javax.management.remote.JMXServiceURL;

/**
 * A JMX session with one Cassandra node (kinds/cassandra/jmx.py starts it under the egress rules' sandbox: it
 * reaches HOST:PORT only). It reads figures; its one write is the dynamic snitch's settings.
 *
 * <pre>Jmx HOST PORT</pre>
 *
 * connects once, prints {@code ready}, then answers one line per request read from standard input, until its end:
 *
 * <pre>get OBJECT_NAME ATTRIBUTE   → ok VALUE       (a number, a boolean, or numbers joined by ',' for an array)
 * names PATTERN               → ok NAME\tNAME…  (the MBeans matching PATTERN, sorted)
 * time                        → ok NANOS       (this JVM's System.nanoTime, to date the answers)
 * update-snitch UPDATE_MS RESET_MS BADNESS → ok  (StorageServiceMBean.updateSnitch(null, null, ...): the node keeps
 *                               its snitch and applies the three numbers to its DynamicEndpointSnitch; nothing
 *                               persisted)</pre>
 *
 * and {@code error TEXT} for a request it cannot answer (the session goes on). A value that is neither a number,
 * a boolean nor an array of numbers is refused (this client reads figures, never objects). A login, when the node
 * wants one, comes from the environment (TAILTUNE_JMX_USERNAME, TAILTUNE_JMX_PASSWORD), never an argument.
 */
public final class Jmx {
    private static String value(Object v) {
        if (v instanceof Number || v instanceof Boolean) return String.valueOf(v);
        if (v instanceof long[]) {
            StringBuilder b = new StringBuilder();
            for (long x : (long[]) v) b.append(b.length() == 0 ? "" : ",").append(x);
            return b.toString();
        }
        if (v instanceof double[]) {
            StringBuilder b = new StringBuilder();
            for (double x : (double[]) v) b.append(b.length() == 0 ? "" : ",").append(x);
            return b.toString();
        }
        throw new IllegalArgumentException("not a number: " + (v == null ? "null" : v.getClass().getName()));
    }

    private static String answer(MBeanServerConnection mbs, String line) throws Exception {
        String[] p = line.trim().split(" ", 3);
        switch (p[0]) {
            case "get": {  // the attribute is the last word: an object name may hold spaces (G1 Young Generation)
                String body = line.trim().substring(p[0].length()).trim();
                int at = body.lastIndexOf(' ');
                if (at <= 0) throw new IllegalArgumentException("get OBJECT_NAME ATTRIBUTE");
                return value(mbs.getAttribute(new ObjectName(body.substring(0, at)), body.substring(at + 1)));
            }
            case "names": {
                if (p.length != 2) throw new IllegalArgumentException("names PATTERN");
                Set<String> out = new TreeSet<>();
                for (ObjectName n : mbs.queryNames(new ObjectName(p[1]), null)) out.add(n.getCanonicalName());
                return String.join("\t", out);
            }
            case "time":
                return String.valueOf(System.nanoTime());
            case "update-snitch": {
                String[] v = line.trim().split(" ");
                if (v.length != 4) throw new IllegalArgumentException("update-snitch UPDATE_MS RESET_MS BADNESS");
                Object[] params = {null, null, Integer.valueOf(v[1]), Integer.valueOf(v[2]), Double.valueOf(v[3])};
                String[] sig = {"java.lang.String", "java.lang.Boolean", "java.lang.Integer", "java.lang.Integer",
                    "java.lang.Double"};
                mbs.invoke(new ObjectName("org.apache.cassandra.db:type=StorageService"), "updateSnitch", params, sig);
                return "";
            }
            default:
                throw new IllegalArgumentException("get, names, time or update-snitch, not " + p[0]);
        }
    }

    public static void main(String[] args) {
        try {
            if (args.length != 2) throw new IllegalArgumentException("usage: Jmx HOST PORT");
            String host = args[0].contains(":") ? "[" + args[0] + "]" : args[0];
            JMXServiceURL url = new JMXServiceURL("service:jmx:rmi:///jndi/rmi://" + host + ":"
                + Integer.parseInt(args[1]) + "/jmxrmi");
            Map<String, Object> env = new HashMap<>();
            String user = System.getenv("TAILTUNE_JMX_USERNAME");
            if (user != null && !user.isEmpty()) {
                String pass = System.getenv("TAILTUNE_JMX_PASSWORD");
                env.put(JMXConnector.CREDENTIALS, new String[] {user, pass == null ? "" : pass});
            }
            try (JMXConnector c = JMXConnectorFactory.connect(url, env)) {
                MBeanServerConnection mbs = c.getMBeanServerConnection();
                System.out.println("ready");
                System.out.flush();
                BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
                for (String line; (line = in.readLine()) != null; ) {
                    String out;
                    try {
                        out = "ok " + answer(mbs, line);
                    } catch (Exception e) {
                        out = "error " + String.valueOf(e.getMessage()).replace('\n', ' ');
                    }
                    System.out.println(out);
                    System.out.flush();
                }
            }
        } catch (Throwable e) {
            System.out.println("error " + String.valueOf(e.getMessage()).replace('\n', ' '));
            System.exit(1);
        }
    }
}
