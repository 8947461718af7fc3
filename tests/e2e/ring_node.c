/* A C version of the MPD-like ring of tests/ring/ (ring_node.py + run_ring.py), for
 * Culprit's end-to-end tests: the same protocol, the same event loop and the same bug.
 *
 *   ring_node launch --nodes N [--jobs K] [--window W] [--loop select|poll] [--timeout S]
 *   ring_node node --id I --nodes N --base-port P [--jobs K] [--window W] [--loop L]
 *             [--max-seconds S]
 *
 * `launch` picks N consecutive free ports on 127.0.0.1, starts N daemons (posix_spawn of
 * this same program with `node --id I ...`, so every daemon's argv names its id), waits for
 * them and exits 0 when the jobs went round, 3 when the ring hung (the global timeout
 * passed; every daemon is then killed), 1 when a daemon failed.
 *
 * Node I listens on P+I, connects to its right-hand side (rhs) I+1 mod N and accepts its
 * left-hand side (lhs). Messages are a text body framed by an 8-byte decimal length header:
 * "H <from>" (hello), "J <id> <origin> <hops> <sum> <payload>" (job), "S" (shutdown).
 * Node 0 injects K jobs (at most W in flight) and sends a shutdown round the ring when they
 * have all come back.
 *
 * The MPD bug: recv_dict_msg reads the header with ONE recv(8) (read(2) when compiled with
 * -DHEADER_READ) and treats a short result as a lost connection: the node closes its lhs
 * connection, the job in flight is lost, and the ring hangs. Nothing in this program
 * triggers it: the fault must come from outside (culprit record --inject).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HEADER 8
#define MAXMSG 4096
#define MAXPENDING 8

struct msg {
    char cmd; /* 'H', 'J', 'S' */
    int id, origin, hops, from;
    long sum;
    char payload[512];
};

struct node {
    int id, n, base, jobs_total, window, use_poll;
    double deadline;
    int listener, lhs, rhs;
    int pending[MAXPENDING];
    int npending;
    int next_job, in_flight, completed, done, shutting_down;
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void logmsg(struct node *nd, const char *what)
{
    fprintf(stderr, "ring node %d: %s\n", nd->id, what);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- messages ------------------------------------------------------------------------ */

static int send_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t k = send(fd, buf, len, MSG_NOSIGNAL);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        buf += k;
        len -= (size_t)k;
    }
    return 0;
}

static int send_dict_msg(int fd, const struct msg *m)
{
    char body[MAXMSG], out[MAXMSG + HEADER + 1];
    int blen;
    switch (m->cmd) {
    case 'H':
        blen = snprintf(body, sizeof body, "H %d", m->from);
        break;
    case 'J':
        blen = snprintf(body, sizeof body, "J %d %d %d %ld %s", m->id, m->origin, m->hops,
                        m->sum, m->payload);
        break;
    default:
        blen = snprintf(body, sizeof body, "S");
        break;
    }
    int total = snprintf(out, sizeof out, "%08d%s", blen, body);
    return send_all(fd, out, (size_t)total);
}

