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
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_LOOKS 4096 /* a log's, untaken: minutes of output at a look a line */
#define MTIME_SLACK_S 0.05 /* logfollow.MTIME_SLACK_S */

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

typedef struct {
    PyObject_HEAD
    pthread_mutex_t mutex;
    pthread_cond_t cond; /* on CLOCK_MONOTONIC: a clock set back does not hold the looks */
    pthread_t thread;
    int started, stopping;
    double interval_s;
    struct timespec due; /* the next look's time (monotonic) */
    Log *logs;
    Py_ssize_t n_logs;
    Py_ssize_t *grown; /* the logs with looks untaken, in the order first grown */
    Py_ssize_t n_grown;
    unsigned long long passes, shared;
} Looker;

static double
seconds_of(const struct timespec *t)
{
    return (double)t->tv_sec + (double)t->tv_nsec / 1e9;
}

static void
add_seconds(struct timespec *t, double s)
{
    long long ns = t->tv_nsec + (long long)(s * 1e9);
    t->tv_sec += ns / 1000000000LL;
    t->tv_nsec = ns % 1000000000LL;
}

static int
before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* A look at `now` found `log` grown to `size`, written last at `modified_ns`: its stamp, as
   LogFollower._grown gives it (the write's time where it is one, else the look's). */
static void
note(Looker *self, Py_ssize_t index, long long size, long long modified_ns, double now)
{
    Log *log = &self->logs[index];
    double written = (double)modified_ns / 1e9;
    double stamp = modified_ns % 1000000000LL && log->grew_at - MTIME_SLACK_S <= written &&
                           written <= now ? written : now;
    if (!log->changes)
        log->first_write_ns = modified_ns;
    log->last_write_ns = modified_ns;
    log->changes++;
    log->seen = size;
    log->grew_at = now;
    if (log->n_looks == log->room && log->room < MAX_LOOKS) {
        Py_ssize_t room = log->room ? log->room * 2 : 16;
        Look *looks = realloc(log->looks, sizeof(Look) * room);
        if (looks != NULL) {
            log->looks = looks;
            log->room = room;
        }
    }
    if (log->n_looks == log->room) {
        if (log->n_looks == 0)
            return; /* no memory: Python's poll reads the log, stamped then */
        /* Full: the lines of the last look and this one share this one's stamp. */
        log->looks[log->n_looks - 1] = (Look){size, stamp};
        self->shared++;
        return;
    }
    if (log->n_looks == 0)
        self->grown[self->n_grown++] = index;
    log->looks[log->n_looks++] = (Look){size, stamp};
}

/* One pass over the logs, with the mutex held. */
static void
look(Looker *self)
{
    struct timespec wall;
    struct stat status;
    clock_gettime(CLOCK_REALTIME, &wall);
    double now = seconds_of(&wall);
    for (Py_ssize_t i = 0; i < self->n_logs; i++) {
        if (fstat(self->logs[i].fd, &status) != 0 ||
            (long long)status.st_size <= self->logs[i].seen)
            continue; /* (a descriptor Python closed is removed before it closes it) */
        note(self, i, (long long)status.st_size,
             (long long)status.st_mtim.tv_sec * 1000000000LL + status.st_mtim.tv_nsec, now);
    }
    self->passes++;
}

static void *
run(void *arg)
{
    Looker *self = (Looker *)arg;
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
        look(self);
        clock_gettime(CLOCK_MONOTONIC, &self->due);
        add_seconds(&self->due, self->interval_s);
    }
    pthread_mutex_unlock(&self->mutex);
    return NULL;
}

/* What the looks found since the last take (see take_doc); mutex held. */
static PyObject *
take_notes(Looker *self)
{
    PyObject *taken = PyList_New(self->n_grown);
    if (taken == NULL)
        return NULL;
    for (Py_ssize_t g = 0; g < self->n_grown; g++) {
        Log *log = &self->logs[self->grown[g]];
        PyObject *looks = PyList_New(log->n_looks);
        for (Py_ssize_t i = 0; looks != NULL && i < log->n_looks; i++) {
            PyObject *item = Py_BuildValue("(Ld)", log->looks[i].size, log->looks[i].stamp);
            if (item == NULL)
                Py_CLEAR(looks);
            else
                PyList_SET_ITEM(looks, i, item);
        }
        PyObject *entry = looks == NULL ? NULL : Py_BuildValue(
            "(nNLLLd)", self->grown[g], looks, log->changes, log->first_write_ns,
            log->last_write_ns, log->grew_at);
        if (entry == NULL) {
            Py_DECREF(taken);
            return NULL;
        }
        PyList_SET_ITEM(taken, g, entry);
        log->n_looks = 0;
        log->changes = 0;
    }
    self->n_grown = 0;
    return taken;
}

