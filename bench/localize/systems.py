#!/usr/bin/env python3
"""The third-party systems of Culprit's public fault suite, each started as a multi-process
system on loopback, driven by a bounded workload, and stopped.

    python3 bench/localize/systems.py SYSTEM --dir DIR [--requests N]

SYSTEM is one of SYSTEMS below; each lives in its own module of `sut/` (shared helpers in
`sut/common.py`). Every daemon is an unmodified program from Debian or PyPI; the clients
are small scripts written here on the usual client libraries and tolerate failures the way
real clients do (a failed request is logged, the connection is made again, the workload
goes on), so that a fault injected by `culprit record --inject` has consequences that the
trace shows. Everything listens on 127.0.0.1, on ten fixed ports per system from
`LOCALIZE_PORT_BASE` (default 23000) + 10 × its slot (`sut.common.SLOTS`); every wait is
bounded, and the launcher stops its daemons (SIGTERM, then SIGKILL) on every exit path.

| system | half | processes | what it is |
|---|---|---|---|
| `memcache-proxy` | tuning | twemproxy (nutcracker) + 2 memcached + client | a sharding proxy and its backends (C) |
| `http-proxy` | tuning | haproxy + 2 nginx (master + worker each) + client | an HTTP load balancer (C) |
| `job-queue` | tuning | beanstalkd + producer + 2 worker processes | a work queue (C server, Python clients) |
| `pyro-rpc` | tuning | Pyro5 name server + 2 Pyro5 servers + client | Python RPC with a naming service (threads) |
| `mqtt-bridge` | tuning (validation in runs 1–3) | 2 mosquitto brokers bridged + paho-mqtt publisher and 2 subscribers | pub/sub across a bridge (C broker, Python clients) |
| `irc-network` | tuning (validation in runs 1–3) | 2 linked ngircd servers + 3 IRC clients | a federated chat network (C) |
| `dns-chain` | tuning (validation in runs 1–3) | unbound resolver → nsd authoritative + dnspython clients over UDP and TCP | recursive DNS (C) |
| `gearman-jobs` | tuning (validation in runs 1–3) | gearmand + 2 `gearman -w` workers + client | a job server (C++) |
| `aiohttp-chain` | tuning (validation in runs 1–3) | aiohttp front → aiohttp backend + asyncio client | async HTTP services (CPython asyncio) |
| `zookeeper-ensemble` | tuning (validation in runs 1–3) | 3 ZooKeeper servers + kazoo clients | consensus (JVM) |
| `rabbitmq-queue` | tuning (validation in runs 1–3) | RabbitMQ broker + pika producer and 2 consumers | a message broker (Erlang/BEAM) |
| `grpc-chain` | tuning (validation in runs 1–3) | grpcio front → grpcio backend + unary client and streaming client | RPC over HTTP/2 (gRPC C-core, CPython) |
| `ldap-syncrepl` | tuning (validation in runs 1–3) | OpenLDAP provider → syncrepl consumer + ldap3 writer and 2 readers | a directory with replication (C, LDAP/BER) |
| `tarantool-replicas` | tuning (validation in runs 1–3) | Tarantool master → read-only replica + writer and 2 readers | an in-memory database with replication (C + LuaJIT, iproto/MessagePack) |
| `php-fastcgi` | tuning (validation in runs 1–3) | lighttpd → php-cgi master + worker (FastCGI on a UNIX socket) + 2 HTTP clients | a web server and PHP (C, Zend) |
| `mariadb-replication` | tuning (validation in runs 1–3) | MariaDB primary → replica + PyMySQL writer and 2 readers | a SQL database with binlog replication (C++) |
| `rsyslog-relay` | tuning (validation in runs 1–3) | rsyslog relay → rsyslog central over RELP + 2 syslog senders and a file tailer | log shipping (C) |
| `imap-mailstore` | tuning (validation in runs 1–3) | Dovecot (master, imap-login, auth, imap per session, …) + imaplib writer and 2 readers | a mail store (C, IMAP) |
| `zmq-pipeline` | tuning (validation in runs 1–3) | pyzmq ventilator → 2 workers (each asking a lookup service over REQ → ROUTER) → sink | a ZeroMQ task pipeline (CPython on libzmq, C++) |
| `xmpp-chat` | tuning (validation in runs 1–3) | prosody + an external component and 2 clients on slixmpp | an XMPP server with a component (Lua, CPython asyncio) |
| `squid-cache` | tuning (validation in runs 1–3) | squid → an http.server origin + 2 http.client clients | a caching HTTP proxy (C++) |
| `varnish-cache` | tuning (validation in run 4) | varnishd (manager + cache child) → 2 http.server origins (round robin) + 2 http.client clients | a caching HTTP accelerator (C) |
| `pdns-knot` | tuning (validation in run 4) | PowerDNS Recursor → Knot DNS authoritative + dnspython clients over UDP and TCP | a forwarding DNS resolver chain (C++, C) |
| `radius-proxy` | tuning (validation in run 4) | FreeRADIUS proxy → 2 FreeRADIUS home servers (load-balanced) + 2 Python RADIUS clients | an AAA proxy over UDP (C) |
| `node-chain` | tuning (validation in run 4) | Node.js front → Node.js backend (keep-alive pool) + 2 http.client clients | HTTP services (Node.js: V8, libuv) |
| `ws-gateway` | tuning (validation in run 4) | websockets gateway → websockets store + writer and reader clients | WebSocket services (CPython asyncio) |
| `activemq-stomp` | tuning (validation in run 4) | ActiveMQ broker + stomp.py producer and 2 workers | a message broker (JVM, STOMP) |
| `stunnel-tls` | tuning (validation in run 5) | stunnel gateway (plain → TLS) → stunnel terminator (TLS → plain) → socketserver store + a client through the gateway and a TLS client | TLS offload (C on OpenSSL, a thread per connection) |
| `kamailio-sip` | tuning (validation in run 5) | Kamailio proxy (a UDP receiver per socket, timers) → 2 Python SIP UAS (round-robin, failover) + 2 Python SIP UAC | a stateful SIP proxy over UDP (C) |
| `ruby-chain` | tuning (validation in run 5) | Ruby WEBrick front → Ruby WEBrick key-value backend (Net::HTTP keep-alive pool) + 2 http.client clients | HTTP services (Ruby MRI, threads) |
| `perl-starman` | tuning (validation in run 5) | Starman (master + 3 preforked workers) running a PSGI app → memcached (Cache::Memcached::Fast) + 2 http.client clients | a preforking Perl web server and a cache (Perl, C) |
| `postfix-relay` | tuning (validation in run 6) | Postfix (master, an smtpd per listener, cleanup, trivial-rewrite, qmgr, one smtp agent, scache, postlogd) → aiosmtpd sink + 2 smtplib clients | a mail relay and its next hop (C, SMTP; CPython asyncio) |
| `gevent-chain` | tuning (validation in run 6) | gevent WSGI front → gevent StreamServer key-value backend (binary frames, keep-alive pool) + 2 http.client clients | services on greenlets (CPython, gevent on libev) |
| `apache-balancer` | tuning (validation in run 6) | Apache httpd (event MPM: parent + 2 children) with mod_proxy_balancer → 2 lighttpd WebDAV members sharing one store + 2 http.client clients | a load-balancing reverse proxy (C on APR, C) |
| `twisted-amp` | tuning (validation in run 6) | Twisted AMP front → Twisted AMP key-value backend over one persistent connection + 2 Twisted AMP clients | an RPC service chain on the Twisted reactor (CPython, not asyncio) |
| `ssh-tunnel` | tuning (validation in run 7) | sshd (listener, a re-executed monitor per connection, a sandboxed pre-auth child) ← `ssh -N -L` client (started again when it exits) → memcached + 2 clients through the tunnel | OpenSSH port forwarding: channels multiplexed on one encrypted connection (C) |
| `tomcat-chain` | tuning (validation in run 7) | Tomcat 10 with a servlet → 2 Python stores (sharded, JDK HTTP client) + 2 http.client clients | a servlet container and its backends (JVM; CPython threads) |
| `uwsgi-tornado` | tuning (validation in run 7) | uWSGI (master, HTTP router, 3 preforked workers on 2 mapped sockets) → Tornado store + 2 http.client clients | a preforking application server with respawn and harakiri (C, embedded CPython; Tornado IOLoop) |
| `ejabberd-chat` | tuning (validation in run 7) | ejabberd (BEAM, no distribution) + slixmpp clients: alice → bob and carol (echoes) | an XMPP server on the Erlang VM (Erlang; CPython asyncio) |
| `cherrypy-rpyc` | tuning (validation in run 8) | CherryPy front (cheroot worker threads) → RPyC ThreadedServer store (pooled connections) + 2 http.client clients | a web front on an RPC store (CPython threads) |
| `puma-memcache` | tuning (validation in run 8) | Puma (cluster mode: master + 1 worker of 4 threads) running a Rack app → 2 memcached shards + 2 http.client clients | a preforking Ruby application server and a sharded cache (Ruby MRI, C) |
| `icecast-relay` | tuning (validation in run 8) | Python source → Icecast master → Icecast relay (pulls the mount) + 2 Python listeners checking every frame | a streaming server and its relay (C) |
| `coturn-relay` | tuning (validation in run 8) | 2 Python TURN clients → coturn (UDP, ChannelData) → Python UDP peer (answers with a digest) | a TURN relay (C on libevent, UDP) |
| `dnsmasq-chain` | tuning (validation in run 8) | dnsmasq forwarder (cache off; a child per TCP connection) → dnsmasq holding the zone + dnspython clients over UDP and TCP | a DNS forwarding chain (C) |
| `quart-hypercorn` | tuning (validation in run 8) | Quart front on Hypercorn → asyncio key-value store (length-framed JSON, pooled connections) + 2 http.client clients | an ASGI service chain (CPython asyncio) |
| `tinyproxy-chain` | tuning (validation in run 9) | tinyproxy front → tinyproxy back (`Upstream`) → http.server origin + 2 http.client clients (one through both proxies, one through the back only) | a chain of forward HTTP proxies (C, a thread per connection) |
| `h2o-proxy` | tuning (validation in run 9) | h2o (`-m master`: Perl start_server + an h2o server of 2 threads) → http.server origin + an HTTP/1.1 client and an HTTP/2 client (`h2`, 2 streams at a time) | an HTTP/1.1 and HTTP/2 reverse proxy (C on libh2o) |
| `krb5-kdc` | tuning (validation in run 9) | MIT krb5kdc (UDP and TCP) + kadmind sharing a realm's database + clients running kinit/kvno -k over UDP, over TCP, and kadmin cpw then kinit | a Kerberos KDC and its admin server (C) |
| `gunicorn-falcon` | tuning (validation in run 9) | gunicorn (master + 1 sync worker, respawned) running a Falcon app → XML-RPC store (`xmlrpc.server`, a thread per request) + 2 http.client clients | a preforking WSGI server and an RPC store (CPython, no event loop) |
| `asyncssh-starlette` | tuning (validation in run 9) | asyncssh gateway (a command per SSH session) → Starlette store on uvicorn (httpx keep-alive pool) + 2 asyncssh clients | an SSH command gateway and an ASGI store (CPython asyncio; OpenSSL through cryptography) |
| `mojo-prefork` | tuning (validation in run 9) | Mojolicious prefork server (manager + 1 worker, respawned) → Mojolicious daemon store (Mojo::UserAgent keep-alive pool) + 2 http.client clients | a preforking Perl web framework and its backend (Perl, Mojo::IOLoop) |
| `vsftpd-ftp` | tuning (validation in run 10) | 3 vsftpd servers sharing one file tree (a listener, a privileged session process and its protocol child per client) + 3 ftplib clients: a passive writer on A, an active-mode writer on B, a reader on C of what A and B stored | FTP control and data connections with privilege separation (C) |
| `bind-chain` | tuning (validation in run 10) | BIND 9 named resolver (forward-only zone) → BIND 9 named authoritative (dynamic updates, journal) + dnspython clients: UDP queries, TCP queries, and an updater reading its changes back through the resolver | a DNS resolver chain with dynamic updates (C, worker threads on libuv) |
| `syslog-ng-relay` | tuning (validation in run 10) | syslog-ng relay (TCP and UDP inputs) → syslog-ng central (RFC 5424 framing over TCP) writing a file + a TCP sender, a UDP sender (`SysLogHandler`) and a tailer checking each message's length and CRC | log shipping (C on ivykis, worker threads) |
| `aioftp-transfer` | tuning (validation in run 10) | aioftp FTP server + aioftp uploader (STOR, RNFR/RNTO, RETR) and reader (MLSD, RETR), every file checked | an FTP server with passive data connections (CPython asyncio) |
| `h2-pgwire` | tuning (validation in run 10) | H2 database server on the PostgreSQL wire protocol + psycopg2 writer, follower and scanner (a new connection each round) | an SQL database in Java and its libpq clients (JVM; C libpq, CPython) |
| `yaws-dav` | tuning (validation in run 10) | Yaws (WebDAV document root, `revproxy` to a Python store: http.server, a thread per connection) + WebDAV uploader and a key-value client through the proxy | a web server and reverse proxy on the Erlang VM (Erlang/BEAM; CPython threads) |
| `nghttpx-proxy` | tuning (validation in run 10) | nghttpx (master + worker) routing by path → 2 http.server stores (pooled HTTP/1.1) + an HTTP/1.1 client and an HTTP/2 client (httpx, prior knowledge) | an HTTP/2 and HTTP/1.1 reverse proxy (C++ on libev; CPython threads) |
| `sanic-waitress` | tuning (validation in run 10) | Sanic (manager + 1 spawned worker on uvloop) → Bottle store on waitress (an I/O thread + 4 worker threads) via an httpx keep-alive pool + 2 http.client clients | an async web framework and a threaded WSGI server (CPython: uvloop/libuv, threads) |
| `em-relay` | tuning (validation in run 10) | Ruby EventMachine front (pipelines every client request on one connection, 1 s timers) → Ruby EventMachine key-value store + 2 Python line-protocol clients | an event-driven relay on a C++ reactor (Ruby MRI on EventMachine) |
| `php-builtin` | tuning (validation in run 10) | `php -S` front → `php -S` file-backed store (a new connection per call) + 2 http.client clients | PHP's built-in web server, one request at a time (C, Zend) |
| `aiosmtpd-relay` | tuning (validation in run 10) | aiosmtpd relay (smtplib session to the next hop in an executor thread) → aiosmtpd sink + 2 smtplib clients | an SMTP relay and its next hop (CPython asyncio) |
| `snmpd-proxy` | tuning (validation in run 10) | snmpd front (`proxy` of a subtree) → snmpd back + 2 drivers running snmpset/snmpget | an SNMP proxy agent over UDP (C) |
| `fpm-memcache` | tuning (validation in run 11) | nginx (two sites, one keep-alive FastCGI connection each) → PHP-FPM (master + static pool of 3 workers) → memcached via php-memcached + 2 http.client clients | a PHP application server and its cache (C, PHP/Zend, libmemcached) |
| `unicorn-store` | tuning (validation in run 11) | unicorn (master + 2 forked workers, each with a port of its own, replaced when they die or hang) running a Rack app → Ruby TCPServer key-value store (a thread per connection) + 2 http.client clients | a preforking Ruby server and its backend (Ruby MRI) |
| `trio-chain` | tuning (validation in run 11) | trio front (pool of 2 persistent connections, move_on_after timeouts) → trio store, length-prefixed frames + 2 trio clients | structured-concurrency services (CPython trio, no asyncio) |
| `trafficserver-cache` | tuning (validation in run 11) | Apache Traffic Server (one process, event threads) remapping to 2 http.server origins, caching + 2 http.client clients | a caching reverse proxy (C++) |
| `distcc-farm` | tuning (validation in run 11) | 2 distccd daemons (preforked compile child each) + 2 drivers running `distcc gcc -c` over both | a distributed compile farm (C) |
| `rsyncd-mirror` | tuning (validation in run 11) | rsync daemon A → mirror (pull A, push B) → rsync daemon B, a writer and a reader running the rsync client | file replication through daemons that fork per connection (C) |
| `jetty-chain` | tuning (validation in run 12) | Jetty 9 (its own connector and thread pool) with a servlet → Python ThreadingHTTPServer store (JDK HTTP client, 1 s timeout) + 2 http.client clients | a servlet container and its backend (JVM; CPython threads) |
| `znc-inspircd` | tuning (validation in run 12) | ZNC bouncer (two users, each with a connection to the server) → InspIRCd + 3 Python IRC clients (two through ZNC, one straight), checksummed channel messages | an IRC bouncer and its server (C++) |
| `exim-relay` | tuning (validation in run 12) | Exim relay (a process forked per connection and per message) → Exim sink delivering to a maildir + 2 smtplib senders and a maildir reader checking each body's digest | a mail relay and its next hop (C) |
| `kea-dhcp` | tuning (validation in run 13) | ISC Kea kea-dhcp4 (relayed DHCPv4 on loopback UDP, memfile leases, lease_cmds hook) ← kea-ctrl-agent (HTTP → kea-dhcp4's UNIX control socket) + 2 Python DHCP relays (DISCOVER/OFFER/REQUEST/ACK, RELEASE) and a control client (lease4-add/get/del, statistic-get) | a DHCP server and its control agent (C++ on Boost.Asio) |
| `spamd-prefork` | tuning (validation in run 13) | SpamAssassin spamd (a parent and its preforked child, replaced after 110 connections, talking over a socketpair; private rules) + a driver running spamc per message and a Python SPAMD-protocol client | a preforking Perl content filter and its C client |
| `aiocoap-proxy` | tuning (validation in run 13) | aiocoap reverse proxy (`aiocoap.cli.proxy`) → aiocoap key-value store (block-wise transfer) + 2 aiocoap clients, one through the proxy, one straight | CoAP over UDP (CPython asyncio) |
| `git-daemon-mirror` | tuning (validation in run 13) | git daemon A → mirror (fetch A, push B) → git daemon B (a child per connection running upload-pack/receive-pack), a writer and a reader running the git client | git replication over the git:// protocol through daemons that fork per connection (C) |
| `hsqldb-front` | tuning (validation in run 13) | Java HTTP front (com.sun.net.httpserver, a JDBC pool, 1 s per call) → HSQLDB server (private database files) + 2 http.client clients | a web front on an SQL database server, two JVMs (JVM; CPython) |
| `paramiko-sftp` | tuning (validation in run 13) | paramiko SFTP server (a Transport thread per connection) → socketserver file store (a connection per SFTP session) + 2 paramiko SFTP clients | an SSH file-transfer server on a storage service (CPython threads) |
| `beanstalkd-workers` | tuning (validation in run 14) | beanstalkd (binlog in the scratch directory) + 2 greenstalk worker processes (reserve from `work`, SHA-1 chain, result into the producer's `done` tube) + 2 greenstalk producers (put a job, wait for its result, check it) | a work queue with results travelling back through it (C server, Python clients) |
| `thrift-chain` | tuning (validation in run 14) | Thrift front (TThreadedServer, keeps nothing) → Thrift store (TThreadPoolServer) over a pool of 2 connections + 2 Thrift clients | an RPC service chain on Apache Thrift, binary protocol (CPython threads) |
| `modbus-gateway` | tuning (validation in run 14) | pymodbus gateway server (its datastore forwards every access over an asyncio client) → pymodbus device server + 2 synchronous pymodbus clients | a Modbus/TCP gateway and its device (CPython asyncio) |
| `xrootd-cluster` | tuning (validation in run 14) | XRootD manager (xrootd redirector + cmsd) → 2 data servers (xrootd + cmsd each, an export directory each) + 2 Python drivers running xrdcp and xrdfs (a process per command) | a clustered data-access service with redirection (C++) |
| `netty-chain` | tuning (validation in run 14) | Netty HTTP front → Netty key-value backend (length-prefixed frames, a pool of 3 connections, 1 s per call) + 2 http.client clients | services on NIO event loops, two JVMs (JVM; CPython) |
| `drb-chain` | tuning (validation in run 14) | DRb front service → DRb store service (a thread per connection each, 1 s per store call) + 2 Ruby DRb clients | Ruby distributed objects, a forwarding chain (Ruby MRI, threads) |
| `rmi-chain` | tuning (validation in run 15) | rmiregistry + Java RMI front object → Java RMI store object in another JVM (JRMP, a thread per connection, 1 s per store call) + 2 Java RMI clients | remote method invocation through a registry (JVM, threads) |
| `poe-chain` | tuning (validation in run 15) | POE front server (Server::TCP; one Client::TCP connection to the store, calls matched by id, 1 s per call) → POE store server + 2 Python clients | Perl event loops, a forwarding chain (Perl POE; CPython) |
| `copas-chain` | tuning (validation in run 15) | Copas front server (a coroutine per connection, a store connection each) → Copas store server + 2 Python clients | Lua coroutines on one select loop, a forwarding chain (Lua 5.1; CPython) |
| `opensmtpd-relay` | tuning (validation in run 15) | OpenSMTPD relay (parent + ca, control, lka, queue, scheduler, pony) → OpenSMTPD sink (the same, + a mail.maildir agent per delivery), each in a mount namespace + 2 smtplib clients and a checker of the delivered maildir | a privilege-separated mail relay and its next hop (C on libevent, imsg between processes) |
| `xmlrpc-chain` | tuning (validation in run 15) | XML-RPC front (ThreadingMixIn, keeps nothing, a pool of 2 ServerProxy) → XML-RPC store + 2 xmlrpc.client clients (base64 values) | an RPC service chain on the standard library, a connection per call (CPython threads) |
| `node-h2-chain` | tuning (validation in run 15) | Node.js HTTP/2 front (one h2c session to the backend) → Node.js HTTP/2 key-value backend + 2 httpx HTTP/2 clients | HTTP/2 services, streams multiplexed on one session (Node.js: V8, libuv) |
"""

