/* The busy logs' looks, made by a thread of their own outside Python (logfollow.py, _Looks).

While 32 ranks print 10 lines a second each, the supervisor looks at every busy log about ten
times a second: an fstat each, whose size says what was written and whose modification time
stamps it (issue #10: a line is stamped when it was written). Done in Python, each look is
~7,300 instructions of os.fstat's own (a stat_result with its nine times) and each wakeup a
cold run through the interpreter: most of the supervisor's cost at that rate. Here the thread
wakes on the batch's timer, fstats each log and, where one grew, stamps what it found as
LogFollower._grown would (the log's modification time, where that is when its last line was
written); Python takes a second's looks at once, a log at a time. The thread never touches a Python object, so it runs beside the
interpreter without its lock, and it blocks every signal (Python's handlers run in the main
thread).

read_looked, called by Python at its poll, reads what a log's looks saw and finds each line's
stamp in one call, where Python made a read and went through the looks for each log
(logfollow._looked_stamps, kept where this module was not built).

The caller's edge cases (issue #63): an interval that is not 0 or between MIN_INTERVAL_S and
MAX_INTERVAL_S is refused (a NaN, infinite or tiny one spun the thread with its lock held);
the lock is never held across a blocking call (the fstats are made on a copy of the
descriptors, and Python waits for the lock without the GIL); what a take hands back is moved
out under the lock and made into Python objects after it (no memory then loses that take,
never the count of what is left); close() from two threads joins once, the other waits for
it; a closed looker starts again at the next set_logs with logs; a modification time past
2262 (or before 1678) is clamped to what 64 bits of ns hold; read_looked's descriptor,
offset and size are checked, and its looks copied before anything else runs.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_LOOKS 4096 /* a log's, untaken: minutes of output at a look a line */
#define MTIME_SLACK_S 0.05 /* logfollow.MTIME_SLACK_S */
/* The batch's time is 0.02 to 0.1 s (logfollow.BATCH_MIN_S, BATCH_MAX_S): anything much
   shorter spins the thread, anything longer is no batch. */
#define MIN_INTERVAL_S 1e-3
#define MAX_INTERVAL_S 3600.0
#define NS_PER_S 1000000000LL

typedef struct {
    long long size;
    double stamp;
} Look;

typedef struct {
    int fd;
    long long seen; /* its size at the last look that found it grown (or as Python said) */
    double grew_at; /* when a look last found it grown (or as Python said) */
    /* Since the last take: */
    Look *looks;
    Py_ssize_t n_looks, room;
    long long changes, first_write_ns, last_write_ns;
} Log;

/* A log's looks moved out of the looker by a take, made into Python objects after it. */
typedef struct {
    Py_ssize_t index;
    Look *looks;
    Py_ssize_t n_looks;
    long long changes, first_write_ns, last_write_ns;
    double grew_at;
} Taken;

/* What the thread's pass found of one log, made without the lock. */
typedef struct {
    int fd, ok;
    long long size, modified_ns;
} Seen;

typedef struct {
    PyObject_HEAD
    pthread_mutex_t mutex;
    pthread_cond_t cond;  /* on CLOCK_MONOTONIC: a clock set back does not hold the looks */
    pthread_cond_t ended; /* a close's join is done (another close waits for it) */
    pthread_t thread;
    int started, stopping;
    double interval_s;
    struct timespec due; /* the next look's time (monotonic) */
    Log *logs;
    Py_ssize_t n_logs;
    unsigned long long generation; /* set_logs' count: a pass over older logs is dropped */
    Py_ssize_t *grown; /* the logs with looks untaken, in the order first grown */
    Py_ssize_t n_grown;
    unsigned long long passes, shared;
} Looker;

static double
seconds_of(const struct timespec *t)
{
    return (double)t->tv_sec + (double)t->tv_nsec / 1e9;
}

/* `t` + `s` seconds, `s` clamped to [0, MAX_INTERVAL_S]: no overflow whatever it is. */
static void
add_seconds(struct timespec *t, double s)
{
    if (!(s > 0))
        s = 0; /* (a NaN too) */
    if (s > MAX_INTERVAL_S)
        s = MAX_INTERVAL_S;
    long long whole = (long long)s;
    long long ns = t->tv_nsec + (long long)((s - (double)whole) * 1e9);
    t->tv_sec += whole + ns / NS_PER_S;
    t->tv_nsec = ns % NS_PER_S;
}

/* A file time in ns, clamped to what 64 bits hold (the years 1678 to 2262): the job may set
   its log's time to anything (os.utime). */