static void
free_logs(Log *logs, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        free(logs[i].looks);
    PyMem_RawFree(logs);
}

static int
start(Looker *self)
{
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous); /* the thread starts with all blocked */
    int failed = pthread_create(&self->thread, NULL, run, self);
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    if (failed) {
        errno = failed;
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    self->started = 1;
    return 0;
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
    pthread_condattr_init(&attributes);
    pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
    pthread_cond_init(&self->cond, &attributes);
    pthread_condattr_destroy(&attributes);
    pthread_mutex_init(&self->mutex, NULL);
    return (PyObject *)self;
}

PyDoc_STRVAR(set_logs_doc,
"set_logs(logs: list[tuple[int, int, float]]) -> list[tuple[...]]\n\n"
"Look at these logs from now on, each a (descriptor, size seen, time last seen grown): what\n"
"the looks found of the logs before is handed back, as take() would (indexes into those).\n"
"An empty list stops the looks.");

static PyObject *
Looker_set_logs(Looker *self, PyObject *arg)
{
    PyObject *sequence = PySequence_Fast(arg, "set_logs takes a list of (fd, seen, grew_at)");
    if (sequence == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(sequence);
    Log *logs = n ? PyMem_RawCalloc(n, sizeof(Log)) : NULL;
    Py_ssize_t *grown = n ? PyMem_RawMalloc(sizeof(Py_ssize_t) * n) : NULL;
    if (n && (logs == NULL || grown == NULL)) {
        PyMem_RawFree(logs);
        PyMem_RawFree(grown);
        Py_DECREF(sequence);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Log *log = &logs[i];
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(sequence, i), "iLd", &log->fd,
                              &log->seen, &log->grew_at)) {
            PyMem_RawFree(logs);
            PyMem_RawFree(grown);
            Py_DECREF(sequence);
            return NULL;
        }
    }
    Py_DECREF(sequence);
    if (!self->started && n && start(self) < 0) {
        PyMem_RawFree(logs);
        PyMem_RawFree(grown);
        return NULL;
    }
    pthread_mutex_lock(&self->mutex);
    PyObject *taken = take_notes(self);
    Log *old = self->logs;
    Py_ssize_t n_old = self->n_logs;
    PyMem_RawFree(self->grown);
    self->logs = logs;
    self->n_logs = n;
    self->grown = grown;
    pthread_cond_signal(&self->cond);
    pthread_mutex_unlock(&self->mutex);
    free_logs(old, n_old);
    return taken;
}

PyDoc_STRVAR(take_doc,
"take() -> list[tuple[int, list[tuple[int, float]], int, int, int, float]]\n\n"
"What the looks found since the last take: for each log they found grown, in the order first\n"
"found, (its index into the logs, each look's (size, stamp), how many looks found it grown,\n"
"the modification times in ns at the first and last of those, and the last one's time).");

static PyObject *
Looker_take(Looker *self, PyObject *Py_UNUSED(ignored))
{
    pthread_mutex_lock(&self->mutex);
    PyObject *notes = take_notes(self);
    pthread_mutex_unlock(&self->mutex);
    return notes;
}

PyDoc_STRVAR(set_interval_doc,
"set_interval(seconds: float) -> None\n\n"
"The time from one pass over the logs to the next (the batch's time).");

static PyObject *
Looker_set_interval(Looker *self, PyObject *arg)
{
    double seconds = PyFloat_AsDouble(arg);
    if (seconds == -1.0 && PyErr_Occurred())
        return NULL;
    pthread_mutex_lock(&self->mutex);
    if (self->interval_s <= 0 && seconds > 0) { /* the first: a pass at once */
        clock_gettime(CLOCK_MONOTONIC, &self->due);
        pthread_cond_signal(&self->cond);
    }
    self->interval_s = seconds;
    pthread_mutex_unlock(&self->mutex);
    Py_RETURN_NONE;
}

