// The application tier of the demand suite's catalog-haproxy-tomcat system
// (bench/demand/catalog.py): a servlet run by Apache Tomcat 10 (Debian `tomcat10`: one JVM,
// the NIO connector's acceptor and poller threads and a pool of at most 4 request threads)
// behind HAProxy, over MariaDB through JDBC (Debian `libmariadb-java`: MariaDB Connector/J;
// each request thread keeps its own connection, made on its first request).
//
// Three request types (`/TYPE/K`), each burning a known CPU time of the request's thread
// (ThreadMXBean.getCurrentThreadCpuTime) before its database work:
//
// - `item/K` burns 1 ms, then reads one item by its SKU (an index lookup; the `index`
//   fault drops the index: the table is scanned): 1 query;
// - `browse/K` burns 4 ms, then reads category K's name and its first 20 items
//   (an index on the category): 2 queries;
// - `rate/K` burns 0.7 ms, then adds a rating to item K (an UPDATE by its id and an
//   INSERT into the ratings, autocommit) and reads its new rating back: 3 queries.
//
// Each request's thread CPU time from the servlet's first line to its reply flushed to the
// socket (Tomcat's parsing of the request before the servlet is not in it: the JVM gives a
// thread's CPU, and that thread served other connections before) is appended to
// $CATALOG_STATS/warmup-app-PID.tsv ("TYPE SECONDS") during the set-up's requests (until the
// file $CATALOG_STATS/load exists), then to app-PID.tsv until the fault (the file
// $CATALOG_STATS/fault exists after it), then to after-app-PID.tsv: app-PID.tsv is the truth
// of the fault-free demands. The database's port comes from CATALOG_DB_PORT. At its end (Tomcat
// stopped by SIGTERM) the servlet writes how many requests of each type it served to
// Tomcat's log (standard error).

import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.FileWriter;
import java.io.IOException;
import java.io.Writer;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

public class CatalogServlet extends HttpServlet {
    static final Map<String, Double> BURN_S = Map.of("item", 0.001, "browse", 0.004, "rate", 0.0007);
    static final int ITEMS = 30000;

    private final ThreadMXBean mx = ManagementFactory.getThreadMXBean();
    private final ThreadLocal<Connection> conn = new ThreadLocal<>();
    private final Map<String, AtomicLong> served = new ConcurrentHashMap<>();
    private String url;
    private Path stats, load, fault;
    private final Map<String, Writer> logs = new HashMap<>();
    private long pid;

    @Override
    public void init() throws ServletException {
        String port = System.getenv("CATALOG_DB_PORT"), dir = System.getenv("CATALOG_STATS");
        if (port == null || dir == null) {
            throw new ServletException("CatalogServlet: CATALOG_DB_PORT and CATALOG_STATS must be set");
        }
        url = "jdbc:mariadb://127.0.0.1:" + port + "/catalog?user=root";
        stats = Path.of(dir);
        load = stats.resolve("load");
        fault = stats.resolve("fault");
        pid = ProcessHandle.current().pid();
        try {
            Class.forName("org.mariadb.jdbc.Driver");
        } catch (ClassNotFoundException e) {
            throw new ServletException("CatalogServlet: no MariaDB Connector/J in WEB-INF/lib", e);
        }
        for (String k : BURN_S.keySet()) {
            served.put(k, new AtomicLong());
        }
    }

    long burn(double seconds) {
        long end = mx.getCurrentThreadCpuTime() + (long) (seconds * 1e9);
        long x = 0;
        while (mx.getCurrentThreadCpuTime() < end) {
            x++;
        }
        return x;
    }

    Connection db() throws SQLException {
        Connection c = conn.get();
        if (c == null) {
            c = DriverManager.getConnection(url);
            conn.set(c);
        }
        return c;
    }

    static String sku(long k) {
        return String.format("s%07d", 1 + Math.floorMod(k, ITEMS));
    }

    String item(long k) throws SQLException {
        StringBuilder b = new StringBuilder("<html><body>");
        try (PreparedStatement s = db().prepareStatement(
                "SELECT id, sku, title, price, descr FROM items WHERE sku = ?")) {
            s.setString(1, sku(k));
            try (ResultSet r = s.executeQuery()) {
                while (r.next()) {
                    b.append("<h1>").append(r.getString(3)).append("</h1><p>").append(r.getString(2))
                        .append(' ').append(r.getInt(4)).append("</p><div>").append(r.getString(5)).append("</div>");
                }
            }
        }
        return b.append("</body></html>").toString();
    }

