"""The nginx front tier of the demand systems: one worker, every temporary path in the run's
directory, one server on loopback whose only location is given."""

import os


def config(tmp, port, location):
    """Write `tmp/nginx.conf` for a server on 127.0.0.1:`port` whose `location /` holds
    `location` (e.g. `proxy_pass http://127.0.0.1:P;`); returns its path."""
    path = os.path.join(tmp, "nginx.conf")
    with open(path, "w") as f:
        f.write(
            "daemon off;\nmaster_process on;\nworker_processes 1;\n%s"
            "error_log %s/nginx.err;\npid %s/nginx.pid;\nevents { worker_connections 256; }\n"
            "http {\n  access_log off;\n  client_body_temp_path %s/ngx_body;\n"
            "  proxy_temp_path %s/ngx_proxy;\n  fastcgi_temp_path %s/ngx_fcgi;\n"
            "  uwsgi_temp_path %s/ngx_uwsgi;\n  scgi_temp_path %s/ngx_scgi;\n"
            "  server {\n    listen 127.0.0.1:%d;\n"
            "    location / { %s }\n  }\n}\n"
            % (("user root;\n" if os.getuid() == 0 else ""), tmp, tmp, tmp, tmp, tmp, tmp, tmp, port, location)
        )
    return path
