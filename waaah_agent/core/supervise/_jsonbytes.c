/* The raw stream as the body of a JSON string, in one native pass (see castjson.py).
 *
 * escape_utf8(data) -> bytes | None
 *
 * For valid UTF-8 (as Python's strict decoder takes it: no overlong forms, no surrogates,
 * nothing above U+10FFFF, no character cut off at the end) it returns the body of the JSON
 * string holding it, spelled exactly as orjson spells the decoded text: the quote and the
 * backslash escaped, \b \t \n \f \r, any other control character as \u00XX (lowercase hex),
 * everything else (DEL and all non-ASCII characters included) as it is. For anything else it
 * returns None, and the caller spells the bytes its own way.
 *
 * Pure: no state, no I/O; the GIL is held throughout. Every write into the output is preceded
 * by a check that the room is there (reserve()).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#if defined(__SSE2__) && defined(__GNUC__)
#include <emmintrin.h>
#define HAVE_SSE2 1
#endif

static const char HEX[] = "0123456789abcdef";

/* For each ASCII byte: 0 if it is copied as it is, else the letter of its short escape, or 'u'
 * for \u00XX. Bytes from 0x80 up are characters' parts: checked, never escaped. */
static char ESCAPE[128];

static void init_tables(void) {
    for (int c = 0; c < 0x20; c++) ESCAPE[c] = 'u';
    ESCAPE['\b'] = 'b';
    ESCAPE['\t'] = 't';
    ESCAPE['\n'] = 'n';
    ESCAPE['\f'] = 'f';
    ESCAPE['\r'] = 'r';
    ESCAPE['"'] = '"';
    ESCAPE['\\'] = '\\';
}

/* The length of the valid UTF-8 character of two to four bytes at s (s[0] >= 0x80), or 0 when
 * no valid character begins there (a lone continuation byte, an overlong form, a surrogate, a
 * code point above U+10FFFF, a character cut off by the end). */
static Py_ssize_t char_length(const unsigned char *s, Py_ssize_t left) {
    unsigned char c = s[0], lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) {
        return (left >= 2 && (s[1] & 0xc0) == 0x80) ? 2 : 0;
    }
    if (c >= 0xe0 && c <= 0xef) {
        if (left < 3) return 0;
        if (c == 0xe0) lo = 0xa0;
        if (c == 0xed) hi = 0x9f;
        return (s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80) ? 3 : 0;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        if (left < 4) return 0;
        if (c == 0xf0) lo = 0x90;
        if (c == 0xf4) hi = 0x8f;
        return (s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 && (s[3] & 0xc0) == 0x80) ? 4 : 0;
    }
    return 0;
}

/* Room for `need` more bytes after `used` in *out (grown by at least half). 0 on success. */
static int reserve(PyObject **out, Py_ssize_t *room, Py_ssize_t used, Py_ssize_t need) {
    if (*room - used >= need) return 0;
    if (need > PY_SSIZE_T_MAX - used) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t grown = *room <= PY_SSIZE_T_MAX / 3 * 2 ? *room + (*room >> 1) : used + need;
    if (grown < used + need) grown = used + need;
    if (_PyBytes_Resize(out, grown) < 0) return -1;
    *room = grown;
    return 0;
}

static PyObject *escape_utf8(PyObject *module, PyObject *arg) {
    (void)module;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *s = (const unsigned char *)view.buf;
    const Py_ssize_t n = view.len;
    if (n > PY_SSIZE_T_MAX / 2) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    /* Agent text needs ~10 % more for its escapes; grown as needed. */
    Py_ssize_t room = n + (n >> 3) + 16;
    PyObject *out = PyBytes_FromStringAndSize(NULL, room);
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    /* Plain bytes are copied a run at a time when an escape ends the run: a short run (most,
     * in agent text: an escape every few dozen bytes) by one or two 16-byte stores, a long one
     * by memcpy. The output keeps SLACK bytes of room beyond the run and its escape. */
    enum { SLACK = 32 };
    Py_ssize_t used = 0, i = 0, run = 0; /* run: where the bytes not yet copied begin */
    char *o = PyBytes_AS_STRING(out);
    while (i < n) {
#ifdef HAVE_SSE2
        /* 16 bytes at a time while none is a control character, a quote, a backslash or a
         * byte of a non-ASCII character (signed: bytes from 0x80 up are below 0x20 too). */
        const __m128i space = _mm_set1_epi8(0x20), quote = _mm_set1_epi8('"'),
                      backslash = _mm_set1_epi8('\\');
        while (i + 16 <= n) {
            __m128i v = _mm_loadu_si128((const __m128i *)(s + i));
            __m128i hit = _mm_or_si128(_mm_cmplt_epi8(v, space),
                                       _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)));
            int bits = _mm_movemask_epi8(hit);
            if (bits) {
                i += __builtin_ctz((unsigned)bits);
                break;
            }
            i += 16;
        }
#endif
        while (i < n && s[i] < 0x80 && !ESCAPE[s[i]]) i++;
        if (i >= n) break;
        unsigned char c = s[i];
        if (c >= 0x80) { /* checked here, copied with the run */
            Py_ssize_t k = char_length(s + i, n - i);
            if (k == 0) {
                Py_DECREF(out);
                PyBuffer_Release(&view);
                Py_RETURN_NONE;
            }
            i += k;
            continue;
        }
        Py_ssize_t plain = i - run;
        /* reserve() checks the room itself; called for every escape (it is not inlined) it
         * cost the escaping a fifth more: called only when the room is short. */
        if (room - used < plain + SLACK) {
            if (reserve(&out, &room, used, plain + SLACK) < 0) {
                PyBuffer_Release(&view);
                return NULL; /* _PyBytes_Resize freed out */
            }
            o = PyBytes_AS_STRING(out);
        }
#ifdef HAVE_SSE2
        if (plain <= 32 && run + 32 <= n) { /* the stores may copy beyond the run: overwritten */
            _mm_storeu_si128((__m128i *)(o + used), _mm_loadu_si128((const __m128i *)(s + run)));
            if (plain > 16)
                _mm_storeu_si128((__m128i *)(o + used + 16), _mm_loadu_si128((const __m128i *)(s + run + 16)));
        } else
#endif
            memcpy(o + used, s + run, (size_t)plain);
        used += plain;
        o[used++] = '\\';
        if (ESCAPE[c] == 'u') {
            o[used++] = 'u';
            o[used++] = '0';
            o[used++] = '0';
            o[used++] = HEX[c >> 4];
            o[used++] = HEX[c & 15];
        } else {
            o[used++] = ESCAPE[c];
        }
        run = ++i;
    }
    Py_ssize_t plain = n - run;
    if (reserve(&out, &room, used, plain) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    memcpy(PyBytes_AS_STRING(out) + used, s + run, (size_t)plain);
    used += plain;
    PyBuffer_Release(&view);
    if (used != room && _PyBytes_Resize(&out, used) < 0) return NULL;
    return out;
}

static PyMethodDef METHODS[] = {
    {"escape_utf8", escape_utf8, METH_O,
     "The body of the JSON string holding valid UTF-8 bytes (as orjson spells it), or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_jsonbytes",
    .m_doc = "The raw stream as the body of a JSON string, natively.",
    .m_size = -1,
    .m_methods = METHODS,
};

PyMODINIT_FUNC PyInit__jsonbytes(void) {
    init_tables();
    return PyModule_Create(&MODULE);
}
