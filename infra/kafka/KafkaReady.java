import java.net.InetSocketAddress;
import java.net.Socket;
import java.util.Collection;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.common.Node;

/**
 * Readiness probe for the local broker (used by infra/kafka/start and status).
 *
 * Polls a real DescribeCluster request until the broker lists itself as an alive (unfenced) node
 * with the expected node id (and cluster id, when given).
 *
 * usage: KafkaReady --bootstrap HOST:PORT [--timeout SECONDS] [--node-id N] [--cluster-id ID] [--pid PID]
 * exit 0: ready, prints "cluster=ID nodes=N"
 *      1: not ready before the deadline (prints the last error)
 *      2: the watched --pid exited
 *      3: something answered on the port but it is another cluster or node
 */
public class KafkaReady {
    public static void main(String[] args) throws Exception {
        String bootstrap = null, clusterId = null;
        long timeoutS = 60, pid = -1;
        int nodeId = -1;
        for (int i = 0; i < args.length; i += 2) {
            String v = args[i + 1];
            switch (args[i]) {
                case "--bootstrap": bootstrap = v; break;
                case "--timeout": timeoutS = Long.parseLong(v); break;
                case "--node-id": nodeId = Integer.parseInt(v); break;
                case "--cluster-id": clusterId = v.isEmpty() ? null : v; break;
                case "--pid": pid = Long.parseLong(v); break;
                default: throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        if (bootstrap == null) throw new IllegalArgumentException("--bootstrap is required");
        String host = bootstrap.substring(0, bootstrap.lastIndexOf(':'));
        int port = Integer.parseInt(bootstrap.substring(bootstrap.lastIndexOf(':') + 1));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutS);

        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "3000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "3000");
        p.put(AdminClientConfig.RECONNECT_BACKOFF_MS_CONFIG, "100");
        p.put(AdminClientConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
        p.put(AdminClientConfig.RETRY_BACKOFF_MS_CONFIG, "100");
        String last = "no answer";
        Admin admin = null;
        try {
            while (true) {
                if (pid > 0 && !ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false)) {
                    System.out.println("broker process " + pid + " exited");
                    System.exit(2);
                }
                try {
                    // Cheap TCP gate first, so a closed port does not cost a whole request timeout.
                    try (Socket s = new Socket()) {
                        s.connect(new InetSocketAddress(host, port), 500);
                    }
                    if (admin == null) admin = Admin.create(p);
                    DescribeClusterResult r = admin.describeCluster(new DescribeClusterOptions().timeoutMs(3000));
                    String cid = r.clusterId().get(4, TimeUnit.SECONDS);
                    Collection<Node> nodes = r.nodes().get(4, TimeUnit.SECONDS);
                    if (clusterId != null && !clusterId.equals(cid)) {
                        System.out.println(bootstrap + " serves another Kafka cluster (" + cid + ", expected " + clusterId + ")");
                        System.exit(3);
                    }
                    final int want = nodeId;
                    if (want < 0 ? !nodes.isEmpty() : nodes.stream().anyMatch(n -> n.id() == want)) {
                        System.out.println("cluster=" + cid + " nodes=" + nodes.size());
                        System.exit(0);
                    }
                    last = nodes.isEmpty() ? "broker answered, no alive nodes yet"
                            : "broker answered, node " + want + " not alive yet (alive: " + nodes + ")";
                } catch (Exception e) {
                    Throwable c = e.getCause() != null ? e.getCause() : e;
                    last = c.getClass().getSimpleName() + ": " + c.getMessage();
                }
                if (System.nanoTime() > deadline) {
                    System.out.println("not ready: " + last);
                    System.exit(1);
                }
                Thread.sleep(200);
            }
        } finally {
            if (admin != null) admin.close(java.time.Duration.ofMillis(500));
        }
    }
}
