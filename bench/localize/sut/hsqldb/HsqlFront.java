// The fault suite's hsqldb-front (bench/localize/sut/hsqldb_front.py): PUT/GET /item/K kept in
// an HSQLDB server's table over JDBC. com.sun.net.httpserver with a fixed pool of 4 request
// threads; a pool of 3 JDBC connections (a request waits at most 1 s for one); every JDBC
// call (connecting included) runs on a call thread and is given up after 1 s (the
// statement also has a 1 s query timeout), its connection dropped and a new one opened for
// the pool. A failure becomes a 502. Start-up, before the front listens, is bounded by 20 s a
// call, and each pooled connection runs both statements once.
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

public class HsqlFront {
    static final int POOL = 3;
    static String url;
    static final BlockingQueue<Connection> pool = new ArrayBlockingQueue<>(POOL);
    // JDBC calls run here, so that a call that never returns holds a call thread only.
    static final ExecutorService calls = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "jdbc-call");
        t.setDaemon(true);
        return t;
    });
    static final AtomicLong served = new AtomicLong(), failed = new AtomicLong(), reopened = new AtomicLong();

    static <T> T call(Callable<T> c, long millis) throws Exception {
        Future<T> f = calls.submit(c);
        try {
            return f.get(millis, TimeUnit.MILLISECONDS);
        } catch (java.util.concurrent.ExecutionException e) {
            throw e.getCause() instanceof Exception ? (Exception) e.getCause() : e;
        } finally {
            f.cancel(true);
        }
    }

    static Connection open() throws Exception {
        return open(1000);
    }

    static Connection open(long millis) throws Exception {
        return call(() -> DriverManager.getConnection(url, "SA", ""), millis);
    }

    static String digest(byte[] v) throws Exception {
        byte[] d = MessageDigest.getInstance("SHA-1").digest(v);
        StringBuilder s = new StringBuilder();
        for (int i = 0; i < 8; i++) s.append(String.format("%02x", d[i]));
        return s.toString();
    }

    static void answer(HttpExchange ex, int status, String json) throws IOException {
        byte[] b = json.getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", "application/json");
        ex.sendResponseHeaders(status, b.length);
        try (OutputStream o = ex.getResponseBody()) {
            o.write(b);
        }
    }

    static String put(Connection c, int k, String v, long millis) throws Exception {
        return call(() -> {
            try (PreparedStatement st = c.prepareStatement(
                    "MERGE INTO kv USING (VALUES(CAST(? AS INTEGER), CAST(? AS VARCHAR(8192)))) AS n(k, v) ON kv.k = n.k "
                            + "WHEN MATCHED THEN UPDATE SET kv.v = n.v WHEN NOT MATCHED THEN INSERT VALUES n.k, n.v")) {
                st.setQueryTimeout(1);
                st.setInt(1, k);
                st.setString(2, v);
                st.executeUpdate();
            }
            return "{\"item\": " + k + ", \"stored\": " + v.getBytes(StandardCharsets.UTF_8).length + "}";
        }, millis);
    }

    static String get(Connection c, int k, long millis) throws Exception {
        return call(() -> {
            try (PreparedStatement st = c.prepareStatement("SELECT v FROM kv WHERE k = ?")) {
                st.setQueryTimeout(1);
                st.setInt(1, k);
                try (ResultSet rs = st.executeQuery()) {
                    if (!rs.next()) return null;
                    byte[] v = rs.getString(1).getBytes(StandardCharsets.UTF_8);
                    return "{\"item\": " + k + ", \"len\": " + v.length + ", \"digest\": \"" + digest(v) + "\"}";
                }
            }
        }, millis);
    }

    static void item(HttpExchange ex) throws IOException {
        String p = ex.getRequestURI().getPath();
        byte[] body;
        try (InputStream in = ex.getRequestBody()) {
            body = in.readAllBytes();
        }
        if (!p.matches("/item/\\d{1,9}")) {
            answer(ex, 404, "{\"error\": \"no such path\"}");
            return;
        }
        int k = Integer.parseInt(p.substring(6));
        Connection c;
        try {
            c = pool.poll(1, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            c = null;
        }
        if (c == null) {
            failed.incrementAndGet();
            answer(ex, 502, "{\"error\": \"no database connection within 1 s\"}");
            return;
        }
        String out;
        try {
            out = "PUT".equals(ex.getRequestMethod()) ? put(c, k, new String(body, StandardCharsets.UTF_8), 1000)
                    : get(c, k, 1000);
        } catch (Exception e) {
            System.err.println("front: " + ex.getRequestMethod() + " " + p + ": " + e);
            failed.incrementAndGet();
            Connection bad = c;
            c = null;
            calls.submit(() -> {
                try {
                    bad.close();
                } catch (Exception ignored) {
                }
            });
            replace();
            answer(ex, 502, "{\"error\": \"database: " + e.getClass().getSimpleName() + "\"}");
            return;
        } finally {
            if (c != null) pool.offer(c);
        }
        if (out == null) {
            failed.incrementAndGet();
            answer(ex, 404, "{\"error\": \"no such item\"}");
        } else {
            served.incrementAndGet();
            answer(ex, 200, out);
        }
    }

    // A new connection for the pool in place of a dropped one (tried again by later
    // requests' failures if the database does not answer).
    static void replace() {
        try {
            pool.offer(open());
            reopened.incrementAndGet();
        } catch (Exception e) {
            System.err.println("front: reconnecting: " + e);
            // The pool stays one short until a later reconnection; keep it from emptying.
            new Thread(() -> {
                for (int i = 0; i < 40; i++) {
                    try {
                        Thread.sleep(500);
                        pool.offer(open());
                        reopened.incrementAndGet();
                        return;
                    } catch (Exception again) {
                        System.err.println("front: reconnecting: " + again);
                    }
                }
            }, "reconnect").start();
        }
    }

    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        url = args[1];
        Class.forName("org.hsqldb.jdbc.JDBCDriver");
        // Start-up (before the front listens) is bounded by 20 s a call, not 1 s: the first
        // connection loads the driver's classes, slow on a loaded machine. Each pooled
        // connection runs both statements once (key 0, which no client uses), so that no
        // class is loaded or statement compiled for the first time under the 1 s bound.
        Connection first = open(20000);
        call(() -> {
            try (PreparedStatement st = first.prepareStatement(
                    "CREATE TABLE IF NOT EXISTS kv (k INTEGER PRIMARY KEY, v VARCHAR(8192))")) {
                st.execute();
            }
            return null;
        }, 20000);
        pool.offer(first);
        for (int i = 1; i < POOL; i++) pool.offer(open(20000));
        for (Connection c : pool) {
            put(c, 0, "warm-up", 20000);
            get(c, 0, 20000);
        }
        HttpServer s = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 64);
        s.createContext("/item/", HsqlFront::item);
        s.createContext("/", ex -> {
            ex.getRequestBody().readAllBytes();
            answer(ex, 200, "{\"front\": \"hsqldb\"}");
        });
        s.setExecutor(Executors.newFixedThreadPool(4));
        Runtime.getRuntime().addShutdownHook(new Thread(() -> System.err.println(
                "systems: hsqldb front: " + served.get() + " requests ok, " + failed.get() + " failed, "
                        + reopened.get() + " connections made again (told to stop)")));
        s.start();
        System.err.println("front: listening on " + port);
    }
}
