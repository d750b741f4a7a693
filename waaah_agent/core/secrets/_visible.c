/* What a terminal shows of a raw stream, without what stands between its characters, in one
 * native pass (see secretscan.py: ``visible``).
 *
 * visible(data) -> (text, offsets)
 * visible_text(data) -> text
 *
 * ``text``: ``data`` without its separators, spelled as secretscan.SEPARATOR spells them (CSI,
 * an OSC of at most 256 bytes ended by BEL or ST, a charset designation, the other two-byte
 * escapes, CR, BS), and without a sequence left open at its very end (secretscan._OPEN_AT_END,
 * looked for from the last ESC of the last 300 bytes). ``offsets``: for each byte of ``text``,
 * its offset in ``data``, as native unsigned ints (``memoryview(offsets).cast("I")``).
 * ``visible_text`` skips the offsets (most chunks hold no secret to map back).
 *
 * The same result as the Python spelling, byte for byte (tests/unit/test_visible.py checks it
 * on every recorded stream and on generated ones). Pure: no state, no I/O; the GIL is held
 * throughout. Inputs of 4 GiB and more are refused (OverflowError): the caller spells those.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#if defined(__SSE2__) && defined(__GNUC__)
#include <emmintrin.h>
#define HAVE_SSE2 1
#endif

#define ESC 0x1b
#define BEL 0x07
#define OSC_AT_MOST 256
#define OPEN_LOOKS_BACK 300

/* What each byte may be in a sequence (bits), from secretscan.SEPARATOR's classes. */
enum { PARAM = 1, INTERMEDIATE = 2, FINAL = 4, ALNUM = 8, ESCAPE_FINAL = 16, LEAD = 32 };
static unsigned char CLASS[256];

