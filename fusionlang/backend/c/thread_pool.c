/* fusionlang's thread pool: the part of GCC's OpenMP runtime ABI that generated kernels call
 * (GOMP_parallel, GOMP_barrier, the omp_* queries, the atomic/critical locks), linked into
 * each library with hidden visibility in place of libgomp. See thread_pool.py for why.
 *
 * A parallel region's members are claimed, not assigned: the calling thread runs member 0,
 * idle workers claim the others, and when the caller is done with its own it runs every
 * member nobody has claimed yet. A worker that wakes late (a sleeping thread takes tens of
 * microseconds to wake on a virtual machine, and longer when another process holds its
 * core) then costs nothing: the caller never waits for a member that has not started, only
 * for those running. Waiting threads spin (for an adaptive budget), then sleep on a futex, so
 * idle workers do not hold cores between runs.
 *
 * A member that reaches GOMP_barrier waits for the whole team there, as OpenMP requires: a
 * region with barriers (the GEMM template's shared packed panels) still needs every member
 * running at once; a region without (loop nests, depthwise, attention rows) never does. */
#if defined(_OPENMP) && defined(__GNUC__) && !defined(__clang__)
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define FL_HIDDEN __attribute__((visibility("hidden")))
#define FL_MAX_TEAM 64
#define ACQ __ATOMIC_ACQUIRE
#define REL __ATOMIC_RELEASE
#define SEQ __ATOMIC_SEQ_CST
#define RLX __ATOMIC_RELAXED

/* how long a waiting thread spins before it sleeps, at most: long enough to cover the gap
 * between two kernels of one run (so a run wakes its workers once, not once per kernel).
 * Each thread adapts its own budget: a spin that ends in the event doubles it (up to the
 * most), one that runs out halves it. On a quiet machine the events come within
 * microseconds and threads spin; where other processes hold the cores the thread waited
 * for is often preempted, spins run out, and the budget falls towards a passive wait, which
 * leaves the core to whoever can use it (a fixed 50 us spin made MobileNetV2 at two threads
 * 2x slower than libgomp's passive wait beside busy processes). */
static long spin_most_ns = 1000000;
static __thread long spin_budget_ns = -1;

/* set when a run of the library ends (fl_pool_rest, called by the driver): idle workers
 * then sleep at once instead of spinning into the caller's own code or another runtime's
 * run (a 1 ms spin after each run took a core from ORT and OpenVINO interleaved with it);
 * the next region clears it */
static uint32_t resting;

/* ---- waiting on a 32-bit word ---- */

static void futex_wait(uint32_t *word, uint32_t value) {
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, value, NULL, NULL, 0);
}

