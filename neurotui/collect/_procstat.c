/* The job's processes' /proc/PID/stat, and the host's /proc/stat CPU lines, read and parsed
outside Python (host.py: ProcessRows, HostSampler).

The supervisor samples every process of the job each second, for days: 33 at 32 ranks,
hundreds with DataLoader workers. In Python a process's sample cost about 38,000
instructions, most of them the stat line's split into 38 bytes objects, their int()s and the
pread's call; here one call reads and parses all of a sample's files.

read_stats(fds, ticks, page) -> list

  fds    the stat files, kept open by ProcessRows (ints)
  ticks  clock ticks a second (SC_CLK_TCK), page: bytes a page (SC_PAGE_SIZE)

Each file is read again from its start (pread). Its item in the list is what
host._stat_fields makes of the line, (name, ppid, cpu_s, started, rss, cpu_num), by the same
arithmetic; None where the read failed (the process ended: ESRCH, or the descriptor is
bad); and the bytes read where the line is not as this parser expects (a field int() reads
and it does not, too few fields), for Python to parse or refuse as it always did.

cpu_times(data, fields, ticks) -> list | None

  /proc/stat as read (HostSampler._read): each CPU's first `fields` time fields in seconds
  (float(value) / ticks), as HostSampler._cpu_times makes them; None where a line is not
  one this parser reads (a field not plain digits), for Python to parse.

busy_shares(before, now) -> list

  host.busy_percent of each CPU's two readings (lists of floats), by the same float
  operations in the same order, psutil's: on 128 CPUs (a trn1.32xlarge) the host's sample
  cost about 1 ms a second in Python, against 38 us on 2.

Its callers' edge cases (issue #63): read_stats reads a copy of its list of descriptors (an
int's __index__ is Python code, which could change the caller's list), each checked to fit
an int; cpu_times takes 1 to MAX_FIELDS fields; busy_shares runs no Python code between its
checks of the lists and its reads of them.
*/
#define _GNU_SOURCE /* memrchr */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <math.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#define STAT_READ 4096 /* as host._read_fields reads */
#define MAX_FIELDS 64  /* a CPU line's time fields read (the kernel writes 10) */

/* The fields host._stat_fields takes, counted from the state (fields[0], field 3 of
   proc(5)): ppid, utime, stime, starttime, rss, processor. */
enum { F_PPID = 1, F_UTIME = 11, F_STIME = 12, F_START = 19, F_RSS = 21, F_CPU = 36,
       F_LAST = 37 };

static inline int
is_space(char c)
{
    /* bytes.split()'s whitespace (the kernel writes spaces and a newline) */
    return c == ' ' || (c >= '\t' && c <= '\r');
}

/* A decimal of at most 18 digits with an optional sign (what the kernel prints), into *out;
   0 where the piece is anything else (int() may read it: then Python does). */
static int
read_int(const char *s, Py_ssize_t n, long long *out)
{
    Py_ssize_t i = 0;
    int negative = 0;
    if (n > 0 && (s[0] == '-' || s[0] == '+')) {
        negative = s[0] == '-';
        i = 1;
    }
    if (n - i < 1 || n - i > 18)
        return 0;
    long long value = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        value = value * 10 + (s[i] - '0');
    }
    *out = negative ? -value : value;
    return 1;
}

/* The line's tuple; Py_None (borrowed, increfed) where it is not a line this parser reads,
   for the caller to hand back the bytes instead; NULL on an error (memory). */
