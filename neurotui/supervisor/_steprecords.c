/* The step records of a busy log's lines, made outside Python (steprecorder.py, _record_native).

At 32 ranks x 10 lines a second, what the supervisor did with a step line of a shape it had
learnt (steplog._ShapeMemo: each figure's place in every line of the shape) was most of its
cost: the figures' pieces cut out and read by int() and float() (about 6,400 instructions a
line), then StepRecorder._record_parsed's loop over them (the rank's last step, a line drawn
again for its step, the tests msgspec needs) and a StepRecord made (about 7,800 more). Here one
call reads a run of one shape's lines at those places and makes their records, with the same
rules in the same order as _record_parsed, which stays as the way where this module was not
built (and where a line is not as this call expects: it stops there, and says so).

record_steps(lines, stamps, start, end, places, rank, skip, last, floor, attempt, make,
             steps, run_steps, run_times, after_steps) -> (index, why, value)

  lines, stamps  one log's lines (str) and their stamps (float), read from `start` to `end`
  places         8 ints: the (start, end) of the step, rank, samples and loss in each line
                 of the run's shape, (-1, -1) where it prints none (steplog.StepFigures)
  rank           the rank these lines are recorded under: an int, or None before a line's
                 rank is known (the shape prints one)
  skip           whether that rank's lines are not recorded (the probe times it)
  last, floor    its last step recorded (None: none), and the step up to which it was
                 recorded before a resume (None: no resume)
  attempt, make  the attempt's number; StepRecord, the record's type
  steps          the records made are appended to it; run_steps and run_times, each
                 record's step and stamp (for the rank's last step and the stall watch)
  after_steps    None, or (a placed log's lines) each line's automatic probe step, an int
                 or None, given to its record as `after_step`

It returns where it stopped and why: (end, DONE, None); (i, NEW_RANK, r) where line i prints
rank r, not `rank` (line i not taken: Python looks r up and calls again); (i, PYTHON, None)
where line i is to be read by Python (a figure int() or float() reads but this reader does
not, a figure NaN, infinite or past 64 bits, which the writer's own encoder writes, or a
negative count of samples, which steplog's rule leaves out of the step: a bad field drops
the field, not the step). A line taken is one whose record was made, or one skipped as
_record_parsed skips it.

Its callers' edge cases (issue #63): places are checked ((start, end) with 0 <= start <= end,
or (-1, -1): a wrapped pair read outside the line), and `lines` and `stamps` are read again at
each line, each held while it is used: `make` is Python code, which may change them.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <limits.h>
#include <math.h>

enum { DONE = 0, NEW_RANK = 1, PYTHON = 2 };

#define INT_DIGITS_MAX 18   /* below 2**63 whatever the digits: no overflow to test */
#define FLOAT_CHARS_MAX 64  /* steplog._direct_reader's longest float piece */

static PyObject *SRC_LOG, *FROM_LINE, *UNSET, *NO_PHASES;

/* line[start:end] as int() reads it where it is an optional sign and 1 to 18 ASCII digits
   (every piece of our runner's lines and plain logs); 0 where it is something else int()
   may still read (spaces, underscores, other digits: Python reads the line then). */
static int
read_count(int kind, const void *data, Py_ssize_t start, Py_ssize_t end, long long *out)
{
    int negative = 0;
    if (start < end) {
        Py_UCS4 c = PyUnicode_READ(kind, data, start);
        if (c == '-' || c == '+') {
            negative = c == '-';
            start++;
        }
    }
    if (end - start < 1 || end - start > INT_DIGITS_MAX)
        return 0;
    long long value = 0;
    for (Py_ssize_t i = start; i < end; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c < '0' || c > '9')
            return 0;
        value = value * 10 + (c - '0');
    }
    *out = negative ? -value : value;
    return 1;
}

/* line[start:end] as float() reads it, where it is made of ASCII digits, signs, dots and
   exponents only (float() strips spaces and takes underscores first, then reads what is
   left with PyOS_string_to_double, as here); 0 where it is not so, or not finite. */
static int
read_number(int kind, const void *data, Py_ssize_t start, Py_ssize_t end, double *out)
{
    char text[FLOAT_CHARS_MAX + 1];
    Py_ssize_t n = end - start;
    if (n < 1 || n > FLOAT_CHARS_MAX)
        return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, start + i);
        if (!((c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' || c == 'e' ||
              c == 'E'))
            return 0;
        text[i] = (char)c;
    }
    text[n] = '\0';
    char *stop = NULL;
    double value = PyOS_string_to_double(text, &stop, NULL);
    if (value == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (stop != text + n || !isfinite(value))
        return 0;
    *out = value;
    return 1;
}

/* An int argument (or None: `*given` 0) as a long long; 0 where it is past 64 bits. */
static int
optional_count(PyObject *obj, long long *out, int *given)
{
    *given = obj != Py_None;
    if (!*given)
        return 1;
    int overflow = 0;
    *out = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow || (*out == -1 && PyErr_Occurred()) || *out == LLONG_MIN) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