/* Receives exactly n bytes; -1 if the connection ends or fails first. */
static int recv_exact(int fd, char *buf, int n)
{
    while (n > 0) {
        ssize_t k = recv(fd, buf, (size_t)n, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        buf += k;
        n -= (int)k;
    }
    return 0;
}

static int parse_msg(const char *body, struct msg *m)
{
    memset(m, 0, sizeof *m);
    m->cmd = body[0];
    switch (m->cmd) {
    case 'H':
        return sscanf(body, "H %d", &m->from) == 1 ? 0 : -1;
    case 'J':
        return sscanf(body, "J %d %d %d %ld %511s", &m->id, &m->origin, &m->hops, &m->sum,
                      m->payload) == 5
                   ? 0
                   : -1;
    case 'S':
        return 0;
    }
    return -1;
}

/* Receives one message; -1 if the connection is lost. MPD's bug: one recv for the whole
 * header, a short result is taken for a lost connection. */
static int recv_dict_msg(int fd, struct msg *m)
{
    char hdr[HEADER + 1], body[MAXMSG + 1];
#ifdef HEADER_READ
    ssize_t k = read(fd, hdr, HEADER);
#else
    ssize_t k = recv(fd, hdr, HEADER, 0);
#endif
    if (k != HEADER)
        return -1;
    hdr[HEADER] = 0;
    int len = atoi(hdr);
    if (len <= 0 || len > MAXMSG)
        return -1;
    if (recv_exact(fd, body, len) < 0)
        return -1;
    body[len] = 0;
    return parse_msg(body, m);
}

/* ---- initialization ------------------------------------------------------------------ */

static void set_nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static struct sockaddr_in loopback(int port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

static void connect_rhs(struct node *nd)
{
    struct sockaddr_in a = loopback(nd->base + (nd->id + 1) % nd->n);
    for (int i = 0; i < 400; i++) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) {
            close(s);
            sleep_ms(25);
            continue;
        }
        set_nodelay(s);
        nd->rhs = s;
        struct msg hello = {.cmd = 'H', .from = nd->id};
        send_dict_msg(s, &hello);
        return;
    }
    fprintf(stderr, "ring node %d: cannot connect to its rhs\n", nd->id);
    exit(1);
}