static void
stop(Looker *self)
{
    if (!self->started)
        return;
    pthread_mutex_lock(&self->mutex);
    self->stopping = 1;
    pthread_cond_signal(&self->cond);
    pthread_mutex_unlock(&self->mutex);
    Py_BEGIN_ALLOW_THREADS
    pthread_join(self->thread, NULL);
    Py_END_ALLOW_THREADS
    self->started = 0;
}

PyDoc_STRVAR(close_doc, "close() -> None\n\nStop the looks (the thread ends).");

static PyObject *
Looker_close(Looker *self, PyObject *Py_UNUSED(ignored))
{
    stop(self);
    Py_RETURN_NONE;
}

/* A counter of the looker's (`closure`: its offset in the struct), read under the mutex. */
static PyObject *
Looker_counter(Looker *self, void *closure)
{
    pthread_mutex_lock(&self->mutex);
    unsigned long long value = *(unsigned long long *)((char *)self + (size_t)closure);
    pthread_mutex_unlock(&self->mutex);
    return PyLong_FromUnsignedLongLong(value);
}

static void
Looker_dealloc(Looker *self)
{
    stop(self);
    pthread_cond_destroy(&self->cond);
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
"stamp) by size. Raises OSError where the read fails.");

static PyObject *
read_looked(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyList_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "read_looked(fd, offset, most, looks: list)");
        return NULL;
    }
    long fd = PyLong_AsLong(args[0]);
    long long offset = PyLong_AsLongLong(args[1]);
    long long most = PyLong_AsLongLong(args[2]);
    if (PyErr_Occurred())
        return NULL;
    PyObject *looks = args[3];
    Py_ssize_t n = PyList_GET_SIZE(looks);
    long long last = 0;
    for (Py_ssize_t i = 0; i < n; i++) { /* every look a (size, stamp), the last's size */
        PyObject *look = PyList_GET_ITEM(looks, i);
        if (!PyTuple_Check(look) || PyTuple_GET_SIZE(look) != 2) {
            PyErr_SetString(PyExc_TypeError, "a look is a (size, stamp) tuple");
            return NULL;
        }
        last = PyLong_AsLongLong(PyTuple_GET_ITEM(look, 0));
        if (last == -1 && PyErr_Occurred())
            return NULL;
    }
    long long want = last - offset < most ? last - offset : most;
    if (want < 0)
        want = 0;
    PyObject *data = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)want);
    if (data == NULL)
        return NULL;
    char *buffer = PyBytes_AS_STRING(data);
    ssize_t got = 0;
    if (want > 0) {
        Py_BEGIN_ALLOW_THREADS
        got = pread((int)fd, buffer, (size_t)want, (off_t)offset);
        Py_END_ALLOW_THREADS
        if (got < 0) {
            Py_DECREF(data);
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        if (got < want && _PyBytes_Resize(&data, (Py_ssize_t)got) < 0)
            return NULL;
        buffer = PyBytes_AS_STRING(data);
    }
    PyObject *stamps = PyList_New(0);
    if (stamps == NULL) {
        Py_DECREF(data);
        return NULL;
    }
    long long shared = 0;
    Py_ssize_t at = 0;       /* the look that saw the line being stamped whole */
    long long in_look = 0;   /* lines that look saw whole so far */
    long long size = n ? PyLong_AsLongLong(PyTuple_GET_ITEM(PyList_GET_ITEM(looks, 0), 0)) : 0;
    const char *from = buffer, *end = buffer + got;
    const char *newline;
    while (n && (newline = memchr(from, '\n', (size_t)(end - from))) != NULL) {
        long long position = offset + (newline - buffer);
        while (size <= position && at < n - 1) {
            at++;
            in_look = 0;
            size = PyLong_AsLongLong(PyTuple_GET_ITEM(PyList_GET_ITEM(looks, at), 0));
        }
        if (in_look++)
            shared++;
        if (PyList_Append(stamps, PyTuple_GET_ITEM(PyList_GET_ITEM(looks, at), 1)) < 0) {
            Py_DECREF(data);
            Py_DECREF(stamps);
            return NULL;
        }
        from = newline + 1;
    }
    return Py_BuildValue("(NNL)", data, stamps, shared);
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