static long long
ns_of(const struct timespec *t)
{
    if (t->tv_sec >= LLONG_MAX / NS_PER_S)
        return LLONG_MAX;
    if (t->tv_sec <= LLONG_MIN / NS_PER_S)
        return LLONG_MIN;
    return (long long)t->tv_sec * NS_PER_S + t->tv_nsec;
}

static int
before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* The mutex, taken by Python: without the GIL while it waits (the thread may hold it for a
   pass's notes; another Python thread may hold it and want the GIL). */
static void
lock_from_python(Looker *self)
{
    if (pthread_mutex_trylock(&self->mutex) == 0)
        return;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->mutex);
    Py_END_ALLOW_THREADS
}

/* A look at `now` found `log` grown to `size`, written last at `modified_ns`: its stamp, as
   LogFollower._grown gives it (the write's time where it is one, else the look's). Mutex
   held. A log is in `grown` exactly while it has looks untaken. */
static void
note(Looker *self, Py_ssize_t index, long long size, long long modified_ns, double now)
{
    Log *log = &self->logs[index];
    double written = (double)modified_ns / 1e9;
    double stamp = modified_ns % NS_PER_S && log->grew_at - MTIME_SLACK_S <= written &&
                           written <= now ? written : now;
    if (log->n_looks == log->room && log->room < MAX_LOOKS) {
        Py_ssize_t room = log->room ? log->room * 2 : 16;
        Look *looks = realloc(log->looks, sizeof(Look) * (size_t)room);
        if (looks != NULL) {
            log->looks = looks;
            log->room = room;
        }
    }
    if (log->n_looks == 0 && (log->room == 0 || self->n_grown >= self->n_logs))
        return; /* no memory: Python's poll reads the log, stamped then */
    if (!log->changes)
        log->first_write_ns = modified_ns;
    log->last_write_ns = modified_ns;
    log->changes++;
    log->seen = size;
    log->grew_at = now;
    if (log->n_looks == log->room) {
        /* Full: the lines of the last look and this one share this one's stamp. */
        log->looks[log->n_looks - 1] = (Look){size, stamp};
        self->shared++;
        return;
    }
    if (log->n_looks == 0)
        self->grown[self->n_grown++] = index;
    log->looks[log->n_looks++] = (Look){size, stamp};
}

/* One pass over the logs: the mutex held on entry and on return, not over the fstats.
   `seen`/`room`: the thread's own buffer. */