static PyObject *
parse(const char *buf, Py_ssize_t n, long ticks, long page)
{
    const char *open = memchr(buf, '(', (size_t)n);
    const char *close = memrchr(buf, ')', (size_t)n);
    if (open == NULL || close == NULL || close < open)
        Py_RETURN_NONE;
    /* The fields' pieces, after ") " as Python slices them. */
    const char *starts[F_LAST];
    Py_ssize_t lengths[F_LAST];
    int count = 0;
    Py_ssize_t i = (close - buf) + 2;
    while (i < n && count < F_LAST) {
        while (i < n && is_space(buf[i]))
            i++;
        if (i >= n)
            break;
        Py_ssize_t start = i;
        while (i < n && !is_space(buf[i]))
            i++;
        starts[count] = buf + start;
        lengths[count++] = i - start;
    }
    if (count <= F_RSS)
        Py_RETURN_NONE;
    long long ppid, utime, stime, started, rss, cpu_num = -1;
    if (!read_int(starts[F_PPID], lengths[F_PPID], &ppid) ||
        !read_int(starts[F_UTIME], lengths[F_UTIME], &utime) ||
        !read_int(starts[F_STIME], lengths[F_STIME], &stime) ||
        !read_int(starts[F_START], lengths[F_START], &started) ||
        !read_int(starts[F_RSS], lengths[F_RSS], &rss) ||
        (count > F_CPU && !read_int(starts[F_CPU], lengths[F_CPU], &cpu_num)))
        Py_RETURN_NONE;
    long long cpu_ticks = utime + stime; /* both under 10^18: no overflow */
    if (cpu_ticks > (1LL << 53) || cpu_ticks < -(1LL << 53) ||
        rss > LLONG_MAX / page || rss < LLONG_MIN / page)
        Py_RETURN_NONE; /* not exactly a double, or an int past 64 bits: Python's */
    PyObject *line = PyTuple_New(6);
    if (line == NULL)
        return NULL;
    /* (int + int) / int in Python is the quotient correctly rounded: both exact doubles. */
    PyObject *items[6] = {
        PyUnicode_DecodeUTF8(open + 1, close - open - 1, "replace"),
        PyLong_FromLongLong(ppid),
        PyFloat_FromDouble((double)cpu_ticks / (double)ticks),
        PyLong_FromLongLong(started),
        PyLong_FromLongLong(rss * page),
        count > F_CPU ? PyLong_FromLongLong(cpu_num) : Py_NewRef(Py_None),
    };
    int failed = 0;
    for (int k = 0; k < 6; k++) {
        failed |= items[k] == NULL;
        PyTuple_SET_ITEM(line, k, items[k]); /* (a NULL item is left by Py_DECREF) */
    }
    if (failed) {
        Py_DECREF(line);
        return NULL;
    }
    return line;
}

PyDoc_STRVAR(read_stats_doc,
"read_stats(fds, ticks, page) -> list\n\n"
"Each kept-open /proc/PID/stat read again and parsed as host._stat_fields parses it: a\n"
"tuple, None where it could not be read, the bytes where Python is to parse them.");

static PyObject *
read_stats(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "read_stats(fds: list[int], ticks: int, page: int)");
        return NULL;
    }
    long ticks = PyLong_AsLong(args[1]);
    long page = PyLong_AsLong(args[2]);
    if ((ticks == -1 || page == -1) && PyErr_Occurred())
        return NULL;
    if (ticks <= 0 || page <= 0) {
        PyErr_Format(PyExc_ValueError, "read_stats: ticks %ld, page %ld: both must be "
                     "positive", ticks, page);
        return NULL;
    }
    PyObject *fds = PyList_AsTuple(args[0]);
    if (fds == NULL)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(fds);
    PyObject *out = PyList_New(n);
    if (out == NULL) {
        Py_DECREF(fds);
        return NULL;
    }
    char buf[STAT_READ];
    for (Py_ssize_t k = 0; k < n; k++) {
        long fd = PyLong_AsLong(PyTuple_GET_ITEM(fds, k));
        if (fd == -1 && PyErr_Occurred())
            goto failed;
        if (fd < 0 || fd > INT_MAX) {
            PyErr_Format(PyExc_ValueError, "read_stats: file descriptor %ld is out of range "
                         "(0 to %d)", fd, INT_MAX);
            goto failed;
        }
        /* With the GIL held: the kernel writes a stat file from memory, in microseconds, and
           what else runs in the supervisor meanwhile (the looker's thread) does not take it. */
        ssize_t got;
        do {
            got = pread((int)fd, buf, sizeof buf, 0);
        } while (got < 0 && errno == EINTR);
        PyObject *item;
        if (got < 0) {
            item = Py_NewRef(Py_None); /* as _read_fields: an OSError is an ended process */
        } else {
            item = parse(buf, got, ticks, page);
            if (item == Py_None) {
                Py_DECREF(item);
                item = PyBytes_FromStringAndSize(buf, got);
            }
        }
        if (item == NULL)
            goto failed;
        PyList_SET_ITEM(out, k, item);
    }
    Py_DECREF(fds);
    return out;
