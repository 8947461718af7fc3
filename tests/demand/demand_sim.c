/* A multi-process system with known service demands, for `culprit demand`'s accuracy
 * test and benchmark (tests/tests/demand_sim.rs, bench/src/bin/demand.rs).
 *
 *   demand_sim run PORT SECONDS SEED SCENARIO
 *
 * starts two single-threaded servers (front: one listening port per service; back: one
 * port) and one client, all on 127.0.0.1, and stops them after SECONDS.
 * Each request is 8 bytes (the service number, the cost in µs); the server spins for a cost
 * drawn from an exponential distribution of the service's mean demand (capped at 5×),
 * measured on CLOCK_MONOTONIC, so each request's busy time is known while the CPU it gets
 * depends on the machine's load. Front's service 0 also calls back (a child request of
 * 1 ms) before it replies: that wait is not front's busy time.
 *
 * With FAULT_AT=S in the environment, back's requests cost 3× from S seconds on.
 *
 * SCENARIO 0: 3 services, demands 1, 2, 4 ms, mix changing freely every 500 ms.
 * SCENARIO 1: 5 services, demands 0.5, 1, 1.5, 2, 3 ms; one intensity factor per 500 ms
 *             slot drives them all (per-slot counts correlate at about 0.9).
 * The client sends the slot's requests spaced evenly across it, one at a time, and prints
 * "slot J n0 n1 ..." per slot and "truth d0 d1 ... back" (seconds) at the start. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXS 8
static const double DEM[2][MAXS] = {{1e-3, 2e-3, 4e-3}, {0.5e-3, 1e-3, 1.5e-3, 2e-3, 3e-3}};
static const int NS[2] = {3, 5};
static const double BACK = 1e-3;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void spin(double s) {
    double end = now() + s;
    while (now() < end) {
    }
}

static int listen_on(int port) {
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s, (void *)&a, sizeof a) || listen(s, 16)) {
        perror("bind/listen");
        exit(1);
    }
    return s;
}

static int connect_to(int port) {
    for (int i = 0; i < 200; i++) {
        int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(s, (void *)&a, sizeof a) == 0) {
            setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            return s;
        }
        close(s);
        usleep(10000);
    }
    perror("connect");
    exit(1);
}

static int readn(int fd, void *b, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, (char *)b + got, n - got, 0);
        if (r <= 0) return -1;
        got += r;
    }
    return 0;
}

/* A single-threaded server: listeners lfd[0..n), requests "service, cost µs"; spins the
 * cost; for service 0, when back_port > 0, first asks back for BACK. */
static void serve(int *lfd, int n, int back_port) {
    /* FAULT_AT=S: back's requests cost 3× from S seconds after it started on. */
    const char *fa = getenv("FAULT_AT");
    double fault_at = back_port == 0 && fa ? now() + atof(fa) : -1;
    struct pollfd p[64];
    int np = n;
    for (int i = 0; i < n; i++) p[i] = (struct pollfd){.fd = lfd[i], .events = POLLIN};
    int svc_of[64] = {0};
    int back = -1, had = 0;
    double sum[MAXS] = {0};
    long cnt[MAXS] = {0};
    for (;;) {
        if (had && np == n) {
            if (back >= 0) close(back);
            /* What each request really took here, from after its receive to before its
             * reply, less the wait for back: the truth the estimates are judged by (on a
             * busy machine a spin overshoots its nominal cost when preempted). */
            for (int i = 0; i < n; i++)
                if (cnt[i]) printf("actual %d %d %.9f %ld\n", getpid(), i, sum[i] / cnt[i], cnt[i]);
            fflush(stdout);
            return; /* every client is gone */
        }
        if (poll(p, np, -1) < 0) continue;
        for (int i = 0; i < np; i++) {
            if (!(p[i].revents & (POLLIN | POLLHUP))) continue;
            if (i < n) {
                int c = accept(p[i].fd, NULL, NULL), one = 1;
                setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                had = 1;
                svc_of[np] = i;
                p[np++] = (struct pollfd){.fd = c, .events = POLLIN};
                continue;
            }
            uint32_t m[2];
            if (readn(p[i].fd, m, sizeof m)) {
                close(p[i].fd);
                p[i] = p[--np];
                svc_of[i] = svc_of[np];
                i--;
                continue;
            }
            double t_in = now(), waited = 0;
            if (m[0] == 0 && back_port > 0) {
                double b0 = now();
                if (back < 0) back = connect_to(back_port);
                uint32_t q[2] = {0, (uint32_t)(BACK * 1e6)};
                send(back, q, sizeof q, 0);
                readn(back, q, sizeof q);
                waited = now() - b0;
            }
            spin(m[1] * 1e-6 * (fault_at > 0 && now() >= fault_at ? 3 : 1));
            sum[svc_of[i]] += now() - t_in - waited;
            cnt[svc_of[i]]++;
            send(p[i].fd, m, sizeof m, 0);
        }
    }
}