static void futex_wake_all(uint32_t *word) {
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

/* a word threads wait on, and how many of them sleep on it (so that a change wakes only
 * when someone sleeps: a futex call per region would cost more than the region saves) */
typedef struct {
    uint32_t value;
    uint32_t sleepers;
} Word;

static void word_set(Word *w, uint32_t value) {
    __atomic_store_n(&w->value, value, SEQ);
    if (__atomic_load_n(&w->sleepers, SEQ))
        futex_wake_all(&w->value);
}

static void word_add(Word *w, uint32_t delta) {
    __atomic_add_fetch(&w->value, delta, SEQ);
    if (__atomic_load_n(&w->sleepers, SEQ))
        futex_wake_all(&w->value);
}

/* until w->value != old: spin, then sleep. No sched_yield between: on a loaded machine a
 * yield hands the core to every other runnable thread's time slice in turn (milliseconds
 * each), which made a MobileNetV2 at two threads 10x slower beside busy processes */
static void word_wait_change(Word *w, uint32_t old) {
    if (spin_budget_ns < 0) spin_budget_ns = spin_most_ns;
    long start = 0;
    for (unsigned i = 0;; i++) {
        if (__atomic_load_n(&w->value, ACQ) != old) {
            long doubled = 2 * spin_budget_ns + 1000;
            spin_budget_ns = doubled < spin_most_ns ? doubled : spin_most_ns;
            return;
        }
        __builtin_ia32_pause();
        if ((i & 63) == 63) {
            if (__atomic_load_n(&resting, RLX)) break;  /* the run is over: not a spin that ran out */
            long t = now_ns();
            if (!start) start = t;
            else if (t - start > spin_budget_ns) {
                spin_budget_ns /= 2;
                break;
            }
        }
    }
    __atomic_add_fetch(&w->sleepers, 1, SEQ);
    while (__atomic_load_n(&w->value, SEQ) == old) futex_wait(&w->value, old);
    __atomic_sub_fetch(&w->sleepers, 1, SEQ);
}

/* ---- the team ---- */

/* the region being run: claim packs (generation << 32) | (size << 16) | next unclaimed
 * member, so one compare-and-swap both checks the region is still the same and claims */
static struct {
    void (*fn)(void *);
    void *data;
    uint64_t claim;
    Word published;  /* the generation of the newest region: idle workers wait on it */
    Word finished;   /* members finished in this region */
    Word barrier;    /* barrier episodes completed */
    uint32_t arrived;
} team;

static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static int workers;    /* threads started, besides callers */
/* where a team that covers every core the process may use runs: member i on pin_cpus[i]
 * (pin_team members; 0 when the team is smaller or FUSIONLANG_PIN=0), as ONNX Runtime pins
 * its default pool. Unpinned, on a virtual machine whose idle cores the host had given to
 * someone else, the kernel woke the worker on the caller's core after an idle gap, and the two
 * took turns there while the other core idled: GPT-2-like at two threads ran in 4.6 ms
 * after 10 ms idle and 7.4 ms after 50 ms, against 2.3 ms back to back; pinned, 2.5 and 2.8 */
static int pin_cpus[FL_MAX_TEAM];
static int pin_team;
static int pin_always;  /* FUSIONLANG_PIN=1: pinned whatever else runs */
static cpu_set_t pin_allowed;
static pthread_t worker_threads[FL_MAX_TEAM];  /* worker i's, 1 <= i <= workers */
static int workers_pinned;  /* the workers' affinity now: each its core, or all of pin_allowed */
static __thread int caller_pinned;   /* the caller's own affinity is saved and changed */
static __thread int run_placed;      /* this run's placement is decided (its first region) */
static __thread cpu_set_t caller_saved;
static int requested;  /* omp_set_num_threads, else OMP_NUM_THREADS or the cores we may use */
static __thread int member, members = 1, inside;
static uint32_t generation;
static uint32_t in_use;  /* a caller's region holds the team */

static int default_team(void) {
    const char *env = getenv("OMP_NUM_THREADS");
    if (env && atoi(env) > 0) return atoi(env);
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores > 0 ? (int)cores : 1;
}

static int team_size(void) {
    int n = requested ? requested : (requested = default_team());
    return n < 1 ? 1 : n > FL_MAX_TEAM ? FL_MAX_TEAM : n;
}

static void run_member(void (*fn)(void *), void *data, int id, int size) {
    member = id;
    members = size;
    inside = 1;
    fn(data);
    inside = 0;
    word_add(&team.finished, 1);
}

/* claim a member of region generation ``gen``: its number, or -1 when none is left */
static int claim_member(uint32_t gen) {
    uint64_t c = __atomic_load_n(&team.claim, ACQ);
    for (;;) {
        uint32_t size = (c >> 16) & 0xffff, next = c & 0xffff;
        if ((uint32_t)(c >> 32) != gen || next >= size) return -1;
        if (__atomic_compare_exchange_n(&team.claim, &c, c + 1, 0, ACQ, ACQ)) return (int)next;
    }
}

static void plan_pinning(int size) {
    const char *env = getenv("FUSIONLANG_PIN");
    if ((env && strcmp(env, "0") == 0) || size < 2 || size > FL_MAX_TEAM) return;
    pin_always = env && strcmp(env, "1") == 0;
    if (sched_getaffinity(0, sizeof pin_allowed, &pin_allowed) || CPU_COUNT(&pin_allowed) != size) return;
    int k = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE && k < size; cpu++)
        if (CPU_ISSET(cpu, &pin_allowed)) pin_cpus[k++] = cpu;
    pin_team = size;
    workers_pinned = 1;
}

