"""http-proxy: haproxy in front of two nginx (master + worker each), one client (C daemons)."""

import os

from .common import Daemons, log, ports, steps, wait_port


def http_proxy(tmp, n):
    import http.client

    front, b1, b2 = ports("http-proxy")[:3]
    www = os.path.join(tmp, "www")
    os.makedirs(www, exist_ok=True)
    for i in range(8):
        with open(os.path.join(www, f"page{i}.html"), "w") as f:
            f.write(f"<html><body>page {i} " + "lorem ipsum " * (20 + 30 * i) + "</body></html>\n")
    with Daemons(tmp) as d:
        for i, port in ((1, b1), (2, b2)):
            conf = os.path.join(tmp, f"nginx{i}.conf")
            with open(conf, "w") as f:
                f.write(
                    "daemon off; master_process on; worker_processes 1; user root;\n"
                    f"pid {tmp}/nginx{i}.pid; error_log {tmp}/nginx{i}.err info;\n"
                    "events { worker_connections 64; }\n"
                    "http { access_log off; keepalive_requests 1000;\n"
                    f"  client_body_temp_path {tmp}/b{i}; proxy_temp_path {tmp}/p{i};\n"
                    f"  fastcgi_temp_path {tmp}/f{i}; uwsgi_temp_path {tmp}/u{i}; scgi_temp_path {tmp}/s{i};\n"
                    f"  server {{ listen 127.0.0.1:{port}; root {www}; }} }}\n"
                )
            p = d.start(f"nginx{i}", ["nginx", "-c", conf, "-p", tmp, "-e", f"{tmp}/nginx{i}.err"])
            wait_port(port, p)
        conf = os.path.join(tmp, "haproxy.cfg")
        with open(conf, "w") as f:
            f.write(
                "global\n  maxconn 64\n"
                "defaults\n  mode http\n  timeout connect 1s\n  timeout client 5s\n  timeout server 400ms\n"
                "  option http-keep-alive\n  retries 0\n"
                f"frontend fe\n  bind 127.0.0.1:{front}\n  default_backend be\n"
                "backend be\n  balance roundrobin\n  http-reuse always\n"
                f"  server s1 127.0.0.1:{b1}\n  server s2 127.0.0.1:{b2}\n"
            )
        p = d.start("haproxy", ["haproxy", "-f", conf, "-db"])
        wait_port(front, p)
        ok = errors = 0
        conn = None
        for i in steps(n):
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", front, timeout=2)
                conn.request("GET", f"/page{i % 8}.html")
                r = conn.getresponse()
                body = r.read()
                if r.status != 200 or not body.endswith(b"</html>\n"):
                    raise ValueError(f"status {r.status}, {len(body)} bytes")
                ok += 1
            except (OSError, ValueError, http.client.HTTPException) as e:
                errors += 1
                log(f"request failed: {e!r}")
                if conn is not None:
                    conn.close()
                conn = None
        if conn is not None:
            conn.close()
        log(f"http-proxy: {ok}/{n} GET ok, {errors} failed")