failed:
    Py_DECREF(fds);
    Py_DECREF(out);
    return NULL;
}


/* -- the host's CPU lines ------------------------------------------------------------------ */

PyDoc_STRVAR(cpu_times_doc,
"cpu_times(data, fields, ticks) -> list | None\n\n"
"Each CPU line of /proc/stat (after the first, all CPUs') as HostSampler._cpu_times reads\n"
"it: its first `fields` time fields in seconds; None where Python is to read them.");

static PyObject *
cpu_times(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "cpu_times(data: bytes, fields: int, ticks: int)");
        return NULL;
    }
    long fields = PyLong_AsLong(args[1]);
    long ticks = PyLong_AsLong(args[2]);
    if ((fields == -1 || ticks == -1) && PyErr_Occurred())
        return NULL;
    if (fields <= 0 || fields > MAX_FIELDS || ticks <= 0) {
        PyErr_Format(PyExc_ValueError, "cpu_times: fields %ld, ticks %ld: fields 1 to %d, "
                     "ticks positive", fields, ticks, MAX_FIELDS);
        return NULL;
    }
    const char *data = PyBytes_AS_STRING(args[0]);
    Py_ssize_t n = PyBytes_GET_SIZE(args[0]);
    const char *end = data + n;
    const char *line = memchr(data, '\n', (size_t)n); /* the first line: all CPUs' */
    PyObject *cpus = PyList_New(0);
    if (cpus == NULL)
        return NULL;
    while (line != NULL && (line += 1) < end) {
        const char *stop = memchr(line, '\n', (size_t)(end - line));
        if (stop == NULL)
            stop = end;
        if (stop - line < 3 || memcmp(line, "cpu", 3) != 0)
            break; /* past the CPU lines */
        PyObject *values = PyList_New(fields);
        if (values == NULL)
            goto failed;
        const char *at = line;
        /* The line's first piece is its name (cpuN): the fields follow it. */
        for (long k = -1; k < fields; k++) {
            while (at < stop && is_space(*at))
                at++;
            const char *piece = at;
            while (at < stop && !is_space(*at))
                at++;
            if (k < 0)
                continue;
            long long value;
            /* Past 15 digits a tick count may not be exactly a double: Python's then. */
            if (at - piece > 15 || !read_int(piece, at - piece, &value) || *piece == '-' ||
                *piece == '+') {
                Py_DECREF(values);
                Py_DECREF(cpus);
                Py_RETURN_NONE; /* too few fields too: Python's rule (None) then */
            }
            /* float(value) / ticks: both exact doubles, the quotient correctly rounded. */
            PyObject *seconds = PyFloat_FromDouble((double)value / (double)ticks);
            if (seconds == NULL) {
                Py_DECREF(values);
                goto failed;
            }
            PyList_SET_ITEM(values, k, seconds);
        }
        int appended = PyList_Append(cpus, values);
        Py_DECREF(values);
        if (appended < 0)
            goto failed;
        line = stop < end ? stop : NULL;
    }
    return cpus;
failed:
    Py_DECREF(cpus);
    return NULL;
}

/* The sum of a CPU's positive changes as Python's sum() adds the deltas busy_percent makes
   (floats, and int 0 where a field did not grow: which add nothing), in their order. */
static double
python_sum(const double *deltas, long count)
{
    double total = 0.0;
#if PY_VERSION_HEX >= 0x030C0000
    double compensation = 0.0;
#endif
    int any = 0;
    for (long k = 0; k < count; k++) {
        double x = deltas[k];
        if (x == 0.0)
            continue;
        if (!any) { /* 0 + x: sum()'s first float */
            total = x;
            any = 1;
            continue;
        }
#if PY_VERSION_HEX >= 0x030C0000
        /* Python 3.12's sum(): Neumaier's compensated summation of floats. */
        double t = total + x;
        if (fabs(total) >= fabs(x))
            compensation += (total - t) + x;
        else
            compensation += (x - t) + total;
        total = t;
#else
        total += x;
#endif
    }
#if PY_VERSION_HEX >= 0x030C0000
    if (compensation != 0.0 && isfinite(compensation))
        total += compensation;
#endif
    return total;
}