static void init(struct node *nd)
{
    nd->listener = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(nd->listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = loopback(nd->base + nd->id);
    if (bind(nd->listener, (struct sockaddr *)&a, sizeof a) < 0 || listen(nd->listener, 8) < 0) {
        perror("ring node: bind/listen");
        exit(1);
    }
    connect_rhs(nd);
}

/* ---- jobs ------------------------------------------------------------------------------ */

static void do_job(int node_id, struct msg *m)
{
    m->hops++;
    long s = 0;
    for (const char *p = m->payload; *p; p++)
        s += (unsigned char)*p;
    m->sum = (s + node_id) % 65521;
}

static void forward(struct node *nd, const struct msg *m)
{
    if (nd->rhs < 0) {
        logmsg(nd, "no rhs to forward to");
        return;
    }
    if (send_dict_msg(nd->rhs, m) < 0) {
        logmsg(nd, "send to rhs failed");
        close(nd->rhs);
        nd->rhs = -1;
    }
}

static void start_jobs(struct node *nd)
{
    while (nd->in_flight < nd->window && nd->next_job < nd->jobs_total) {
        struct msg m = {.cmd = 'J', .id = nd->next_job, .origin = 0};
        int len = 16 + 37 * (nd->next_job % 7);
        memset(m.payload, 'x', (size_t)len);
        m.payload[len] = 0;
        nd->next_job++;
        nd->in_flight++;
        do_job(nd->id, &m);
        forward(nd, &m);
    }
    if (nd->in_flight == 0 && nd->next_job >= nd->jobs_total && !nd->shutting_down) {
        nd->shutting_down = 1;
        fprintf(stderr, "ring node %d: all %d jobs completed\n", nd->id, nd->completed);
        struct msg s = {.cmd = 'S'};
        forward(nd, &s);
    }
}

static void job_completed(struct node *nd, const struct msg *m)
{
    if (m->hops != nd->n) {
        fprintf(stderr, "ring node %d: job %d came back after %d hops\n", nd->id, m->id, m->hops);
        return;
    }
    nd->in_flight--;
    nd->completed++;
    start_jobs(nd);
}

/* ---- handlers -------------------------------------------------------------------------- */

static void handle_new_connection(struct node *nd)
{
    int c = accept(nd->listener, NULL, NULL);
    if (c < 0)
        return;
    set_nodelay(c);
    if (nd->npending == MAXPENDING) {
        close(c);
        return;
    }
    nd->pending[nd->npending++] = c;
}

static void handle_pending_input(struct node *nd, int idx)
{
    int c = nd->pending[idx];
    nd->pending[idx] = nd->pending[--nd->npending];
    struct msg m;
    if (recv_dict_msg(c, &m) < 0 || m.cmd != 'H') {
        logmsg(nd, "bad introduction on a new connection: closing it");
        close(c);
        return;
    }
    if (nd->lhs >= 0)
        close(nd->lhs);
    nd->lhs = c;
    if (nd->id == 0)
        start_jobs(nd);
}

static void handle_job(struct node *nd, struct msg *m)
{
    if (m->origin == nd->id && m->hops > 0) {
        job_completed(nd, m);
        return;
    }
    do_job(nd->id, m);
    forward(nd, m);
}

static void handle_shutdown(struct node *nd, struct msg *m)
{
    if (nd->id != 0)
        forward(nd, m);
    nd->done = 1;
}

static void handle_lhs_input(struct node *nd)
{
    struct msg m;
    if (recv_dict_msg(nd->lhs, &m) < 0) {
        logmsg(nd, "lost the lhs connection (short or empty header): closing it");
        close(nd->lhs);
        nd->lhs = -1;
        return;
    }
    if (m.cmd == 'J')
        handle_job(nd, &m);
    else if (m.cmd == 'S')
        handle_shutdown(nd, &m);
}

static void handle_rhs_input(struct node *nd)
{
    char buf[HEADER];
    ssize_t k = recv(nd->rhs, buf, HEADER, 0);
    if (k < 0) {
        char what[128];
        snprintf(what, sizeof what, "rhs connection error: %s", strerror(errno));
        logmsg(nd, what);
    }
    if (k <= 0) {
        if (k == 0 && !nd->shutting_down)
            logmsg(nd, "the rhs closed the ring connection");
        close(nd->rhs);
        nd->rhs = -1;
    }
}

/* ---- event loop ------------------------------------------------------------------------ */

static void dispatch(struct node *nd, int fd)
{
    if (fd == nd->listener) {
        handle_new_connection(nd);
    } else if (fd == nd->lhs) {
        handle_lhs_input(nd);
    } else if (fd == nd->rhs) {
        handle_rhs_input(nd);
    } else {
        for (int i = 0; i < nd->npending; i++)
            if (nd->pending[i] == fd) {
                handle_pending_input(nd, i);
                break;
            }
    }
}

static int readable(struct node *nd, int *fds)
{
    int k = 0;
    fds[k++] = nd->listener;
    for (int i = 0; i < nd->npending; i++)
        fds[k++] = nd->pending[i];
    if (nd->lhs >= 0)
        fds[k++] = nd->lhs;
    if (nd->rhs >= 0)
        fds[k++] = nd->rhs;
    return k;
}

static void run_select(struct node *nd)
{
    while (!nd->done && now() < nd->deadline) {
        int fds[MAXPENDING + 3], k = readable(nd, fds), maxfd = -1, ready[MAXPENDING + 3], nr = 0;
        fd_set rd;
        FD_ZERO(&rd);
        for (int i = 0; i < k; i++) {
            FD_SET(fds[i], &rd);
            if (fds[i] > maxfd)
                maxfd = fds[i];
        }
        struct timeval tv = {1, 0};
        if (select(maxfd + 1, &rd, NULL, NULL, &tv) <= 0)
            continue;
        for (int i = 0; i < k; i++)
            if (FD_ISSET(fds[i], &rd))
                ready[nr++] = fds[i];
        for (int i = 0; i < nr; i++)
            dispatch(nd, ready[i]);
    }
}

static void run_poll(struct node *nd)
{
    while (!nd->done && now() < nd->deadline) {
        int fds[MAXPENDING + 3], k = readable(nd, fds), ready[MAXPENDING + 3], nr = 0;
        struct pollfd p[MAXPENDING + 3];
        for (int i = 0; i < k; i++) {
            p[i].fd = fds[i];
            p[i].events = POLLIN;
            p[i].revents = 0;
        }
        if (poll(p, (nfds_t)k, 1000) <= 0)
            continue;
        for (int i = 0; i < k; i++)
            if (p[i].revents)
                ready[nr++] = p[i].fd;
        for (int i = 0; i < nr; i++)
            dispatch(nd, ready[i]);
    }
}

static void finish(struct node *nd)
{
    if (nd->lhs >= 0)
        close(nd->lhs);
    if (nd->rhs >= 0)
        close(nd->rhs);
    close(nd->listener);
    for (int i = 0; i < nd->npending; i++)
        close(nd->pending[i]);
}

/* ---- command line ---------------------------------------------------------------------- */

struct opts {
    int id, nodes, base, jobs, window, use_poll;
    double timeout, max_seconds;
};

static void parse_opts(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.id = -1, .nodes = 5, .jobs = 10, .window = 2, .timeout = 20,
                       .max_seconds = 120};
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "ring_node: %s needs a value\n", a);
            exit(2);
        }
        if (!strcmp(a, "--id"))
            o->id = atoi(v);
        else if (!strcmp(a, "--nodes"))
            o->nodes = atoi(v);
        else if (!strcmp(a, "--base-port"))
            o->base = atoi(v);
        else if (!strcmp(a, "--jobs"))
            o->jobs = atoi(v);
        else if (!strcmp(a, "--window"))
            o->window = atoi(v);
        else if (!strcmp(a, "--loop"))
            o->use_poll = !strcmp(v, "poll");
        else if (!strcmp(a, "--timeout"))
            o->timeout = atof(v);
        else if (!strcmp(a, "--max-seconds"))
            o->max_seconds = atof(v);
        else {
            fprintf(stderr, "ring_node: unknown option %s\n", a);
            exit(2);
        }
        i++;
    }
}

