/*
 * standin.c — a stand-in for libtrace.so's C ABI (tracer-preload/include/culprit.h),
 * for testing the Python shim without the real pool.
 *
 *   gcc -O2 -shared -fPIC -I../../tracer-preload/include standin.c -o libstandin.so
 *   STANDIN_OUT=/tmp/dir LD_PRELOAD=./libstandin.so python3 ...
 *
 * Every thread writes its entries, in bufpool's entry format, into its own file
 * `$STANDIN_OUT/<pid>.<tid>.<seq>`, mapped MAP_SHARED so nothing is lost on _exit or
 * SIGKILL. File layout: u32 committed length at offset 0, entries from offset 64.
 * The same writer protocol as bufpool: C hot paths append through `struct
 * culprit_writer` (cur/end/start/used) and call culprit_append_slow when full, which
 * starts the next file. A forked child drops the parent's mapping (status 0) and its
 * next entry opens a file of its own. Without STANDIN_OUT nothing is recorded.
 */
#define _GNU_SOURCE
#include "culprit.h"
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <x86intrin.h>

#define SEG_SIZE (4u << 20)
#define DATA_OFF 64u

int culprit_global_enabled = 0;
static __thread struct culprit_thread tls __attribute__((tls_model("initial-exec")));
static const char *out_dir;
static pthread_key_t exit_key;

static void thread_exit(void *p) {
    (void)p;
    tls.status = 2;
}

static void after_fork_child(void) {
    /* The mapping is shared with the parent: never write to it from here. */
    memset(&tls.w, 0, sizeof tls.w);
    tls.status = 0;
    tls.busy = 0;
}

__attribute__((constructor)) static void init(void) {
    out_dir = getenv("STANDIN_OUT");
    pthread_key_create(&exit_key, thread_exit);
    pthread_atfork(NULL, NULL, after_fork_child);
    if (out_dir && out_dir[0]) culprit_global_enabled = 1;
}

struct culprit_thread *culprit_thread_state(void) { return &tls; }

int culprit_enabled(void) { return culprit_global_enabled && !tls.busy; }

struct culprit_writer *culprit_writer(void) {
    return culprit_enabled() && tls.status == 1 ? &tls.w : NULL;
}

/* Maps the next segment file of this thread. */
static int new_segment(struct culprit_writer *w) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%d.%ld.%llu", out_dir, (int)getpid(), (long)syscall(SYS_gettid),
             (unsigned long long)w->seq);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return 0;
    if (ftruncate(fd, SEG_SIZE) != 0) {
        close(fd);
        return 0;
    }
    uint8_t *m = mmap(NULL, SEG_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return 0;
    w->start = m + DATA_OFF;
    w->cur = w->start;
    w->end = m + SEG_SIZE;
    w->used = (uint32_t *)m;
    w->seq++;
    return 1;
}

static int attach(void) {
    if (tls.status == 2 || !culprit_global_enabled) return 0;
    if (tls.status == 0) {
        memset(&tls.w, 0, sizeof tls.w);
        tls.w.pid = (uint32_t)getpid();
        tls.w.tid = (uint32_t)syscall(SYS_gettid);
        pthread_setspecific(exit_key, &tls);
        if (!new_segment(&tls.w)) return 0;
        tls.status = 1;
    }
    return 1;
}

static int append(const void *e, size_t n) {
    struct culprit_writer *w = &tls.w;
    if (w->cur != NULL && (size_t)(w->end - w->cur) >= n) {
        memcpy(w->cur, e, n);
        w->cur += n;
        __atomic_store_n(w->used, (uint32_t)(w->cur - w->start), __ATOMIC_RELEASE);
        return 1;
    }
    return culprit_append_slow(w, e, n);
}

int culprit_append_slow(struct culprit_writer *w, const void *entry, size_t len) {
    if (w != &tls.w || tls.status != 1) return 0;
    if (!new_segment(w)) {
        w->lost++;
        return 0;
    }
    return append(entry, len);
}

static inline void put48(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 6; i++) p[i] = (uint8_t)(v >> (8 * i));
}

void culprit_emit_call(uint8_t kind, uint64_t caller, uint64_t callee) {
    if (!culprit_global_enabled || tls.busy || !attach()) return;
    tls.busy = 1;
    uint8_t e[20];
    uint64_t head = ((uint64_t)__rdtsc() << 8) | kind;
    memcpy(e, &head, 8);
    put48(e + 8, caller);
    put48(e + 14, callee);
    append(e, 20);
    tls.busy = 0;
}

void culprit_emit_return(uint8_t kind, uint64_t callee, uint16_t aux) {
    if (!culprit_global_enabled || tls.busy || !attach()) return;
    tls.busy = 1;
    uint8_t e[16];
    uint64_t head = ((uint64_t)__rdtsc() << 8) | kind;
    memcpy(e, &head, 8);
    put48(e + 8, callee);
    memcpy(e + 14, &aux, 2);
    append(e, 16);
    tls.busy = 0;
}

void culprit_emit_code(uint32_t index, uint8_t kind, uint32_t first_line, const char *name, size_t name_len,
                       const char *file, size_t file_len) {
    if (!culprit_global_enabled || tls.busy || !attach()) return;
    tls.busy = 1;
    if (name_len > 2000) name_len = 2000;
    if (file_len > 2000) file_len = 2000;
    uint8_t e[10 + 4096];
    size_t body = 4 + 1 + 4 + 2 + name_len + 2 + file_len;
    uint64_t head = ((uint64_t)__rdtsc() << 8) | 0x33;
    memcpy(e, &head, 8);
    uint16_t bl = (uint16_t)body;
    memcpy(e + 8, &bl, 2);
    uint8_t *p = e + 10;
    memcpy(p, &index, 4);
    p += 4;
    *p++ = kind;
    memcpy(p, &first_line, 4);
    p += 4;
    uint16_t l = (uint16_t)name_len;
    memcpy(p, &l, 2);
    p += 2;
    memcpy(p, name, name_len);
    p += name_len;
    l = (uint16_t)file_len;
    memcpy(p, &l, 2);
    p += 2;
    memcpy(p, file, file_len);
    append(e, 10 + body);
    tls.busy = 0;
}

void culprit_flush_thread(void) {}
