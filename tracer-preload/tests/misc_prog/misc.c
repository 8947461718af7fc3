/* Test program for libtrace.so: one mode per scenario (argv[1]). Prints key=value lines. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static struct sockaddr_in loopback(int port) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    return a;
}

static int port_of(int s) {
    struct sockaddr_in a;
    socklen_t l = sizeof a;
    getsockname(s, (void *)&a, &l);
    return ntohs(a.sin_port);
}

static int udp_unix(const char *dir) {
    /* UDP: 3 datagrams of 50 bytes. */
    int a = socket(AF_INET, SOCK_DGRAM, 0), b = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in sa = loopback(0), sb = loopback(0);
    bind(a, (void *)&sa, sizeof sa);
    bind(b, (void *)&sb, sizeof sb);
    sb = loopback(port_of(b));
    char buf[256];
    memset(buf, 'u', sizeof buf);
    for (int i = 0; i < 3; i++)
        if (sendto(a, buf, 50, 0, (void *)&sb, sizeof sb) != 50) return 20;
    for (int i = 0; i < 3; i++) {
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        if (recvfrom(b, buf, sizeof buf, 0, (void *)&from, &fl) != 50) return 21;
    }
    printf("udp_a=%d\nudp_b=%d\n", a, b);
    /* UNIX stream pair: write/read, writev/readv. */
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    for (int i = 0; i < 4; i++) {
        if (write(sv[0], buf, 64) != 64) return 22;
        if (read(sv[1], buf, 64) != 64) return 23;
    }
    struct iovec iov[2] = {{buf, 10}, {buf + 10, 20}};
    if (writev(sv[0], iov, 2) != 30) return 24;
    if (readv(sv[1], iov, 2) != 30) return 25;
    printf("sv0=%d\nsv1=%d\n", sv[0], sv[1]);
    /* A pipe: not a socket, not recorded. */
    int p[2];
    pipe(p);
    write(p[1], buf, 10);
    read(p[0], buf, 10);
    /* dup of a socket keeps it a socket. */
    int d = dup(sv[0]);
    if (write(d, buf, 5) != 5 || read(sv[1], buf, 5) != 5) return 26;
    printf("dup=%d\n", d);
    /* UNIX datagram pair: sendmsg/recvmsg. */
    int dg[2];
    socketpair(AF_UNIX, SOCK_DGRAM, 0, dg);
    struct msghdr m;
    memset(&m, 0, sizeof m);
    m.msg_iov = iov;
    m.msg_iovlen = 2;
    if (sendmsg(dg[0], &m, 0) != 30) return 27;
    if (recvmsg(dg[1], &m, 0) != 30) return 28;
    /* UNIX listening socket at a path, accepted after poll. */
    int ls = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un un;
    memset(&un, 0, sizeof un);
    un.sun_family = AF_UNIX;
    snprintf(un.sun_path, sizeof un.sun_path, "%s/sock", dir);
    if (bind(ls, (void *)&un, sizeof un) || listen(ls, 4)) return 29;
    int c = socket(AF_UNIX, SOCK_STREAM, 0);
    if (connect(c, (void *)&un, sizeof un)) return 30;
    struct pollfd pf = {ls, POLLIN, 0};
    if (poll(&pf, 1, 1000) != 1) return 31;
    int s = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
    if (s < 0) return 32;
    printf("unix_ls=%d\nunix_c=%d\nunix_s=%d\n", ls, c, s);
    close(s);
    close(c);
    close(ls);
    return 0;
}

static int refused(void) {
    int t = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = loopback(0);
    bind(t, (void *)&a, sizeof a);
    int port = port_of(t);
    close(t);
    a = loopback(port);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    int r = connect(s, (void *)&a, sizeof a);
    printf("port=%d\nret=%d\nerrno=%d\n", port, r, errno);
    /* Non-blocking: EINPROGRESS then SO_ERROR, or refused at once. */
    int n = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    r = connect(n, (void *)&a, sizeof a);
    printf("nb_ret=%d\nnb_errno=%d\n", r, r < 0 ? errno : 0);
    struct pollfd pf = {n, POLLOUT, 0};
    poll(&pf, 1, 1000);
    int err = -1;
    socklen_t el = sizeof err;
    getsockopt(n, SOL_SOCKET, SO_ERROR, &err, &el);
    printf("so_error=%d\n", err);
    return 0;
}

struct targ {
    int fd;
    int k;
};

static void *worker(void *p) {
    struct targ *t = p;
    char buf[64];
    memset(buf, 't', sizeof buf);
    for (int i = 0; i < 10; i++) send(t->fd, buf, t->k, 0);
    return NULL;
}

static int threads(void) {
    pthread_t th[3];
    struct targ ta[3];
    int sv[3][2];
    for (int i = 0; i < 3; i++) {
        socketpair(AF_UNIX, SOCK_STREAM, 0, sv[i]);
        ta[i].fd = sv[i][0];
        ta[i].k = i + 1;
        pthread_create(&th[i], NULL, worker, &ta[i]);
    }
    long total = 0;
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        char buf[256];
        total += recv(sv[i][1], buf, sizeof buf, 0);
    }
    printf("total=%ld\n", total);
    return 0;
}

static int send_n(int n, char tag) {
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    char buf[64];
    memset(buf, tag, sizeof buf);
    return (int)write(sv[0], buf, n);
}

