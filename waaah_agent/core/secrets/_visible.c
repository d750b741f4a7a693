/* What a terminal shows of a raw stream, without what stands between its characters, in one
 * native pass (see secretscan.py: ``visible``).
 *
 * visible(data) -> (text, offsets)
 * visible_text(data) -> text
 *
 * ``text``: ``data`` without its separators, spelled as separators.SEPARATOR spells them (CSI,
 * a string sequence (OSC, DCS, SOS, PM, APC) of at most 256 bytes ended by BEL or ST, a charset
 * designation, the other two-byte escapes, CR, BS, the C0 controls a terminal ignores, and the
 * UTF-8 characters that take no cell: zero widths, combining marks, separators.INVISIBLE), and
 * without a sequence left open at its very end (separators.OPEN_AT_END, looked for from the last
 * ESC of the last 300 bytes). ``offsets``: for each byte of ``text``,
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
        /* where a separator may begin: a control but TAB, LF, VT, FF; DEL; a lead of INVISIBLE */
        if ((c < 0x20 && (c < 0x09 || c > 0x0c)) || c == 0x7f || c == 0xc2 || c == 0xcc || c == 0xcd ||
            c == 0xe1 || c == 0xe2 || c == 0xef)
            k |= LEAD;
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

#define WITHIN(c, lo, hi) ((c) >= (lo) && (c) <= (hi))

/* The length of the UTF-8 character at s[i] (a lead byte >= 0x80) within s[:end] if it takes no
 * cell (separators.INVISIBLE: soft hyphen, zero widths, bidi marks, combining marks, variation
 * selectors, U+FEFF), else 0. */
static Py_ssize_t invisible_at(const unsigned char *s, Py_ssize_t i, Py_ssize_t end) {
    unsigned char a = s[i], b, c;
    if (i + 1 >= end) return 0;
    b = s[i + 1];
    if (a == 0xc2) return b == 0xad ? 2 : 0;
    if (a == 0xcc) return WITHIN(b, 0x80, 0xbf) ? 2 : 0;
    if (a == 0xcd) return WITHIN(b, 0x80, 0xaf) ? 2 : 0;
    if (i + 2 >= end) return 0;
    c = s[i + 2];
    int no_cell = 0;
    if (a == 0xe1)
        no_cell = (b == 0xaa && WITHIN(c, 0xb0, 0xbf)) || ((b == 0xab || b == 0xb7) && WITHIN(c, 0x80, 0xbf));
    else if (a == 0xe2)
        no_cell = (b == 0x80 && (WITHIN(c, 0x8b, 0x8f) || WITHIN(c, 0xaa, 0xae))) ||
                  (b == 0x81 && (WITHIN(c, 0xa0, 0xa4) || WITHIN(c, 0xa6, 0xaf))) ||
                  (b == 0x83 && WITHIN(c, 0x90, 0xbf));
    else if (a == 0xef)
        no_cell = (b == 0xb8 && (WITHIN(c, 0x80, 0x8f) || WITHIN(c, 0xa0, 0xaf))) || (b == 0xbb && c == 0xbf);
    return no_cell ? 3 : 0;
}

/* A string sequence's opener after ESC: OSC, DCS, SOS, PM, APC. */
#define STRING_OPENER(c) ((c) == ']' || (c) == 'P' || (c) == 'X' || (c) == '^' || (c) == '_')

/* The length of the separator that starts at s[i] within s[:end], or 0 if none does there. */
static Py_ssize_t separator_at(const unsigned char *s, Py_ssize_t i, Py_ssize_t end) {
    unsigned char b = s[i];
    if (b >= 0x80) return invisible_at(s, i, end);
    if (b != ESC) return 1; /* a lead below 0x80 but ESC: CR, BS, an ignored control, DEL */
    if (i + 1 >= end) return 0;
    unsigned char c = s[i + 1];
    if (c == '[') {
        Py_ssize_t j = i + 2;
        while (j < end && IS(s[j], PARAM)) j++;
        while (j < end && IS(s[j], INTERMEDIATE)) j++;
        return (j < end && IS(s[j], FINAL)) ? j + 1 - i : 0;
    }
    if (STRING_OPENER(c)) { /* whole, ended within OSC_AT_MOST; else DCS, SOS, PM, APC: two bytes */
        Py_ssize_t p = osc_payload(s, i + 2, end), t = i + 2 + p;
        if (p <= OSC_AT_MOST && t < end) {
            if (s[t] == BEL) return t + 1 - i;
            if (s[t] == ESC && t + 1 < end && s[t + 1] == '\\') return t + 2 - i;
        }
        if (c == ']') return 0;
        return 2;
    }
    if (c == '(' || c == ')') return (i + 2 < end && IS(s[i + 2], ALNUM)) ? 3 : 0;
    return IS(c, ESCAPE_FINAL) ? 2 : 0;
}

/* Where the text ends: at the last ESC of the last OPEN_LOOKS_BACK bytes if what follows it, to
 * the very end, is a sequence left open (ESC alone, a CSI without its final byte, a string
 * sequence of at most 256 bytes without its end, a charset designation without its charset). */
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
    if (STRING_OPENER(c)) return osc_payload(s, j, n) == n - j && n - j <= OSC_AT_MOST ? esc : n;
    if (c == '(' || c == ')') return j == n ? esc : n;
    return n;
}

/* The index of the first byte from s[i] on (below end) where a separator may begin; end if none. */
static Py_ssize_t next_lead(const unsigned char *s, Py_ssize_t i, Py_ssize_t end) {
#ifdef HAVE_SSE2
    /* CLASS's LEAD, 16 bytes at a time: below 0x20 but 0x09-0x0c, DEL, and INVISIBLE's leads
     * (0xc2, 0xcc, 0xcd, 0xe1, 0xe2, 0xef: other non-ASCII text, CJK or emoji, never stops). */
    const __m128i below = _mm_set1_epi8(0x1f), tab = _mm_set1_epi8(0x08), ff = _mm_set1_epi8(0x0d);
    const __m128i del = _mm_set1_epi8(0x7f), c2 = _mm_set1_epi8((char)0xc2), cc = _mm_set1_epi8((char)0xcc);
    const __m128i cd = _mm_set1_epi8((char)0xcd), e1 = _mm_set1_epi8((char)0xe1), e2 = _mm_set1_epi8((char)0xe2);
    const __m128i ef = _mm_set1_epi8((char)0xef);
    while (i + 16 <= end) {
        __m128i v = _mm_loadu_si128((const __m128i *)(s + i));
        __m128i control = _mm_cmpeq_epi8(_mm_max_epu8(v, below), below); /* v <= 0x1f */
        __m128i moves = _mm_and_si128(_mm_cmpgt_epi8(v, tab), _mm_cmplt_epi8(v, ff)); /* 0x09-0x0c */
        __m128i hit = _mm_or_si128(_mm_andnot_si128(moves, control), _mm_cmpeq_epi8(v, del));
        hit = _mm_or_si128(hit, _mm_or_si128(_mm_cmpeq_epi8(v, c2), _mm_cmpeq_epi8(v, cc)));
        hit = _mm_or_si128(hit, _mm_or_si128(_mm_cmpeq_epi8(v, cd), _mm_cmpeq_epi8(v, e1)));
        hit = _mm_or_si128(hit, _mm_or_si128(_mm_cmpeq_epi8(v, e2), _mm_cmpeq_epi8(v, ef)));
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