static void
look(Looker *self, Seen **seen, Py_ssize_t *room)
{
    Py_ssize_t n = self->n_logs;
    unsigned long long generation = self->generation;
    if (n > *room) {
        Seen *grown = realloc(*seen, sizeof(Seen) * (size_t)n);
        if (grown == NULL)
            return; /* no memory: no pass (Python's poll reads the logs) */
        *seen = grown;
        *room = n;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        (*seen)[i].fd = self->logs[i].fd;
    pthread_mutex_unlock(&self->mutex);
    /* (A descriptor Python closes meanwhile is one set_logs replaced first: the pass's
       generation is then old, and what it found is dropped.) */
    struct timespec wall;
    struct stat status;
    clock_gettime(CLOCK_REALTIME, &wall);
    double now = seconds_of(&wall);
    for (Py_ssize_t i = 0; i < n; i++) {
        Seen *s = &(*seen)[i];
        s->ok = fstat(s->fd, &status) == 0;
        if (s->ok) {
            s->size = (long long)status.st_size;
            s->modified_ns = ns_of(&status.st_mtim);
        }
    }
    pthread_mutex_lock(&self->mutex);
    if (generation != self->generation || self->stopping)
        return;
    for (Py_ssize_t i = 0; i < n; i++) {
        Seen *s = &(*seen)[i];
        if (s->ok && s->size > self->logs[i].seen)
            note(self, i, s->size, s->modified_ns, now);
    }
    self->passes++;
}

static void *
run(void *arg)
{
    Looker *self = (Looker *)arg;
    Seen *seen = NULL;
    Py_ssize_t room = 0;
    pthread_mutex_lock(&self->mutex);
    while (!self->stopping) {
        if (self->n_logs == 0 || self->interval_s <= 0) {
            pthread_cond_wait(&self->cond, &self->mutex);
            continue;
        }
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (before(&now, &self->due)) {
            /* Woken early (new logs, a stop): the wait goes on to the same time. */
            pthread_cond_timedwait(&self->cond, &self->mutex, &self->due);
            continue;
        }
        look(self, &seen, &room);
        clock_gettime(CLOCK_MONOTONIC, &self->due);
        add_seconds(&self->due, self->interval_s);
    }
    pthread_mutex_unlock(&self->mutex);
    free(seen);
    return NULL;
}

/* What the looks found since the last take, moved out (mutex held): the logs' looks are
   handed over, not copied. -1 where there is no memory for the list (nothing taken then). */
static int
take_raw(Looker *self, Taken **out, Py_ssize_t *n_out)
{
    Py_ssize_t n = self->n_grown;
    *out = NULL;
    *n_out = 0;
    if (n == 0)
        return 0;
    Taken *taken = malloc(sizeof(Taken) * (size_t)n);
    if (taken == NULL)
        return -1;
    for (Py_ssize_t g = 0; g < n; g++) {
        Log *log = &self->logs[self->grown[g]];
        taken[g] = (Taken){self->grown[g], log->looks, log->n_looks, log->changes,
                           log->first_write_ns, log->last_write_ns, log->grew_at};
        log->looks = NULL;
        log->n_looks = log->room = 0;
        log->changes = 0;
    }
    self->n_grown = 0;
    *out = taken;
    *n_out = n;
    return 0;
}

static void
free_taken(Taken *taken, Py_ssize_t n)
{
    for (Py_ssize_t g = 0; g < n; g++)
        free(taken[g].looks);
    free(taken);
}

/* take_raw's looks as take() hands them back (see take_doc), freed; NULL on an error. */
static PyObject *
taken_list(Taken *taken, Py_ssize_t n)
{
    PyObject *list = PyList_New(n);
    for (Py_ssize_t g = 0; list != NULL && g < n; g++) {
        Taken *t = &taken[g];
        PyObject *looks = PyList_New(t->n_looks);
        for (Py_ssize_t i = 0; looks != NULL && i < t->n_looks; i++) {
            PyObject *item = Py_BuildValue("(Ld)", t->looks[i].size, t->looks[i].stamp);
            if (item == NULL)
                Py_CLEAR(looks);
            else
                PyList_SET_ITEM(looks, i, item);
        }
        PyObject *entry = looks == NULL ? NULL : Py_BuildValue(
            "(nNLLLd)", t->index, looks, t->changes, t->first_write_ns, t->last_write_ns,
            t->grew_at);
        if (entry == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, g, entry);
    }
    free_taken(taken, n);
    return list;
}

static void
free_logs(Log *logs, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        free(logs[i].looks);
    PyMem_RawFree(logs);
}

/* The thread started (mutex held, none running); an errno where it could not be. */
static int
start(Looker *self)
{
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous); /* the thread starts with all blocked */
    int failed = pthread_create(&self->thread, NULL, run, self);
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    if (!failed) {
        self->started = 1;
        self->stopping = 0;
    }
    return failed;
}