/* round(x, 1) as Python's float rounds: to the nearest of the decimal string dtoa makes. */
static PyObject *
rounded_to_tenths(double x)
{
    char *text = PyOS_double_to_string(x, 'f', 1, 0, NULL);
    if (text == NULL)
        return NULL;
    double value = PyOS_string_to_double(text, NULL, NULL);
    PyMem_Free(text);
    if (value == -1.0 && PyErr_Occurred())
        return NULL;
    return PyFloat_FromDouble(value);
}

PyDoc_STRVAR(busy_shares_doc,
"busy_shares(before, now) -> list\n\n"
"host.busy_percent of each CPU's two readings, by its float operations in its order.");

static PyObject *
busy_shares(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyList_Check(args[0]) || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "busy_shares(before: list, now: list)");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(args[0]);
    if (PyList_GET_SIZE(args[1]) != n) {
        PyErr_SetString(PyExc_ValueError, "before and now hold different counts of CPUs");
        return NULL;
    }
    PyObject *shares = PyList_New(n);
    if (shares == NULL)
        return NULL;
    /* (Nothing below runs Python code, so the lists are as checked: floats are made from
       their free list or the object allocator, which starts no garbage collection.) */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyList_GET_ITEM(args[0], i), *b = PyList_GET_ITEM(args[1], i);
        if (!PyList_Check(a) || !PyList_Check(b) || PyList_GET_SIZE(a) != PyList_GET_SIZE(b)
            || PyList_GET_SIZE(a) < 4 || PyList_GET_SIZE(a) > 64) {
            PyErr_SetString(PyExc_ValueError, "a CPU's readings are not two lists of 4 to 64 "
                            "fields alike");
            goto failed;
        }
        long count = (long)PyList_GET_SIZE(a);
        double deltas[64];
        for (long k = 0; k < count; k++) {
            PyObject *x = PyList_GET_ITEM(a, k), *y = PyList_GET_ITEM(b, k);
            if (!PyFloat_CheckExact(x) || !PyFloat_CheckExact(y)) {
                PyErr_SetString(PyExc_TypeError, "a CPU's time fields are floats");
                goto failed;
            }
            double before = PyFloat_AS_DOUBLE(x), now = PyFloat_AS_DOUBLE(y);
            deltas[k] = now > before ? now - before : 0.0; /* max(0, now - before) */
        }
        double total = python_sum(deltas, count);
        if (count > 8)
            total -= deltas[8]; /* guest: in user already */
        if (count > 9)
            total -= deltas[9]; /* guest_nice: in nice already */
        double busy = total - deltas[3];
        if (count > 4)
            busy -= deltas[4]; /* iowait */
        PyObject *share = total == 0.0 ? PyFloat_FromDouble(0.0)  /* ZeroDivisionError */
                                       : rounded_to_tenths(busy / total * 100);
        if (share == NULL)
            goto failed;
        PyList_SET_ITEM(shares, i, share);
    }
    return shares;
failed:
    Py_DECREF(shares);
    return NULL;
}

static PyMethodDef module_functions[] = {
    {"read_stats", (PyCFunction)(void (*)(void))read_stats, METH_FASTCALL, read_stats_doc},
    {"cpu_times", (PyCFunction)(void (*)(void))cpu_times, METH_FASTCALL, cpu_times_doc},
    {"busy_shares", (PyCFunction)(void (*)(void))busy_shares, METH_FASTCALL, busy_shares_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "neurotui.collect._procstat",
    .m_doc = PyDoc_STR("/proc's stat files, read outside Python (collect/host.py)."),
    .m_size = -1,
    .m_methods = module_functions,
};

PyMODINIT_FUNC
PyInit__procstat(void)
{
    return PyModule_Create(&module);
}
