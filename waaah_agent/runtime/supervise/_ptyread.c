/* What a PTY has ready, read in one call (see child.py, AgentProcess.read_ready).
 *
 * read_ready(fd, reads, room) -> (bytes, closed)
 *
 * Reads the non-blocking fd until it has nothing more (EAGAIN), at most `reads` times, and
 * stops once `room` bytes or more were read or the buffer (`reads` x 4 KiB: a PTY hands out a
 * few KiB a read) is full. One bytes object, one release of the GIL for all the reads:
 * under a flood a wake-up finds several reads ready, each otherwise a call from Python, a bytes
 * object, a release and a retaking of the GIL, and a join at the end.
 *
 * closed is True once the PTY reported EIO (Linux: the child's side is closed), with what was
 * read before it. A read interrupted by a signal ends the call with what was read (the loop
 * comes back at once: the fd is still ready). Any other error is raised as OSError when nothing
 * was read before it; otherwise what was read is returned and the next call raises it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <unistd.h>

#define PIECE 4096

static PyObject *read_ready(PyObject *self, PyObject *args) {
    (void)self;
    int fd;
    Py_ssize_t reads, room;
    if (!PyArg_ParseTuple(args, "inn:read_ready", &fd, &reads, &room)) return NULL;
    if (reads < 1 || reads > 1024) {
        PyErr_SetString(PyExc_ValueError, "reads must be 1 to 1024");
        return NULL;
    }
    Py_ssize_t cap = reads * PIECE;
    PyObject *out = PyBytes_FromStringAndSize(NULL, cap);
    if (out == NULL) return NULL;
    char *buf = PyBytes_AS_STRING(out);
    Py_ssize_t len = 0, done = 0;
    int closed = 0, err = 0;
    Py_BEGIN_ALLOW_THREADS
    while (done < reads && len < cap && (done == 0 || len < room)) {
        ssize_t n = read(fd, buf + len, (size_t)(cap - len));
        if (n < 0) {
            if (errno == EIO) closed = 1;
            else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) err = errno;
            break;
        }
        if (n == 0) break; /* no more for now (a PTY reports its end as EIO) */
        len += n;
        done++;
    }
    Py_END_ALLOW_THREADS
    if (err && len == 0) {
        Py_DECREF(out);
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    if (_PyBytes_Resize(&out, len) < 0) return NULL;
    return Py_BuildValue("(NO)", out, closed ? Py_True : Py_False);
}

static PyMethodDef METHODS[] = {
    {"read_ready", read_ready, METH_VARARGS,
     "read_ready(fd, reads, room) -> (bytes, closed): what a non-blocking PTY has ready, in one call."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_ptyread",
    .m_doc = "What a PTY has ready, read natively in one call.",
    .m_size = -1,
    .m_methods = METHODS,
};

PyMODINIT_FUNC PyInit__ptyread(void) { return PyModule_Create(&MODULE); }
