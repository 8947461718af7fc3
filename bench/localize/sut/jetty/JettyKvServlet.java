// The fault suite's jetty-chain front (bench/localize/sut/jetty_chain.py): PUT/GET /item/K
// forwarded to one of the store services (key K goes to store (K / 2) % N) over the JDK's
// HTTP/1.1 client (a pool of keep-alive connections, 1 s timeout per call).
import javax.servlet.http.HttpServlet;
import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;

public class JettyKvServlet extends HttpServlet {
    private HttpClient http;
    private String[] stores;
    private final AtomicLong served = new AtomicLong(), failed = new AtomicLong();

    @Override
    public void init() {
        String[] ports = System.getenv("KV_STORE_PORTS").split(",");
        stores = new String[ports.length];
        for (int i = 0; i < ports.length; i++) stores[i] = "http://127.0.0.1:" + ports[i] + "/kv/";
        http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(Duration.ofSeconds(1)).build();
    }

    @Override
    public void destroy() {
        System.err.println("systems: jetty front: " + served.get() + " requests ok, " + failed.get() + " failed (told to stop)");
    }

    static String digest(byte[] v) {
        try {
            byte[] d = MessageDigest.getInstance("SHA-1").digest(v);
            StringBuilder s = new StringBuilder();
            for (int i = 0; i < 8; i++) s.append(String.format("%02x", d[i]));
            return s.toString();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    private String key(HttpServletRequest req) {
        String p = req.getPathInfo() == null ? req.getServletPath() : req.getServletPath() + req.getPathInfo();
        if (!p.matches("/item/\\d{1,9}")) return null;
        return p.substring(6);
    }

    private String store(String k) {
        return stores[(Integer.parseInt(k) / 2) % stores.length] + k;
    }

    private void answer(HttpServletResponse resp, int status, String json) throws IOException {
        byte[] b = json.getBytes(StandardCharsets.UTF_8);
        resp.setStatus(status);
        resp.setContentType("application/json");
        resp.setContentLength(b.length);
        resp.getOutputStream().write(b);
    }

    private void fail(HttpServletResponse resp, int status, String why) throws IOException {
        failed.incrementAndGet();
        System.err.println("systems: jetty front: " + why);
        answer(resp, status, "{\"error\": \"" + why.replace("\"", "'") + "\"}");
    }

    private HttpResponse<byte[]> call(HttpRequest.Builder b) throws IOException, InterruptedException {
        return http.send(b.timeout(Duration.ofSeconds(1)).build(), HttpResponse.BodyHandlers.ofByteArray());
    }

    @Override
    protected void doPut(HttpServletRequest req, HttpServletResponse resp) throws IOException {
        String k = key(req);
        if (k == null) { fail(resp, 404, "no such path " + req.getRequestURI()); return; }
        byte[] v = req.getInputStream().readAllBytes();
        try {
            HttpResponse<byte[]> r = call(HttpRequest.newBuilder(URI.create(store(k)))
                    .PUT(HttpRequest.BodyPublishers.ofByteArray(v)));
            String got = new String(r.body(), StandardCharsets.UTF_8).trim();
            if (r.statusCode() != 200 || !got.equals(digest(v))) {
                fail(resp, 502, "item " + k + ": store answered " + r.statusCode() + " " + got);
                return;
            }
        } catch (IOException | InterruptedException e) {
            fail(resp, 502, "item " + k + ": store failed: " + e);
            return;
        }
        served.incrementAndGet();
        answer(resp, 200, "{\"item\": " + k + ", \"stored\": " + v.length + "}");
    }

    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse resp) throws IOException {
        String k = key(req);
        if (k == null) { fail(resp, 404, "no such path " + req.getRequestURI()); return; }
        byte[] v;
        try {
            HttpResponse<byte[]> r = call(HttpRequest.newBuilder(URI.create(store(k))).GET());
            if (r.statusCode() != 200) {
                fail(resp, 502, "item " + k + ": store answered " + r.statusCode());
                return;
            }
            v = r.body();
        } catch (IOException | InterruptedException e) {
            fail(resp, 502, "item " + k + ": store failed: " + e);
            return;
        }
        served.incrementAndGet();
        answer(resp, 200, "{\"item\": " + k + ", \"len\": " + v.length + ", \"digest\": \"" + digest(v) + "\"}");
    }
}