static PyObject *
stopped(Py_ssize_t index, int why, PyObject *value)
{
    if (value == NULL && PyErr_Occurred())
        return NULL;  /* (a rank's int not made: no memory) */
    return Py_BuildValue("(niN)", index, why, value == NULL ? Py_NewRef(Py_None) : value);
}

PyDoc_STRVAR(record_steps_doc,
"record_steps(lines, stamps, start, end, places, rank, skip, last, floor, attempt, make,\n"
"             steps, run_steps, run_times, after_steps) -> (index, why, value)\n\n"
"The records of a run of one learnt shape's step lines, as StepRecorder._record_parsed makes\n"
"them (see the module's comment).");

static PyObject *
record_steps(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 15) {
        PyErr_SetString(PyExc_TypeError, "record_steps takes 15 arguments");
        return NULL;
    }
    PyObject *after_steps = args[14];
    PyObject *lines = args[0], *stamps = args[1], *places = args[4], *rank_obj = args[5];
    PyObject *attempt = args[9], *make = args[10];
    PyObject *steps = args[11], *run_steps = args[12], *run_times = args[13];
    if (!PyList_CheckExact(lines) || !PyList_CheckExact(stamps) || !PyList_CheckExact(steps) ||
        !PyList_CheckExact(run_steps) || !PyList_CheckExact(run_times) ||
        !PyTuple_CheckExact(places) || PyTuple_GET_SIZE(places) != 8 ||
        (after_steps != Py_None && !PyList_CheckExact(after_steps))) {
        PyErr_SetString(PyExc_TypeError,
                        "record_steps: lists, a tuple of 8 places, and a list or None");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[2]), end = PyLong_AsSsize_t(args[3]);
    if ((start == -1 || end == -1) && PyErr_Occurred())
        return NULL;
    if (start < 0 || end > PyList_GET_SIZE(lines) || end > PyList_GET_SIZE(stamps)) {
        PyErr_SetString(PyExc_IndexError, "record_steps: start or end past the lines");
        return NULL;
    }
    Py_ssize_t at[8];
    for (int k = 0; k < 8; k++) {
        at[k] = PyLong_AsSsize_t(PyTuple_GET_ITEM(places, k));
        if (at[k] == -1 && PyErr_Occurred())
            return NULL;
    }
    for (int k = 0; k < 8; k += 2) /* (no end - start below can wrap) */
        if (!(at[k] == -1 && at[k + 1] == -1) && !(0 <= at[k] && at[k] <= at[k + 1])) {
            PyErr_Format(PyExc_ValueError,
                         "record_steps: place %d is (%zd, %zd): a (start, end) with 0 <= start "
                         "<= end, or (-1, -1)", k / 2, at[k], at[k + 1]);
            return NULL;
        }
    const int has_step = at[0] >= 0, has_rank = at[2] >= 0, has_samples = at[4] >= 0,
              has_loss = at[6] >= 0;
    int skip = PyObject_IsTrue(args[6]);
    if (skip < 0)
        return NULL;
    long long rank = 0, last = 0, floor = 0;
    int has_rank_now, has_last, has_floor;
    if (!optional_count(rank_obj, &rank, &has_rank_now) ||
        !optional_count(args[7], &last, &has_last) ||
        !optional_count(args[8], &floor, &has_floor))
        return stopped(start, PYTHON, NULL);
    if (!has_rank_now && !has_rank) {
        PyErr_SetString(PyExc_ValueError, "record_steps: no rank, and the lines print none");
        return NULL;
    }

    for (Py_ssize_t i = start; i < end; i++) {
        if (i >= PyList_GET_SIZE(lines) || i >= PyList_GET_SIZE(stamps) ||
            (after_steps != Py_None && i >= PyList_GET_SIZE(after_steps))) {
            PyErr_SetString(PyExc_RuntimeError, "record_steps: the lines changed under it");
            return NULL;
        }
        PyObject *line = PyList_GET_ITEM(lines, i), *stamp = PyList_GET_ITEM(stamps, i);
        if (!PyUnicode_CheckExact(line) || !PyFloat_CheckExact(stamp))
            return stopped(i, PYTHON, NULL);
        /* Held to the line's end: `make` may take them out of their lists. */
        Py_INCREF(line);
        Py_INCREF(stamp);
        PyObject *result = NULL; /* where the call stops at this line: its answer */
        int stop = 1;
        Py_ssize_t length = PyUnicode_GET_LENGTH(line);
        const int kind = PyUnicode_KIND(line);
        const void *data = PyUnicode_DATA(line);
        long long printed, step;
        double samples = 0.0, loss = 0.0;
        for (int k = 1; k < 8; k += 2)
            if (at[k] > length) {
                result = stopped(i, PYTHON, NULL);
                goto release;
            }
        if (has_rank) {
            if (!read_count(kind, data, at[2], at[3], &printed)) {
                result = stopped(i, PYTHON, NULL);
                goto release;
            }
            if (!has_rank_now || printed != rank) {
                result = stopped(i, NEW_RANK, PyLong_FromLongLong(printed));
                goto release;
            }
        }
        stop = 0;
        if (skip)
            goto release;
        if (has_step) {
            if (!read_count(kind, data, at[0], at[1], &step)) {
                stop = 1;
                result = stopped(i, PYTHON, NULL);
                goto release;
            }
            if ((has_last && step == last) || (has_floor && step <= floor))
                goto release; /* a line drawn again for its step; or recorded before a resume */
        } else {
            if (has_last && last >= LLONG_MAX - 1) {
                stop = 1;
                result = stopped(i, PYTHON, NULL);
                goto release;
            }
            step = (has_last ? last : 0) + 1;
            /* (_record_parsed tests no floor for a step it counts on) */
        }
        if ((has_samples && (!read_number(kind, data, at[4], at[5], &samples) || samples < 0)) ||
            (has_loss && !read_number(kind, data, at[6], at[7], &loss)) ||
            !isfinite(PyFloat_AS_DOUBLE(stamp))) {
            stop = 1;
            result = stopped(i, PYTHON, NULL);
            goto release;
        }

        /* (the record's rank is `rank` as given: a record is made only where it is an int,
           and each line of another rank stops the call above) */
        PyObject *step_obj = PyLong_FromLongLong(step);
        PyObject *samples_obj = has_samples ? PyFloat_FromDouble(samples) : Py_NewRef(Py_None);
        PyObject *loss_obj = has_loss ? PyFloat_FromDouble(loss) : Py_NewRef(Py_None);
        PyObject *record = NULL;
        if (step_obj != NULL && samples_obj != NULL && loss_obj != NULL) {
            /* StepRecord(t, rank, step, samples, loss, dt, phases, src, attempt[, out, err,
               samples_from[, after_step]]): session/steprecord.py's STEP_RECORD_FIELDS (out
               and err unset; samples_from unset, not null, where the line printed no samples;
               after_step where the line was placed) */
            PyObject *after = after_steps == Py_None ? Py_None
                                                     : PyList_GET_ITEM(after_steps, i);
            PyObject *fields[13] = {
                stamp, rank_obj, step_obj, samples_obj, loss_obj, Py_None, NO_PHASES, SRC_LOG,
                attempt, UNSET, UNSET, has_samples ? FROM_LINE : UNSET, after};
            Py_INCREF(after); /* (held through the call: `make` may change the list) */
            record = PyObject_Vectorcall(make, fields,
                                         after != Py_None ? 13 : has_samples ? 12 : 9, NULL);
            Py_DECREF(after);
        }
        Py_XDECREF(samples_obj);
        Py_XDECREF(loss_obj);
        if (record == NULL) {
            Py_XDECREF(step_obj);
            stop = 1; /* (the error raised) */
            goto release;
        }
        int failed = PyList_Append(steps, record) || PyList_Append(run_steps, step_obj) ||
                     PyList_Append(run_times, stamp);
        Py_DECREF(record);
        Py_DECREF(step_obj);
        if (failed) {
            stop = 1;
            goto release;
        }
        last = step;
        has_last = 1;
    release:
        Py_DECREF(line);
        Py_DECREF(stamp);
        if (stop)
            return result;
    }
    return stopped(end, DONE, NULL);
}

