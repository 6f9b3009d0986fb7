/* The job's processes' /proc/PID/stat, read and parsed outside Python (host.py, ProcessRows).

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
*/
#define _GNU_SOURCE /* memrchr */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#define STAT_READ 4096 /* as host._read_fields reads */

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
        PyErr_SetString(PyExc_ValueError, "ticks and page must be positive");
        return NULL;
    }
    PyObject *fds = args[0];
    Py_ssize_t n = PyList_GET_SIZE(fds);
    PyObject *out = PyList_New(n);
    if (out == NULL)
        return NULL;
    char buf[STAT_READ];
    for (Py_ssize_t k = 0; k < n; k++) {
        long fd = PyLong_AsLong(PyList_GET_ITEM(fds, k));
        if (fd == -1 && PyErr_Occurred()) {
            Py_DECREF(out);
            return NULL;
        }
        if (fd < 0 || fd > INT_MAX) {
            Py_DECREF(out);
            PyErr_SetString(PyExc_ValueError, "a file descriptor is out of range");
            return NULL;
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
        if (item == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, k, item);
    }
    return out;
}

static PyMethodDef module_functions[] = {
    {"read_stats", (PyCFunction)(void (*)(void))read_stats, METH_FASTCALL, read_stats_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "neurotui.collect._procstat",
    .m_doc = PyDoc_STR("The job's processes' /proc/PID/stat, read outside Python (host.py)."),
    .m_size = -1,
    .m_methods = module_functions,
};

PyMODINIT_FUNC
PyInit__procstat(void)
{
    return PyModule_Create(&module);
}