static void pin_self(int cpu) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
}

static void set_workers_pinned(int pinned) {
    int started = __atomic_load_n(&workers, ACQ);
    for (int i = 1; i <= started && i < pin_team; i++) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(pin_cpus[i], &one);
        pthread_setaffinity_np(worker_threads[i], sizeof one, pinned ? &one : &pin_allowed);
    }
    workers_pinned = pinned;
}

/* runnable threads on the machine besides the one asking (/proc/loadavg's fourth field,
 * "running/total", counts the asker): one pread of a file kept open, about a microsecond */
static int others_running(void) {
    static int fd = -2;
    if (fd == -2) fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    char text[128];
    ssize_t n = fd >= 0 ? pread(fd, text, sizeof text - 1, 0) : -1;
    if (n <= 0) return 0;
    text[n] = 0;
    const char *field = text;
    for (int spaces = 0; *field && spaces < 3; field++) spaces += *field == ' ';
    return atoi(field) - 1;
}

/* for the run: the caller onto member 0's core, unless its own affinity is not the one the
 * plan was made from (its owner chose where it runs); fl_pool_rest gives it back.
 * Pinned threads cannot flee a core another thread holds: with one process spinning on a
 * core beside it, a pinned ResNet-50 at two threads took 1.35x its one-thread time against
 * 1.05x unpinned. So a run starts pinned only when nothing else on the machine is runnable
 * as it starts (FUSIONLANG_PIN=1: always; 0: never); otherwise the whole team runs unpinned */
static void pin_caller(void) {
    /* once a run, at its first region: /proc/loadavg is not read again for every region */
    if (!pin_team || run_placed) return;
    run_placed = 1;
    /* our own workers still spinning since the last run are runnable too: not others */
    int awake = __atomic_load_n(&workers, ACQ) - (int)__atomic_load_n(&team.published.sleepers, ACQ);
    int calm = pin_always || others_running() - awake <= 0;
    if (calm != workers_pinned) set_workers_pinned(calm);
    if (!calm) return;
    if (pthread_getaffinity_np(pthread_self(), sizeof caller_saved, &caller_saved)) return;
    if (!CPU_EQUAL(&caller_saved, &pin_allowed)) return;
    pin_self(pin_cpus[0]);
    caller_pinned = 1;
}

static void *worker_main(void *index) {
    int id = (int)(intptr_t)index;
    char name[16];
    snprintf(name, sizeof name, "fl-pool-%d", id);
    pthread_setname_np(pthread_self(), name);  /* what top -H and /proc/<pid>/task/<tid>/comm show */
    if (pin_team && id < pin_team && workers_pinned) pin_self(pin_cpus[id]);
    uint32_t seen = 0;
    for (;;) {
        word_wait_change(&team.published, seen);
        seen = __atomic_load_n(&team.published.value, ACQ);
        uint64_t c = __atomic_load_n(&team.claim, ACQ);
        uint32_t gen = (uint32_t)(c >> 32), size = (c >> 16) & 0xffff;
        for (int id; (id = claim_member(gen)) >= 0;)
            run_member(team.fn, team.data, id, (int)size);  /* fields are stable while a member runs */
    }
    return NULL;
}

static void after_fork_in_child(void) {
    workers = 0;  /* the parent's workers do not exist in the child */
    in_use = 0;
}

static void ensure_workers(int wanted) {
    if (__atomic_load_n(&workers, ACQ) >= wanted) return;
    pthread_mutex_lock(&start_lock);
    static int registered;
    if (!registered) {
        registered = 1;
        pthread_atfork(NULL, NULL, after_fork_in_child);
        const char *env = getenv("FUSIONLANG_SPIN_US");
        if (env && atol(env) >= 0) spin_most_ns = atol(env) * 1000L;
        plan_pinning(team_size());
    }
    while (workers < wanted) {
        pthread_t thread;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int failed = pthread_create(&thread, &attr, worker_main, (void *)(intptr_t)(workers + 1));
        pthread_attr_destroy(&attr);
        if (failed) break;  /* fewer threads: the caller runs the members nobody claims */
        if (workers + 1 < FL_MAX_TEAM) worker_threads[workers + 1] = thread;
        __atomic_store_n(&workers, workers + 1, REL);
    }
    pthread_mutex_unlock(&start_lock);
}