    String browse(long k) throws SQLException {
        int cat = (int) Math.floorMod(k, 100L);
        StringBuilder b = new StringBuilder("<html><body>");
        try (PreparedStatement s = db().prepareStatement("SELECT name FROM categories WHERE id = ?")) {
            s.setInt(1, cat);
            try (ResultSet r = s.executeQuery()) {
                while (r.next()) {
                    b.append("<h1>").append(r.getString(1)).append("</h1>");
                }
            }
        }
        try (PreparedStatement s = db().prepareStatement(
                "SELECT id, sku, title, price FROM items WHERE category = ? ORDER BY id LIMIT 20")) {
            s.setInt(1, cat);
            try (ResultSet r = s.executeQuery()) {
                b.append("<ul>");
                while (r.next()) {
                    b.append("<li>").append(r.getString(2)).append(' ').append(r.getString(3)).append(' ')
                        .append(r.getInt(4)).append("</li>");
                }
                b.append("</ul>");
            }
        }
        return b.append("</body></html>").toString();
    }

    String rate(long k) throws SQLException {
        int id = 1 + (int) Math.floorMod(k, (long) ITEMS);
        int stars = 1 + (int) Math.floorMod(k, 5L);
        try (PreparedStatement s = db().prepareStatement("UPDATE items SET rating = rating + ? WHERE id = ?")) {
            s.setInt(1, stars);
            s.setInt(2, id);
            s.executeUpdate();
        }
        try (PreparedStatement s = db().prepareStatement("INSERT INTO ratings(item, stars) VALUES (?, ?)")) {
            s.setInt(1, id);
            s.setInt(2, stars);
            s.executeUpdate();
        }
        long rating = 0;
        try (PreparedStatement s = db().prepareStatement("SELECT rating FROM items WHERE id = ?")) {
            s.setInt(1, id);
            try (ResultSet r = s.executeQuery()) {
                while (r.next()) {
                    rating = r.getLong(1);
                }
            }
        }
        return "rated " + id + ": " + rating + "\n";
    }

    synchronized void log(String kind, double seconds) throws IOException {
        String prefix = !Files.exists(load) ? "warmup-app-" : Files.exists(fault) ? "after-app-" : "app-";
        Writer w = logs.get(prefix);
        if (w == null) {
            w = new FileWriter(stats.resolve(prefix + pid + ".tsv").toFile(), StandardCharsets.UTF_8, true);
            logs.put(prefix, w);
        }
        w.write(kind + " " + seconds + "\n");
        w.flush();
    }

    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse resp) throws ServletException, IOException {
        long t0 = mx.getCurrentThreadCpuTime();
        String[] parts = req.getRequestURI().split("/");
        String kind = parts.length == 3 ? parts[1] : "";
        Double burnS = BURN_S.get(kind);
        long k;
        try {
            k = burnS == null ? 0 : Long.parseLong(parts[2]);
        } catch (NumberFormatException e) {
            burnS = null;
            k = 0;
        }
        if (burnS == null) {
            resp.sendError(404, "no such page: /item/K, /browse/K, /rate/K");
            return;
        }
        burn(burnS);
        String body;
        try {
            body = kind.equals("item") ? item(k) : kind.equals("browse") ? browse(k) : rate(k);
        } catch (SQLException e) {
            Connection c = conn.get();
            conn.remove();
            if (c != null) {
                try {
                    c.close();
                } catch (SQLException ignored) {
                    // the connection is dropped either way
                }
            }
            throw new ServletException("CatalogServlet: " + kind + " " + k + ": " + e.getMessage(), e);
        }
        byte[] out = body.getBytes(StandardCharsets.UTF_8);
        resp.setContentType("text/html");
        resp.setContentLength(out.length);
        resp.getOutputStream().write(out);
        resp.flushBuffer();
        served.get(kind).incrementAndGet();
        log(kind, (mx.getCurrentThreadCpuTime() - t0) / 1e9);
    }

    @Override
    public void destroy() {
        System.err.println("CatalogServlet " + pid + ": served " + served);
        synchronized (this) {
            for (Writer w : logs.values()) {
                try {
                    w.close();
                } catch (IOException ignored) {
                    // every line was flushed when written
                }
            }
        }
    }
}