static PyObject *
Looker_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args) || (kwargs != NULL && PyDict_GET_SIZE(kwargs))) {
        PyErr_SetString(PyExc_TypeError, "Looker() takes no arguments");
        return NULL;
    }
    Looker *self = (Looker *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    pthread_condattr_t attributes;
    int failed = pthread_condattr_init(&attributes);
    if (!failed) {
        failed = pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
        if (!failed)
            failed = pthread_cond_init(&self->cond, &attributes);
        pthread_condattr_destroy(&attributes);
    }
    if (!failed && (failed = pthread_cond_init(&self->ended, NULL)) != 0)
        pthread_cond_destroy(&self->cond);
    if (!failed && (failed = pthread_mutex_init(&self->mutex, NULL)) != 0) {
        pthread_cond_destroy(&self->cond);
        pthread_cond_destroy(&self->ended);
    }
    if (failed) {
        Py_TYPE(self)->tp_free((PyObject *)self);
        errno = failed;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return (PyObject *)self;
}

/* Wait until no close is joining the thread (mutex held; without the GIL). */
static void
wait_for_join(Looker *self)
{
    while (self->started && self->stopping)
        pthread_cond_wait(&self->ended, &self->mutex);
}

PyDoc_STRVAR(set_logs_doc,
"set_logs(logs: list[tuple[int, int, float]]) -> list[tuple[...]]\n\n"
"Look at these logs from now on, each a (descriptor, size seen, time last seen grown): what\n"
"the looks found of the logs before is handed back, as take() would (indexes into those).\n"
"An empty list stops the looks; logs given after close() start the thread again.\n"
"ValueError where a descriptor is negative, a size negative or a time NaN or +inf.");

static PyObject *
Looker_set_logs(Looker *self, PyObject *arg)
{
    /* (A tuple or a list's own copy: nothing below can change it.) */
    PyObject *sequence = PySequence_Tuple(arg);
    if (sequence == NULL) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError, "set_logs takes a list of (fd, seen, grew_at)");
        }
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(sequence);
    Log *logs = n ? PyMem_RawCalloc((size_t)n, sizeof(Log)) : NULL;
    Py_ssize_t *grown = n ? PyMem_RawMalloc(sizeof(Py_ssize_t) * (size_t)n) : NULL;
    if (n && (logs == NULL || grown == NULL)) {
        PyErr_NoMemory();
        goto failed;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Log *log = &logs[i];
        PyObject *item = PyTuple_GET_ITEM(sequence, i);
        if (!PyTuple_Check(item)) {
            PyErr_SetString(PyExc_TypeError, "a log is a (fd, seen, grew_at) tuple");
            goto failed;
        }
        if (!PyArg_ParseTuple(item, "iLd", &log->fd, &log->seen, &log->grew_at))
            goto failed;
        if (log->fd < 0 || log->seen < 0 || isnan(log->grew_at) ||
            log->grew_at == INFINITY) {
            PyErr_Format(PyExc_ValueError,
                         "set_logs: log %zd is (fd %d, seen %lld, grew_at %R): a descriptor "
                         "and a size of 0 or more, and a time (or -inf)", i, log->fd,
                         log->seen, PyTuple_GET_ITEM(item, 2));
            goto failed;
        }
    }
    Py_CLEAR(sequence);

    Taken *taken = NULL;
    Py_ssize_t n_taken = 0;
    int failed_start = 0;
    lock_from_python(self);
    Py_BEGIN_ALLOW_THREADS
    wait_for_join(self); /* (a close under way in another thread: the thread ends first) */
    Py_END_ALLOW_THREADS
    if (!self->started && n)
        failed_start = start(self);
    if (failed_start || take_raw(self, &taken, &n_taken) < 0) {
        pthread_mutex_unlock(&self->mutex);
        if (failed_start) {
            errno = failed_start;
            PyErr_SetFromErrno(PyExc_OSError);
        } else {
            PyErr_NoMemory();
        }
        goto failed;
    }
    Log *old = self->logs;
    Py_ssize_t n_old = self->n_logs;
    Py_ssize_t *old_grown = self->grown;
    self->logs = logs;
    self->n_logs = n;
    self->grown = grown;
    self->generation++;
    pthread_cond_signal(&self->cond);
    pthread_mutex_unlock(&self->mutex);
    free_logs(old, n_old);
    PyMem_RawFree(old_grown);
    return taken_list(taken, n_taken);

failed:
    Py_XDECREF(sequence);
    PyMem_RawFree(logs);
    PyMem_RawFree(grown);
    return NULL;
}

PyDoc_STRVAR(take_doc,
"take() -> list[tuple[int, list[tuple[int, float]], int, int, int, float]]\n\n"
"What the looks found since the last take: for each log they found grown, in the order first\n"
"found, (its index into the logs, each look's (size, stamp), how many looks found it grown,\n"
"the modification times in ns at the first and last of those, and the last one's time).\n"
"MemoryError where there is no memory for it (the looks are kept for the next take).");

static PyObject *
Looker_take(Looker *self, PyObject *Py_UNUSED(ignored))
{
    Taken *taken;
    Py_ssize_t n;
    lock_from_python(self);
    int failed = take_raw(self, &taken, &n);
    pthread_mutex_unlock(&self->mutex);
    if (failed < 0)
        return PyErr_NoMemory();
    return taken_list(taken, n);
}

PyDoc_STRVAR(set_interval_doc,
"set_interval(seconds: float) -> None\n\n"
"The time from one pass over the logs to the next (the batch's time): 0 stops the passes,\n"
"else 0.001 to 3600 seconds (ValueError otherwise: NaN, infinite, negative).");

static PyObject *
Looker_set_interval(Looker *self, PyObject *arg)
{
    double seconds = PyFloat_AsDouble(arg);
    if (seconds == -1.0 && PyErr_Occurred())
        return NULL;
    if (seconds != 0.0 && !(seconds >= MIN_INTERVAL_S && seconds <= MAX_INTERVAL_S)) {
        PyErr_Format(PyExc_ValueError,
                     "set_interval(%R): 0 (no looks) or 0.001 to 3600 seconds", arg);
        return NULL;
    }
    lock_from_python(self);
    if (self->interval_s <= 0 && seconds > 0) { /* the first: a pass at once */
        clock_gettime(CLOCK_MONOTONIC, &self->due);
        pthread_cond_signal(&self->cond);
    }
    self->interval_s = seconds;
    pthread_mutex_unlock(&self->mutex);
    Py_RETURN_NONE;
}