FL_HIDDEN void GOMP_parallel(void (*fn)(void *), void *data, unsigned num_threads, unsigned flags) {
    (void)flags;
    int size = num_threads ? (int)num_threads : team_size();
    if (size > FL_MAX_TEAM) size = FL_MAX_TEAM;
    /* the if clause said one thread, a nested region, or another thread of the process runs a
     * region of this library now (two runs of one compiled model from two threads, say):
     * the pool serves one caller at a time, so this region is a team of one, as OpenMP
     * allows */
    if (size <= 1 || inside || __atomic_exchange_n(&in_use, 1, ACQ)) {
        int saved_member = member, saved_members = members, saved_inside = inside;
        member = 0, members = 1, inside = 1;
        fn(data);
        member = saved_member, members = saved_members, inside = saved_inside;
        return;
    }
    ensure_workers(size - 1);
    pin_caller();
    int started = __atomic_load_n(&workers, ACQ);
    if (size > started + 1) size = started + 1;  /* a barrier needs every member running */
    uint32_t gen = ++generation;
    team.fn = fn;
    team.data = data;
    __atomic_store_n(&team.finished.value, 0, RLX);
    __atomic_store_n(&team.arrived, 0, RLX);
    /* member 0 is the caller's: the others are claimable from 1 */
    __atomic_store_n(&resting, 0, RLX);
    __atomic_store_n(&team.claim, ((uint64_t)gen << 32) | ((uint64_t)size << 16) | 1u, REL);
    word_set(&team.published, gen);
    run_member(fn, data, 0, size);
    for (int id; (id = claim_member(gen)) >= 0;) run_member(fn, data, id, size);
    for (uint32_t done; (done = __atomic_load_n(&team.finished.value, ACQ)) < (uint32_t)size;)
        word_wait_change(&team.finished, done);
    member = 0, members = 1, inside = 0;
    __atomic_store_n(&in_use, 0, REL);
}

FL_HIDDEN void GOMP_barrier(void) {
    if (members <= 1) return;
    uint32_t episode = __atomic_load_n(&team.barrier.value, ACQ);
    if (__atomic_add_fetch(&team.arrived, 1, SEQ) == (uint32_t)members) {
        __atomic_store_n(&team.arrived, 0, RLX);
        word_add(&team.barrier, 1);
        return;
    }
    word_wait_change(&team.barrier, episode);
}

/* the end of a run (the driver calls it, from the thread that ran it): idle workers sleep
 * now, and the caller has its own affinity back */
FL_HIDDEN void fl_pool_rest(void) {
    run_placed = 0;
    if (caller_pinned) {
        pthread_setaffinity_np(pthread_self(), sizeof caller_saved, &caller_saved);
        caller_pinned = 0;
    }
    __atomic_store_n(&resting, 1, REL);
}

FL_HIDDEN int omp_get_thread_num(void) { return member; }
FL_HIDDEN int omp_get_num_threads(void) { return members; }
FL_HIDDEN int omp_get_max_threads(void) { return team_size(); }
FL_HIDDEN void omp_set_num_threads(int n) { requested = n < 1 ? 1 : n; }

/* reductions the compiler cannot do with one atomic instruction, and critical sections */
static uint32_t lock_word;

static void lock(void) {
    while (__atomic_exchange_n(&lock_word, 1, ACQ))
        while (__atomic_load_n(&lock_word, RLX)) __builtin_ia32_pause();
}

static void unlock(void) { __atomic_store_n(&lock_word, 0, REL); }

FL_HIDDEN void GOMP_atomic_start(void) { lock(); }
FL_HIDDEN void GOMP_atomic_end(void) { unlock(); }
FL_HIDDEN void GOMP_critical_start(void) { lock(); }
FL_HIDDEN void GOMP_critical_end(void) { unlock(); }
#endif