static int node_main(const struct opts *o)
{
    struct node nd = {.id = o->id, .n = o->nodes, .base = o->base,
                      .jobs_total = o->id == 0 ? o->jobs : 0, .window = o->window,
                      .use_poll = o->use_poll, .deadline = now() + o->max_seconds,
                      .lhs = -1, .rhs = -1};
    init(&nd);
    if (nd.use_poll)
        run_poll(&nd);
    else
        run_select(&nd);
    finish(&nd);
    if (!nd.done) {
        logmsg(&nd, "gave up");
        return 4;
    }
    if (nd.id == 0 && nd.completed != nd.jobs_total)
        return 5;
    return 0;
}

static int port_free(int port)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = loopback(port);
    int ok = bind(s, (struct sockaddr *)&a, sizeof a) == 0;
    close(s);
    return ok;
}

/* A base port P with P..P+n-1 free on 127.0.0.1 right now, taken below the kernel's
 * ephemeral range (at most 16384 ports of it) so that no outgoing connection can be given
 * one of them before the daemons bind them. */
static int free_base_port(int n)
{
    int low = 32768, lo, hi;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d", &low) != 1)
            low = 32768;
        fclose(f);
    }
    if (low >= 1024 + 2048) {
        lo = low - 16384 > 1024 ? low - 16384 : 1024;
        hi = low;
    } else {
        lo = 61000;
        hi = 65535;
    }
    srand((unsigned)getpid() ^ (unsigned)(now() * 1e6));
    for (int tries = 0; tries < 200; tries++) {
        int base = lo + rand() % (hi - n - lo), ok = 1;
        for (int p = base; ok && p < base + n; p++)
            ok = port_free(p);
        if (ok)
            return base;
    }
    fprintf(stderr, "ring_node: no %d consecutive free ports\n", n);
    exit(1);
}

extern char **environ;
static pid_t children[64];
static int nchildren;

static pid_t ring_pgid; /* the daemons' process group */

/* Kills every daemon with ONE killpg: each has SIGKILL pending before any of them dies
 * and closes its sockets, so no daemon lives on to see a neighbour's connection end and
 * react to it (which would add teardown noise to the trace of a hung run). */
static void kill_all(void)
{
    if (ring_pgid > 0)
        killpg(ring_pgid, SIGKILL);
    for (int i = 0; i < nchildren; i++)
        if (children[i] > 0)
            kill(children[i], SIGKILL);
    for (int i = 0; i < nchildren; i++)
        if (children[i] > 0)
            waitpid(children[i], NULL, 0);
}