/* The thread ended and joined, once whoever calls: a second close waits for the first's
   join. Called without the GIL. */
static void
stop(Looker *self)
{
    pthread_mutex_lock(&self->mutex);
    if (!self->started) {
        pthread_mutex_unlock(&self->mutex);
        return;
    }
    if (self->stopping) { /* another close joins it */
        wait_for_join(self);
        pthread_mutex_unlock(&self->mutex);
        return;
    }
    self->stopping = 1;
    pthread_t thread = self->thread;
    pthread_cond_signal(&self->cond);
    pthread_mutex_unlock(&self->mutex);
    pthread_join(thread, NULL);
    pthread_mutex_lock(&self->mutex);
    self->started = self->stopping = 0;
    pthread_cond_broadcast(&self->ended);
    pthread_mutex_unlock(&self->mutex);
}

PyDoc_STRVAR(close_doc,
"close() -> None\n\n"
"Stop the looks (the thread ends; from two threads at once, both return once it has).\n"
"What was taken and the logs stay: set_logs with logs starts the thread again.");

static PyObject *
Looker_close(Looker *self, PyObject *Py_UNUSED(ignored))
{
    Py_BEGIN_ALLOW_THREADS
    stop(self);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* A counter of the looker's (`closure`: its offset in the struct), read under the mutex. */
static PyObject *
Looker_counter(Looker *self, void *closure)
{
    lock_from_python(self);
    unsigned long long value = *(unsigned long long *)((char *)self + (size_t)closure);
    pthread_mutex_unlock(&self->mutex);
    return PyLong_FromUnsignedLongLong(value);
}

static void
Looker_dealloc(Looker *self)
{
    Py_BEGIN_ALLOW_THREADS
    stop(self);
    Py_END_ALLOW_THREADS
    pthread_cond_destroy(&self->cond);
    pthread_cond_destroy(&self->ended);
    pthread_mutex_destroy(&self->mutex);
    free_logs(self->logs, self->n_logs);
    PyMem_RawFree(self->grown);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

PyDoc_STRVAR(read_looked_doc,
"read_looked(fd: int, offset: int, most: int, looks: list[tuple[int, float]])\n"
"    -> tuple[bytes, list[float], int]\n\n"
"What a log gained from `offset` up to its last look's size (at most `most` bytes), read\n"
"with pread; the stamp of each line it ends (of the first look whose size holds the line's\n"
"newline: the look that saw it whole); and how many of those lines came in a look after\n"
"another's (logfollow._looked_stamps, outside Python). `looks` are (size,\n"
"stamp) by size. Raises OSError where the read fails, ValueError where the descriptor is\n"
"not one (negative, past an int) or the offset, `most` or a size is negative.");

static PyObject *
read_looked(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyList_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "read_looked(fd, offset, most, looks: list)");
        return NULL;
    }
    long fd = PyLong_AsLong(args[0]);
    if (fd == -1 && PyErr_Occurred())
        return NULL;
    long long offset = PyLong_AsLongLong(args[1]);
    if (offset == -1 && PyErr_Occurred())
        return NULL;
    long long most = PyLong_AsLongLong(args[2]);
    if (most == -1 && PyErr_Occurred())
        return NULL;
    if (fd < 0 || fd > INT_MAX || offset < 0 || most < 0) {
        PyErr_Format(PyExc_ValueError,
                     "read_looked: fd %ld, offset %lld, most %lld: a descriptor (0 to %d) "
                     "and an offset and a most of 0 or more", fd, offset, most, INT_MAX);
        return NULL;
    }
    /* The looks copied (their tuples are immutable): a size's int may run Python code
       (__index__), which could change the caller's list. */
    PyObject *looks = PyList_AsTuple(args[3]);
    if (looks == NULL)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(looks);
    long long *sizes = PyMem_Malloc(sizeof(long long) * (size_t)(n ? n : 1));
    if (sizes == NULL) {
        Py_DECREF(looks);
        return PyErr_NoMemory();
    }
    PyObject *data = NULL, *stamps = NULL;
    for (Py_ssize_t i = 0; i < n; i++) { /* every look a (size, stamp), the last's size */
        PyObject *look = PyTuple_GET_ITEM(looks, i);
        if (!PyTuple_Check(look) || PyTuple_GET_SIZE(look) != 2) {
            PyErr_SetString(PyExc_TypeError, "a look is a (size, stamp) tuple");
            goto failed;
        }
        sizes[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(look, 0));
        if (sizes[i] == -1 && PyErr_Occurred())
            goto failed;
        if (sizes[i] < 0) {
            PyErr_Format(PyExc_ValueError, "read_looked: a look's size is %lld", sizes[i]);
            goto failed;
        }
    }
    long long last = n ? sizes[n - 1] : 0;
    /* (both 0 or more: no overflow) */
    long long want = last - offset < most ? last - offset : most;
    if (want < 0)
        want = 0;
    if (want > PY_SSIZE_T_MAX) {
        PyErr_NoMemory();
        goto failed;
    }
    data = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)want);
    if (data == NULL)
        goto failed;
    char *buffer = PyBytes_AS_STRING(data);
    ssize_t got = 0;
    if (want > 0) {
        Py_BEGIN_ALLOW_THREADS
        got = pread((int)fd, buffer, (size_t)want, (off_t)offset);
        Py_END_ALLOW_THREADS
        if (got < 0) {
            PyErr_SetFromErrno(PyExc_OSError);
            goto failed;
        }
        if (got < want && _PyBytes_Resize(&data, (Py_ssize_t)got) < 0)
            goto failed; /* (data freed and NULL) */
        buffer = PyBytes_AS_STRING(data);
    }
    stamps = PyList_New(0);
    if (stamps == NULL)
        goto failed;
    long long shared = 0;
    Py_ssize_t at = 0;       /* the look that saw the line being stamped whole */
    long long in_look = 0;   /* lines that look saw whole so far */
    long long size = n ? sizes[0] : 0;
    const char *from = buffer, *end = buffer + got;
    const char *newline;
    while (n && (newline = memchr(from, '\n', (size_t)(end - from))) != NULL) {
        long long position = offset + (newline - buffer); /* (at most `last`) */
        while (size <= position && at < n - 1) {
            at++;
            in_look = 0;
            size = sizes[at];
        }
        if (in_look++)
            shared++;
        if (PyList_Append(stamps, PyTuple_GET_ITEM(PyTuple_GET_ITEM(looks, at), 1)) < 0)
            goto failed;
        from = newline + 1;
    }
    PyMem_Free(sizes);
    Py_DECREF(looks);
    return Py_BuildValue("(NNL)", data, stamps, shared);