static PyMethodDef module_functions[] = {
    {"record_steps", (PyCFunction)(void (*)(void))record_steps, METH_FASTCALL,
     record_steps_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "neurotui.supervisor._steprecords",
    .m_doc = PyDoc_STR("A busy log's step records, made outside Python (see logfollow.py)."),
    .m_size = -1,
    .m_methods = module_functions,
};

PyMODINIT_FUNC
PyInit__steprecords(void)
{
    SRC_LOG = PyUnicode_InternFromString("log");
    FROM_LINE = PyUnicode_InternFromString("line");
    if (SRC_LOG == NULL || FROM_LINE == NULL)
        return NULL;
    /* msgspec's UNSET (a samples_from not given where an after_step is) and the record's
       phases where it has none, as session/steprecord.py has them */
    PyObject *record_module = PyImport_ImportModule("neurotui.session.steprecord");
    if (record_module == NULL)
        return NULL;
    UNSET = PyObject_GetAttrString(record_module, "UNSET");
    NO_PHASES = PyObject_GetAttrString(record_module, "NO_PHASES");
    Py_DECREF(record_module);
    if (UNSET == NULL || NO_PHASES == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddIntConstant(m, "DONE", DONE) < 0 ||
        PyModule_AddIntConstant(m, "NEW_RANK", NEW_RANK) < 0 ||
        PyModule_AddIntConstant(m, "PYTHON", PYTHON) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