static int exec_chain(const char *self, const char *stage) {
    if (!strcmp(stage, "exec1")) {
        printf("pid=%d\n", getpid());
        fflush(stdout);
        char *env[] = {"FOO=bar", NULL};
        execle(self, self, "exec2", (char *)NULL, env);
        return 40;
    }
    if (!strcmp(stage, "exec2")) {
        if (getenv("FOO") == NULL) return 41;
        send_n(7, '2');
        char *argv[] = {(char *)self, "exec3", NULL};
        execv(self, argv);
        return 42;
    }
    if (!strcmp(stage, "exec3")) {
        send_n(9, '3');
        char *argv[] = {(char *)self, "spawned", NULL};
        char *env[] = {NULL};
        pid_t c;
        if (posix_spawn(&c, self, NULL, NULL, argv, env) != 0) return 43;
        int st;
        waitpid(c, &st, 0);
        printf("spawned=%d\nspawned_status=%d\n", c, st);
        return 0;
    }
    send_n(5, 's'); /* spawned */
    return 0;
}

static int closeall(void) {
    printf("pid=%d\n", getpid());
    fflush(stdout);
    for (int fd = 0; fd < 1024; fd++) close(fd);
    return send_n(11, 'c') == 11 ? 0 : 50;
}

static int sig_fd;
static volatile sig_atomic_t handled;
static void on_sig(int s) {
    (void)s;
    int e = errno;
    write(sig_fd, "s", 1);
    handled++;
    errno = e;
}

static int signals(void) {
    int a[2], b[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, a);
    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, b);
    sig_fd = b[0];
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sig;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGALRM, &sa, NULL);
    for (int i = 0; i < 10; i++) raise(SIGUSR1);
    printf("raised=%d\n", (int)handled);
    struct itimerval it = {{0, 200}, {0, 200}};
    setitimer(ITIMER_REAL, &it, NULL);
    char c = 'm', buf[4096];
    int sends = 0;
    for (int i = 0; i < 20000; i++) {
        if (send(a[0], &c, 1, 0) == 1) sends++;
        if (i % 50 == 49) {
            recv(a[1], buf, sizeof buf, MSG_DONTWAIT);
            recv(b[1], buf, sizeof buf, MSG_DONTWAIT);
        }
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    printf("sends=%d\nhandled=%d\nsig_fd=%d\nmain_fd=%d\n", sends, (int)handled, b[0], a[0]);
    return 0;
}

static int killme(void) {
    int sv[2];
    socketpair(AF_UNIX, SOCK_DGRAM, 0, sv);
    char buf[4096];
    for (int i = 0; i < 100; i++) {
        send(sv[0], "k", 1, 0);
        recv(sv[1], buf, sizeof buf, 0);
    }
    printf("ready=1\n");
    fflush(stdout);
    for (;;) pause();
}

static volatile int stop_bg;
static void *bg_sender(void *p) {
    int fd = *(int *)p;
    char buf[4096];
    long n = 0;
    while (!stop_bg) {
        send(fd, "b", 1, MSG_DONTWAIT);
        recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        n++;
    }
    return (void *)n;
}

/* fork (and vfork) while another thread is busy recording. */
static int mtfork(const char *self) {
    int sv[2];
    socketpair(AF_UNIX, SOCK_DGRAM, 0, sv);
    pthread_t th;
    pthread_create(&th, NULL, bg_sender, &sv[0]);
    int kids[6];
    for (int i = 0; i < 5; i++) {
        fflush(stdout);
        pid_t c = fork();
        if (c == 0) {
            for (int k = 0; k < 20; k++) send(sv[1], "c", 1, 0);
            _exit(0);
        }
        kids[i] = c;
    }
    fflush(stdout);
    pid_t v = vfork();
    if (v == 0) {
        execl(self, self, "plain", (char *)NULL);
        _exit(61);
    }
    kids[5] = v;
    for (int i = 0; i < 6; i++) {
        int st;
        waitpid(kids[i], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return 70;
        printf("kid%d=%d\n", i, kids[i]);
    }
    stop_bg = 1;
    void *n;
    pthread_join(th, &n);
    printf("bg=%ld\n", (long)n);
    return 0;
}

static int daemonize(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/daemon.pid", dir);
    if (daemon(1, 0) != 0) return 80;
    int sv[2];
    socketpair(AF_UNIX, SOCK_DGRAM, 0, sv);
    for (int i = 0; i < 4; i++) send(sv[0], "d", 1, 0);
    FILE *f = fopen(path, "w");
    fprintf(f, "%d\n", getpid());
    fclose(f);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return 1;
    const char *m = argv[1];
    if (!strcmp(m, "udp-unix")) return udp_unix(argv[2]);
    if (!strcmp(m, "refused")) return refused();
    if (!strcmp(m, "threads")) return threads();
    if (!strncmp(m, "exec", 4) || !strcmp(m, "spawned")) return exec_chain(argv[0], m);
    if (!strcmp(m, "closeall")) return closeall();
    if (!strcmp(m, "signals")) return signals();
    if (!strcmp(m, "kill")) return killme();
    if (!strcmp(m, "chdir-exec")) {
        if (chdir("/")) return 90;
        execl(argv[0], argv[0], "plain", (char *)NULL);
        return 91;
    }
    if (!strcmp(m, "mtfork")) return mtfork(argv[0]);
    if (!strcmp(m, "daemon")) return daemonize(argv[2]);
    if (!strcmp(m, "plain")) {
        printf("hello\n");
        return send_n(3, 'p') == 3 ? 0 : 60;
    }
    if (!strcmp(m, "forkexec")) {
        fflush(stdout);
        pid_t c = fork();
        if (c == 0) {
            execl(argv[0], argv[0], "plain", (char *)NULL);
            _exit(61);
        }
        int st;
        waitpid(c, &st, 0);
        return WEXITSTATUS(st);
    }
    return 1;
}
