import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;
import javax.management.remote.JMXConnectorFactory;
import javax.management.remote.JMXServiceURL;

/**
 * The dynamic snitch of one Cassandra node over JMX (kinds/cassandra/replay/snitch.py starts it, under the egress
 * rules' sandbox: it reaches HOST:PORT only).
 *
 * <pre>SnitchJmx HOST PORT get
 * SnitchJmx HOST PORT set UPDATE_MS RESET_MS BADNESS</pre>
 *
 * `set` runs StorageServiceMBean.updateSnitch(null, null, UPDATE_MS, RESET_MS, BADNESS): with no class name the
 * node keeps its snitch and applies the three numbers to its DynamicEndpointSnitch (applyConfigChanges; nothing
 * persisted). Both print the running snitch's values, read back from the DynamicEndpointSnitch MBean, as one line
 * `ok UPDATE_MS RESET_MS BADNESS`; `off` when the node runs no dynamic snitch; `error TEXT` (exit 1) otherwise.
 * A login, when the node wants one, comes from the environment (TAILTUNE_JMX_USERNAME, TAILTUNE_JMX_PASSWORD).
 */
public final class SnitchJmx {
    public static void main(String[] args) {
        try {
            if (args.length < 3) throw new IllegalArgumentException("usage: SnitchJmx HOST PORT get|set ...");
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
                if (args[2].equals("set")) {
                    if (args.length != 6) throw new IllegalArgumentException("set UPDATE_MS RESET_MS BADNESS");
                    Object[] params = {null, null, Integer.valueOf(args[3]), Integer.valueOf(args[4]),
                        Double.valueOf(args[5])};
                    String[] sig = {"java.lang.String", "java.lang.Boolean", "java.lang.Integer",
                        "java.lang.Integer", "java.lang.Double"};
                    mbs.invoke(new ObjectName("org.apache.cassandra.db:type=StorageService"), "updateSnitch",
                        params, sig);
                } else if (!args[2].equals("get")) {
                    throw new IllegalArgumentException("get or set, not " + args[2]);
                }
                Set<ObjectName> names = mbs.queryNames(
                    new ObjectName("org.apache.cassandra.db:type=DynamicEndpointSnitch,*"), null);
                if (names.isEmpty()) {
                    System.out.println("off");
                    return;
                }
                ObjectName des = names.iterator().next();
                System.out.println("ok " + mbs.getAttribute(des, "UpdateInterval") + " "
                    + mbs.getAttribute(des, "ResetInterval") + " " + mbs.getAttribute(des, "BadnessThreshold"));
            }
        } catch (Throwable e) {
            String text = String.valueOf(e.getMessage()).replace('\n', ' ');
            System.out.println("error " + e.getClass().getSimpleName() + ": " + text);
            System.exit(1);
        }
    }
}