static void init_classes(void) {
    for (int c = 0; c < 256; c++) {
        unsigned char k = 0;
        if (c >= 0x30 && c <= 0x3f) k |= PARAM;        /* [0-?] */
        if (c >= 0x20 && c <= 0x2f) k |= INTERMEDIATE; /* [ -/] */
        if (c >= 0x40 && c <= 0x7e) k |= FINAL;        /* [@-~] */
        if ((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')) k |= ALNUM;
        /* [0-Z\\^-~]: the second byte of a two-byte escape ("[" and "]" open a CSI and an OSC) */
        if ((c >= 0x30 && c <= 0x5a) || c == 0x5c || (c >= 0x5e && c <= 0x7e)) k |= ESCAPE_FINAL;
        if (c == ESC || c == '\r' || c == 0x08) k |= LEAD; /* where a separator may begin */
        CLASS[c] = k;
    }
}

#define IS(c, kind) (CLASS[(unsigned char)(c)] & (kind))

/* The length of the OSC payload run at s[at:end] (bytes other than BEL and ESC), counted up to
 * OSC_AT_MOST + 1 at most. */
static Py_ssize_t osc_payload(const unsigned char *s, Py_ssize_t at, Py_ssize_t end) {
    Py_ssize_t j = at;
    while (j < end && j - at <= OSC_AT_MOST && s[j] != BEL && s[j] != ESC) j++;
    return j - at;
}

/* The length of the separator that starts at s[i] within s[:end], or 0 if none does there. */
static Py_ssize_t separator_at(const unsigned char *s, Py_ssize_t i, Py_ssize_t end) {
    unsigned char b = s[i];
    if (b == '\r' || b == 0x08) return 1;
    if (b != ESC || i + 1 >= end) return 0;
    unsigned char c = s[i + 1];
    if (c == '[') {
        Py_ssize_t j = i + 2;
        while (j < end && IS(s[j], PARAM)) j++;
        while (j < end && IS(s[j], INTERMEDIATE)) j++;
        return (j < end && IS(s[j], FINAL)) ? j + 1 - i : 0;
    }
    if (c == ']') {
        Py_ssize_t p = osc_payload(s, i + 2, end), t = i + 2 + p;
        if (p > OSC_AT_MOST || t >= end) return 0;
        if (s[t] == BEL) return t + 1 - i;
        return (s[t] == ESC && t + 1 < end && s[t + 1] == '\\') ? t + 2 - i : 0;
    }
    if (c == '(' || c == ')') return (i + 2 < end && IS(s[i + 2], ALNUM)) ? 3 : 0;
    return IS(c, ESCAPE_FINAL) ? 2 : 0;
}

/* Where the text ends: at the last ESC of the last OPEN_LOOKS_BACK bytes if what follows it, to
 * the very end, is a sequence left open (ESC alone, a CSI without its final byte, an OSC of at
 * most 256 bytes without its end, a charset designation without its charset). */
static Py_ssize_t text_end(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t low = n > OPEN_LOOKS_BACK ? n - OPEN_LOOKS_BACK : 0, esc = -1;
    for (Py_ssize_t k = n - 1; k >= low; k--) {
        if (s[k] == ESC) {
            esc = k;
            break;
        }
    }
    if (esc < 0 || esc + 1 == n) return esc < 0 ? n : esc;
    unsigned char c = s[esc + 1];
    Py_ssize_t j = esc + 2;
    if (c == '[') {
        while (j < n && IS(s[j], PARAM)) j++;
        while (j < n && IS(s[j], INTERMEDIATE)) j++;
        return j == n ? esc : n;
    }
    if (c == ']') return osc_payload(s, j, n) == n - j && n - j <= OSC_AT_MOST ? esc : n;
    if (c == '(' || c == ')') return j == n ? esc : n;
    return n;
}

/* The index of the first byte from s[i] on (below end) where a separator may begin; end if none. */
static Py_ssize_t next_lead(const unsigned char *s, Py_ssize_t i, Py_ssize_t end) {
#ifdef HAVE_SSE2
    const __m128i esc = _mm_set1_epi8(ESC), cr = _mm_set1_epi8('\r'), bs = _mm_set1_epi8(0x08);
    while (i + 16 <= end) {
        __m128i v = _mm_loadu_si128((const __m128i *)(s + i));
        __m128i hit = _mm_or_si128(_mm_cmpeq_epi8(v, esc), _mm_or_si128(_mm_cmpeq_epi8(v, cr), _mm_cmpeq_epi8(v, bs)));
        int bits = _mm_movemask_epi8(hit);
        if (bits) return i + __builtin_ctz((unsigned)bits);
        i += 16;
    }
#endif
    while (i < end && !IS(s[i], LEAD)) i++;
    return i;
}

/* The shown bytes of s[:end] into text (and, if where is not NULL, their offsets); their count. */
static Py_ssize_t strip(const unsigned char *restrict s, Py_ssize_t end, unsigned char *restrict text,
                        unsigned int *restrict where) {
    Py_ssize_t used = 0, i = 0;
    while (i < end) {
        Py_ssize_t lead = next_lead(s, i, end), len;
        if (lead > i) { /* shown as it is */
            memcpy(text + used, s + i, (size_t)(lead - i));
            if (where != NULL)
                for (Py_ssize_t k = i; k < lead; k++) where[used + (k - i)] = (unsigned int)k;
            used += lead - i;
            i = lead;
        }
        if (i >= end) break;
        if ((len = separator_at(s, i, end)) > 0) {
            i += len;
        } else { /* a lead that begins no separator is shown */
            if (where != NULL) where[used] = (unsigned int)i;
            text[used++] = s[i++];
        }
    }
    return used;
}

static PyObject *shown(PyObject *module, PyObject *arg, int with_offsets) {
    (void)module;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *s = (const unsigned char *)view.buf;
    const Py_ssize_t n = view.len;
    if ((unsigned long long)n > (unsigned long long)UINT_MAX ||
        (size_t)n > (size_t)PY_SSIZE_T_MAX / sizeof(unsigned int)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_OverflowError, "visible: input too large");
        return NULL;
    }
    /* used <= n: the text and the offsets always have room. */
    PyObject *text = PyBytes_FromStringAndSize(NULL, n), *offsets = NULL;
    if (text != NULL && with_offsets)
        offsets = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(unsigned int));
    if (text == NULL || (with_offsets && offsets == NULL)) {
        Py_XDECREF(text);
        PyBuffer_Release(&view);
        return NULL;
    }
    Py_ssize_t used = strip(s, text_end(s, n), (unsigned char *)PyBytes_AS_STRING(text),
                            offsets != NULL ? (unsigned int *)PyBytes_AS_STRING(offsets) : NULL);
    PyBuffer_Release(&view);
    if (_PyBytes_Resize(&text, used) < 0) {
        Py_XDECREF(offsets);
        return NULL;
    }
    if (offsets == NULL) return text;
    if (_PyBytes_Resize(&offsets, used * (Py_ssize_t)sizeof(unsigned int)) < 0) {
        Py_DECREF(text);
        return NULL;
    }
    PyObject *pair = PyTuple_Pack(2, text, offsets);
    Py_DECREF(text);
    Py_DECREF(offsets);
    return pair;
}

static PyObject *visible(PyObject *module, PyObject *arg) { return shown(module, arg, 1); }
static PyObject *visible_text(PyObject *module, PyObject *arg) { return shown(module, arg, 0); }

static PyMethodDef METHODS[] = {
    {"visible", visible, METH_O,
     "(the bytes a terminal shows of the data, each one's offset in it as native unsigned ints)."},
    {"visible_text", visible_text, METH_O, "The bytes a terminal shows of the data (visible's first half)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_visible",
    .m_doc = "What a terminal shows of a raw stream, natively.",
    .m_size = -1,
    .m_methods = METHODS,
};

PyMODINIT_FUNC PyInit__visible(void) {
    init_classes();
    return PyModule_Create(&MODULE);
}