import argparse
import importlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sut.common import ports  # noqa: E402,F401  (run.py reads ports through this module)

# system -> (module of sut/, function); helpers are processes a system starts itself.
SYSTEMS = {
    "memcache-proxy": ("memcache_proxy", "memcache_proxy"),
    "http-proxy": ("http_proxy", "http_proxy"),
    "job-queue": ("job_queue", "job_queue"),
    "pyro-rpc": ("pyro_rpc", "pyro_rpc"),
    "mqtt-bridge": ("mqtt_bridge", "run"),
    "irc-network": ("irc_network", "run"),
    "dns-chain": ("dns_chain", "run"),
    "gearman-jobs": ("gearman_jobs", "run"),
    "aiohttp-chain": ("aiohttp_chain", "run"),
    "zookeeper-ensemble": ("zookeeper_ensemble", "run"),
    "rabbitmq-queue": ("rabbitmq_queue", "run"),
    "grpc-chain": ("grpc_chain", "run"),
    "ldap-syncrepl": ("ldap_syncrepl", "run"),
    "tarantool-replicas": ("tarantool_replicas", "run"),
    "php-fastcgi": ("php_fastcgi", "run"),
    "mariadb-replication": ("mariadb_replication", "run"),
    "rsyslog-relay": ("rsyslog_relay", "run"),
    "imap-mailstore": ("imap_mailstore", "run"),
    "zmq-pipeline": ("zmq_pipeline", "run"),
    "xmpp-chat": ("xmpp_chat", "run"),
    "squid-cache": ("squid_cache", "run"),
    "varnish-cache": ("varnish_cache", "run"),
    "pdns-knot": ("pdns_knot", "run"),
    "radius-proxy": ("radius_proxy", "run"),
    "node-chain": ("node_chain", "run"),
    "ws-gateway": ("ws_gateway", "run"),
    "activemq-stomp": ("activemq_stomp", "run"),
    "stunnel-tls": ("stunnel_tls", "run"),
    "kamailio-sip": ("kamailio_sip", "run"),
    "ruby-chain": ("ruby_chain", "run"),
    "perl-starman": ("perl_starman", "run"),
    "postfix-relay": ("postfix_relay", "run"),
    "gevent-chain": ("gevent_chain", "run"),
    "apache-balancer": ("apache_balancer", "run"),
    "twisted-amp": ("twisted_amp", "run"),
    "ssh-tunnel": ("ssh_tunnel", "run"),
    "tomcat-chain": ("tomcat_chain", "run"),
    "uwsgi-tornado": ("uwsgi_tornado", "run"),
    "ejabberd-chat": ("ejabberd_chat", "run"),
    "cherrypy-rpyc": ("cherrypy_rpyc", "run"),
    "puma-memcache": ("puma_memcache", "run"),
    "icecast-relay": ("icecast_relay", "run"),
    "coturn-relay": ("coturn_relay", "run"),
    "dnsmasq-chain": ("dnsmasq_chain", "run"),
    "quart-hypercorn": ("quart_hypercorn", "run"),
    "tinyproxy-chain": ("tinyproxy_chain", "run"),
    "h2o-proxy": ("h2o_proxy", "run"),
    "krb5-kdc": ("krb5_kdc", "run"),
    "gunicorn-falcon": ("gunicorn_falcon", "run"),
    "asyncssh-starlette": ("asyncssh_starlette", "run"),
    "mojo-prefork": ("mojo_prefork", "run"),
    "vsftpd-ftp": ("vsftpd_ftp", "run"),
    "bind-chain": ("bind_chain", "run"),
    "syslog-ng-relay": ("syslog_ng_relay", "run"),
    "aioftp-transfer": ("aioftp_transfer", "run"),
    "h2-pgwire": ("h2_pgwire", "run"),
    "yaws-dav": ("yaws_dav", "run"),
    "nghttpx-proxy": ("nghttpx_proxy", "run"),
    "sanic-waitress": ("sanic_waitress", "run"),
    "em-relay": ("em_relay", "run"),
    "php-builtin": ("php_builtin", "run"),
    "aiosmtpd-relay": ("aiosmtpd_relay", "run"),
    "snmpd-proxy": ("snmpd_proxy", "run"),
    "fpm-memcache": ("fpm_memcache", "run"),
    "unicorn-store": ("unicorn_store", "run"),
    "trio-chain": ("trio_chain", "run"),
    "trafficserver-cache": ("trafficserver_cache", "run"),
    "distcc-farm": ("distcc_farm", "run"),
    "rsyncd-mirror": ("rsyncd_mirror", "run"),
    "jetty-chain": ("jetty_chain", "run"),
    "znc-inspircd": ("znc_inspircd", "run"),
    "exim-relay": ("exim_relay", "run"),
    "kea-dhcp": ("kea_dhcp", "run"),
    "spamd-prefork": ("spamd_prefork", "run"),
    "aiocoap-proxy": ("aiocoap_proxy", "run"),
    "git-daemon-mirror": ("git_daemon_mirror", "run"),
    "hsqldb-front": ("hsqldb_front", "run"),
    "paramiko-sftp": ("paramiko_sftp", "run"),
    "beanstalkd-workers": ("beanstalkd_workers", "run"),
    "thrift-chain": ("thrift_chain", "run"),
    "modbus-gateway": ("modbus_gateway", "run"),
    "xrootd-cluster": ("xrootd_cluster", "run"),
    "netty-chain": ("netty_chain", "run"),
    "drb-chain": ("drb_chain", "run"),
    "rmi-chain": ("rmi_chain", "run"),
    "poe-chain": ("poe_chain", "run"),
    "copas-chain": ("copas_chain", "run"),
    "opensmtpd-relay": ("opensmtpd_relay", "run"),
    "xmlrpc-chain": ("xmlrpc_chain", "run"),
    "node-h2-chain": ("node_h2_chain", "run"),
}
HELPERS = {
    "job-queue-worker": ("job_queue", "beanstalk_worker"),
    "pyro-server": ("pyro_rpc", "pyro_server_main"),
    "mqtt-subscriber": ("mqtt_bridge", "subscriber"),
    "irc-client": ("irc_network", "client"),
    "dns-client": ("dns_chain", "client"),
    "aiohttp-service": ("aiohttp_chain", "service"),
    "zk-client": ("zookeeper_ensemble", "client"),
    "rabbit-consumer": ("rabbitmq_queue", "consumer"),
    "grpc-service": ("grpc_chain", "service"),
    "grpc-lister": ("grpc_chain", "lister"),
    "ldap-reader": ("ldap_syncrepl", "reader"),
    "tt-reader": ("tarantool_replicas", "reader"),
    "php-client": ("php_fastcgi", "client"),
    "mdb-reader": ("mariadb_replication", "reader"),
    "syslog-sender": ("rsyslog_relay", "sender"),
    "syslog-tailer": ("rsyslog_relay", "tailer"),
    "imap-reader": ("imap_mailstore", "reader"),
    "zmq-worker": ("zmq_pipeline", "worker"),
    "zmq-sink": ("zmq_pipeline", "sink"),
    "zmq-lookup": ("zmq_pipeline", "lookup"),
    "xmpp-calc": ("xmpp_chat", "calc"),
    "xmpp-peer": ("xmpp_chat", "peer"),
    "squid-origin": ("squid_cache", "origin"),
    "squid-client": ("squid_cache", "client"),
    "varnish-origin": ("varnish_cache", "origin"),
    "varnish-client": ("varnish_cache", "client"),
    "pdns-client": ("pdns_knot", "client"),
    "radius-client": ("radius_proxy", "client"),
    "node-client": ("node_chain", "client"),
    "ws-service": ("ws_gateway", "service"),
    "ws-client": ("ws_gateway", "client"),
    "amq-worker": ("activemq_stomp", "worker"),
    "tls-store": ("stunnel_tls", "store"),
    "tls-client": ("stunnel_tls", "client"),
    "sip-uas": ("kamailio_sip", "uas"),
    "sip-uac": ("kamailio_sip", "uac"),
    "ruby-client": ("ruby_chain", "client"),
    "starman-client": ("perl_starman", "client"),
    "smtp-sink": ("postfix_relay", "sink"),
    "postfix-client": ("postfix_relay", "client"),
    "gevent-service": ("gevent_chain", "service"),
    "gevent-client": ("gevent_chain", "client"),
    "balancer-client": ("apache_balancer", "client"),
    "amp-service": ("twisted_amp", "service"),
    "amp-client": ("twisted_amp", "client"),
    "tunnel-client": ("ssh_tunnel", "client"),
    "tomcat-store": ("tomcat_chain", "store"),
    "tomcat-client": ("tomcat_chain", "client"),
    "tornado-store": ("uwsgi_tornado", "store"),
    "uwsgi-client": ("uwsgi_tornado", "client"),
    "ejabberd-peer": ("ejabberd_chat", "peer"),
    "rpyc-store": ("cherrypy_rpyc", "store"),
    "cherrypy-front": ("cherrypy_rpyc", "front"),
    "cherrypy-client": ("cherrypy_rpyc", "client"),
    "puma-client": ("puma_memcache", "client"),
    "ice-listener": ("icecast_relay", "listener"),
    "turn-client": ("coturn_relay", "client"),
    "turn-peer": ("coturn_relay", "peer"),
    "dnsmasq-client": ("dnsmasq_chain", "client"),
    "quart-store": ("quart_hypercorn", "store"),
    "quart-front": ("quart_hypercorn", "front"),
    "quart-client": ("quart_hypercorn", "client"),
    "tinyproxy-origin": ("tinyproxy_chain", "origin"),
    "tinyproxy-client": ("tinyproxy_chain", "client"),
    "h2o-origin": ("h2o_proxy", "origin"),
    "h2o-client": ("h2o_proxy", "client"),
    "krb5-client": ("krb5_kdc", "client"),
    "xmlrpc-store": ("gunicorn_falcon", "store"),
    "gunicorn-client": ("gunicorn_falcon", "client"),
    "starlette-store": ("asyncssh_starlette", "store"),
    "asyncssh-gateway": ("asyncssh_starlette", "gateway"),
    "ssh-kv-client": ("asyncssh_starlette", "client"),
    "mojo-client": ("mojo_prefork", "client"),
    "ftp-client": ("vsftpd_ftp", "client"),
    "bind-client": ("bind_chain", "client"),
    "ng-sender": ("syslog_ng_relay", "sender"),
    "ng-tailer": ("syslog_ng_relay", "tailer"),
    "ftp-server": ("aioftp_transfer", "server"),
    "ftp-reader": ("aioftp_transfer", "reader"),
    "h2-reader": ("h2_pgwire", "reader"),
    "yaws-store": ("yaws_dav", "store"),
    "yaws-client": ("yaws_dav", "client"),
    "ng-store": ("nghttpx_proxy", "store"),
    "ng-client": ("nghttpx_proxy", "client"),
    "sw-store": ("sanic_waitress", "store"),
    "sw-client": ("sanic_waitress", "client"),
    "em-client": ("em_relay", "client"),
    "phpb-client": ("php_builtin", "client"),
    "smtprelay-sink": ("aiosmtpd_relay", "sink"),
    "smtprelay-relay": ("aiosmtpd_relay", "relay"),
    "smtprelay-client": ("aiosmtpd_relay", "client"),
    "snmp-client": ("snmpd_proxy", "client"),
    "fpm-client": ("fpm_memcache", "client"),
    "unicorn-client": ("unicorn_store", "client"),
    "trio-store": ("trio_chain", "store"),
    "trio-front": ("trio_chain", "front"),
    "trio-client": ("trio_chain", "client"),
    "ats-origin": ("trafficserver_cache", "origin"),
    "ats-client": ("trafficserver_cache", "client"),
    "distcc-client": ("distcc_farm", "client"),
    "rsync-mirror": ("rsyncd_mirror", "mirror"),
    "rsync-reader": ("rsyncd_mirror", "reader"),
    "jetty-store": ("jetty_chain", "store"),
    "jetty-client": ("jetty_chain", "client"),
    "exim-sender": ("exim_relay", "sender"),
    "exim-reader": ("exim_relay", "reader"),
    "irc-bnc-client": ("znc_inspircd", "client"),
    "kea-relay": ("kea_dhcp", "relay"),
    "kea-control": ("kea_dhcp", "control"),
    "spamc-driver": ("spamd_prefork", "spamc_driver"),
    "spamd-client": ("spamd_prefork", "client"),
    "coap-store": ("aiocoap_proxy", "store"),
    "coap-proxy": ("aiocoap_proxy", "proxy"),
    "coap-client": ("aiocoap_proxy", "client"),
    "git-mirror": ("git_daemon_mirror", "mirror"),
    "git-reader": ("git_daemon_mirror", "reader"),
    "hsqldb-client": ("hsqldb_front", "client"),
    "sftp-store": ("paramiko_sftp", "store"),
    "sftp-server": ("paramiko_sftp", "server"),
    "sftp-client": ("paramiko_sftp", "client"),
    "bs-worker": ("beanstalkd_workers", "worker"),
    "bs-producer": ("beanstalkd_workers", "producer"),
    "thrift-store": ("thrift_chain", "store"),
    "thrift-front": ("thrift_chain", "front"),
    "thrift-client": ("thrift_chain", "client"),
    "modbus-device": ("modbus_gateway", "device"),
    "modbus-gw": ("modbus_gateway", "gateway"),
    "modbus-client": ("modbus_gateway", "client"),
    "xrootd-driver": ("xrootd_cluster", "driver"),
    "netty-client": ("netty_chain", "client"),
    "poe-client": ("poe_chain", "client"),
    "copas-client": ("copas_chain", "client"),
    "smtpd-client": ("opensmtpd_relay", "client"),
    "xmlrpc-store": ("xmlrpc_chain", "store"),
    "xmlrpc-front": ("xmlrpc_chain", "front"),
    "xmlrpc-client": ("xmlrpc_chain", "client"),
    "h2-client": ("node_h2_chain", "client"),
}


def function(table, name):
    mod, fn = table[name]
    return getattr(importlib.import_module("sut." + mod), fn)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("system", choices=sorted(SYSTEMS) + sorted(HELPERS))
    ap.add_argument("--dir", help="scratch directory for configuration files and logs")
    ap.add_argument("--requests", type=int, default=120)
    ap.add_argument("--name", default="1")
    a = ap.parse_args()
    if a.system in HELPERS:
        return function(HELPERS, a.system)(a.name)
    os.makedirs(a.dir, exist_ok=True)
    function(SYSTEMS, a.system)(os.path.abspath(a.dir), a.requests)


if __name__ == "__main__":
    main()