static double expo(double mean) {
    double u = (random() + 1.0) / 2147483649.0;
    double x = -mean * log(u);
    return x > 5 * mean ? 5 * mean : x;
}

int main(int argc, char **argv) {
    if (argc != 6 || strcmp(argv[1], "run")) {
        fprintf(stderr, "usage: demand_sim run PORT SECONDS SEED SCENARIO\n");
        return 2;
    }
    int port = atoi(argv[2]), sc = atoi(argv[5]) ? 1 : 0, ns = NS[sc];
    double secs = atof(argv[3]);
    srandom(atoi(argv[4]));
    int lb = listen_on(port + MAXS);
    pid_t kids[2];
    if ((kids[0] = fork()) == 0) {
        serve(&lb, 1, 0);
        _exit(0);
    }
    close(lb);
    int lf[MAXS];
    for (int i = 0; i < ns; i++) lf[i] = listen_on(port + i);
    if ((kids[1] = fork()) == 0) {
        serve(lf, ns, port + MAXS);
        _exit(0);
    }
    for (int i = 0; i < ns; i++) close(lf[i]);
    /* The client: this process. */
    int c[MAXS];
    for (int i = 0; i < ns; i++) c[i] = connect_to(port + i);
    printf("truth");
    for (int i = 0; i < ns; i++) printf(" %.6f", DEM[sc][i]);
    printf(" %.6f\n", BACK);
    const double slot = 0.5;
    double t0 = now();
    int nslots = (int)(secs / slot);
    for (int j = 0; j < nslots; j++) {
        int cnt[MAXS], total = 0;
        /* Target busy per slot on front: 25 % to 70 % of it. */
        double target = slot * (0.25 + 0.45 * (random() / 2147483648.0));
        double w[MAXS], wsum = 0;
        for (int i = 0; i < ns; i++) {
            double r = random() / 2147483648.0;
            w[i] = sc == 0 ? 0.1 + r : 1.0 + 0.25 * (r - 0.5);
            wsum += w[i] * DEM[sc][i];
        }
        for (int i = 0; i < ns; i++) {
            cnt[i] = (int)(target * w[i] / wsum + 0.5);
            total += cnt[i];
        }
        printf("slot %d", j);
        for (int i = 0; i < ns; i++) printf(" %d", cnt[i]);
        printf("\n");
        fflush(stdout);
        int left[MAXS];
        memcpy(left, cnt, sizeof left);
        for (int k = 0; k < total; k++) {
            double at = t0 + j * slot + slot * k / total;
            while (now() < at) usleep(200);
            int r = random() % total, i = 0;
            /* Draw a service with requests left, proportionally. */
            int acc = 0, rem = 0;
            for (int q = 0; q < ns; q++) rem += left[q];
            r = random() % rem;
            for (i = 0; i < ns; i++) {
                acc += left[i];
                if (r < acc) break;
            }
            left[i]--;
            uint32_t m[2] = {(uint32_t)i, (uint32_t)(expo(DEM[sc][i]) * 1e6)};
            send(c[i], m, sizeof m, 0);
            readn(c[i], m, sizeof m);
        }
    }
    for (int i = 0; i < ns; i++) close(c[i]);
    waitpid(kids[0], NULL, 0);
    waitpid(kids[1], NULL, 0);
    return 0;
}