static void on_signal(int sig)
{
    kill_all();
    _exit(128 + sig);
}

static int launch_main(const char *self, const struct opts *o)
{
    if (o->nodes < 2 || o->nodes > 64) {
        fprintf(stderr, "ring_node: --nodes must be 2..64\n");
        return 2;
    }
    int base = o->base ? o->base : free_base_port(o->nodes);
    printf("run_ring: base port %d\n", base);
    fflush(stdout);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    double start = now();
    for (int i = 0; i < o->nodes; i++) {
        char id[16], n[16], b[16], jobs[16], win[16], maxs[32];
        snprintf(id, sizeof id, "%d", i);
        snprintf(n, sizeof n, "%d", o->nodes);
        snprintf(b, sizeof b, "%d", base);
        snprintf(jobs, sizeof jobs, "%d", o->jobs);
        snprintf(win, sizeof win, "%d", o->window);
        snprintf(maxs, sizeof maxs, "%g", o->timeout + 10);
        /* posix_spawn, not fork + exec: the daemons start as fresh images. */
        char *args[] = {(char *)self, "node", "--id", id, "--nodes", n, "--base-port", b,
                        "--jobs", jobs, "--window", win, "--loop",
                        o->use_poll ? "poll" : "select", "--max-seconds", maxs, NULL};
        pid_t p;
        posix_spawnattr_t attr;
        posix_spawnattr_init(&attr);
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
        posix_spawnattr_setpgroup(&attr, ring_pgid); /* 0: the first daemon leads it */
        int err = posix_spawn(&p, self, NULL, &attr, args, environ);
        posix_spawnattr_destroy(&attr);
        if (err) {
            fprintf(stderr, "run_ring: cannot start node %d: %s\n", i, strerror(err));
            kill_all();
            return 1;
        }
        if (ring_pgid == 0)
            ring_pgid = p;
        children[nchildren++] = p;
    }
    int status[64], left = nchildren, bad = 0;
    for (int i = 0; i < nchildren; i++)
        status[i] = -1;
    while (left > 0 && !bad) {
        for (int i = 0; i < nchildren; i++) {
            int st;
            if (status[i] == -1 && waitpid(children[i], &st, WNOHANG) == children[i]) {
                status[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                children[i] = 0;
                left--;
                if (status[i] != 0)
                    bad = 1;
            }
        }
        if (left > 0 && !bad && now() - start > o->timeout) {
            fprintf(stderr, "run_ring: timeout after %.1f s: the ring hung (%d of %d daemons still running)\n",
                    o->timeout, left, nchildren);
            kill_all();
            return 3;
        }
        sleep_ms(20);
    }
    if (bad) {
        for (int i = 0; i < nchildren; i++)
            if (status[i] > 0)
                fprintf(stderr, "run_ring: node %d: exit %d\n", i, status[i]);
        kill_all();
        return 1;
    }
    printf("run_ring: %d jobs went round a ring of %d nodes (%s loop) in %.2f s\n", o->jobs,
           o->nodes, o->use_poll ? "poll" : "select", now() - start);
    return 0;
}

int main(int argc, char **argv)
{
    struct opts o;
    if (argc < 2 || (strcmp(argv[1], "launch") && strcmp(argv[1], "node"))) {
        fprintf(stderr, "usage: ring_node launch|node [options]\n");
        return 2;
    }
    parse_opts(argc, argv, &o);
    if (!strcmp(argv[1], "node")) {
        if (o.id < 0 || o.id >= o.nodes || o.base <= 0) {
            fprintf(stderr, "ring_node node: --id, --nodes and --base-port are required\n");
            return 2;
        }
        return node_main(&o);
    }
    char self[4096];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    if (k <= 0) {
        perror("ring_node: /proc/self/exe");
        return 1;
    }
    self[k] = 0;
    return launch_main(self, &o);
}