failed:
    PyMem_Free(sizes);
    Py_DECREF(looks);
    Py_XDECREF(data);
    Py_XDECREF(stamps);
    return NULL;
}

static PyMethodDef module_functions[] = {
    {"read_looked", (PyCFunction)(void (*)(void))read_looked, METH_FASTCALL, read_looked_doc},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef Looker_methods[] = {
    {"set_logs", (PyCFunction)Looker_set_logs, METH_O, set_logs_doc},
    {"set_interval", (PyCFunction)Looker_set_interval, METH_O, set_interval_doc},
    {"take", (PyCFunction)Looker_take, METH_NOARGS, take_doc},
    {"close", (PyCFunction)Looker_close, METH_NOARGS, close_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Looker_getset[] = {
    {"passes", (getter)Looker_counter, NULL, "Passes over the logs made so far.",
     (void *)offsetof(Looker, passes)},
    {"shared", (getter)Looker_counter, NULL,
     "Looks folded into a log's last, its looks full (Python took none for minutes).",
     (void *)offsetof(Looker, shared)},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject LookerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "neurotui.supervisor._looker.Looker",
    .tp_doc = PyDoc_STR("Looks at busy logs on a timer, in a thread outside Python."),
    .tp_basicsize = sizeof(Looker),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = Looker_new,
    .tp_dealloc = (destructor)Looker_dealloc,
    .tp_methods = Looker_methods,
    .tp_getset = Looker_getset,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "neurotui.supervisor._looker",
    .m_doc = PyDoc_STR("The busy logs' looks, in a thread outside Python (see logfollow.py)."),
    .m_size = -1,
    .m_methods = module_functions,
};

PyMODINIT_FUNC
PyInit__looker(void)
{
    if (PyType_Ready(&LookerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&LookerType);
    if (PyModule_AddObject(m, "Looker", (PyObject *)&LookerType) < 0) {
        Py_DECREF(&LookerType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
