/*
 * rllm_avrofast: a schema-driven Avro binary encoder/decoder for rllm-stream.
 *
 * A Program holds a flat table of schema nodes built by rllm/schemas/fastpath.py from the
 * expanded .avsc schemas. encode() and decode() walk it. The bytes are the plain Avro
 * binary encoding, identical to fastavro's schemaless_writer; decoded values match
 * fastavro's schemaless_reader with return_record_name(_override)=True.
 *
 * Anything outside the shapes handled here (a tuple instead of a list, a naive datetime,
 * a missing field without default, a non-float in a double, corrupt bytes, ...) makes
 * encode() return None and decode() raise ValueError, and the caller falls back to
 * fastavro, which then produces the authoritative result or error.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <datetime.h>
#include <stdint.h>
#include <string.h>

enum {
    K_NULL, K_BOOL, K_INT, K_LONG, K_FLOAT, K_DOUBLE, K_BYTES, K_STRING,
    K_TS_MICROS, K_ENUM, K_RECORD, K_ARRAY, K_MAP, K_UNION, K_COUNT
};

#define MAX_DEPTH 100
#define OK 0
#define FALLBACK 1
#define ERR -1

typedef struct {
    int kind;
    Py_ssize_t n;          /* record fields, union branches */
    int *child;            /* record field / union branch node; array item, map value in [0] */
    PyObject **keys;       /* record: interned field names */
    PyObject **defaults;   /* record: default value or NULL */
    PyObject **names;      /* union: branch name for tuple notation */
    PyObject **tagged;     /* union: name to return as (name, value) on decode, or NULL */
    PyObject *symbols;     /* enum: tuple of str */
    int null_index;        /* union: index of the null branch or -1 */
    int only_index;        /* union: the single non-null branch or -1 */
    int record_branch;     /* union: only_index is a record (check "-type" like fastavro) */
} Node;

typedef struct {
    PyObject_HEAD
    Py_ssize_t n;
    Node *nodes;
    Py_ssize_t size_hint;
} Program;

static PyObject *dash_type;  /* "-type" */

/* ------------------------------------------------------------------ program */

static void node_clear(Node *nd) {
    for (Py_ssize_t i = 0; i < nd->n; i++) {
        if (nd->keys) Py_XDECREF(nd->keys[i]);
        if (nd->defaults) Py_XDECREF(nd->defaults[i]);
        if (nd->names) Py_XDECREF(nd->names[i]);
        if (nd->tagged) Py_XDECREF(nd->tagged[i]);
    }
    PyMem_Free(nd->child);
    PyMem_Free(nd->keys);
    PyMem_Free(nd->defaults);
    PyMem_Free(nd->names);
    PyMem_Free(nd->tagged);
    Py_XDECREF(nd->symbols);
}

static void program_dealloc(Program *self) {
    if (self->nodes) {
        for (Py_ssize_t i = 0; i < self->n; i++) node_clear(&self->nodes[i]);
        PyMem_Free(self->nodes);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int bad_spec(const char *what, Py_ssize_t i) {
    PyErr_Format(PyExc_ValueError, "avrofast: bad node %zd: %s", i, what);
    return -1;
}

/* Node specs (tuples): (kind,), (ENUM, symbols), (RECORD, ((name, child, has_default,
 * default), ...)), (ARRAY, child), (MAP, child), (UNION, ((name, child, tagged), ...)). */
static int build_node(Node *nd, PyObject *spec, Py_ssize_t i, Py_ssize_t total) {
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) < 1) return bad_spec("not a tuple", i);
    long kind = PyLong_AsLong(PyTuple_GET_ITEM(spec, 0));
    if (kind < 0 || kind >= K_COUNT) return bad_spec("unknown kind", i);
    nd->kind = (int)kind;
    nd->null_index = nd->only_index = -1;
    if (kind == K_ENUM) {
        if (PyTuple_GET_SIZE(spec) != 2 || !PyTuple_Check(PyTuple_GET_ITEM(spec, 1)))
            return bad_spec("enum needs a symbols tuple", i);
        nd->symbols = Py_NewRef(PyTuple_GET_ITEM(spec, 1));
    } else if (kind == K_ARRAY || kind == K_MAP) {
        if (PyTuple_GET_SIZE(spec) != 2) return bad_spec("array/map needs a child", i);
        long c = PyLong_AsLong(PyTuple_GET_ITEM(spec, 1));
        if (c < 0 || c >= total) return bad_spec("child out of range", i);
        nd->child = PyMem_Calloc(1, sizeof(int));
        if (!nd->child) { PyErr_NoMemory(); return -1; }
        nd->child[0] = (int)c;
    } else if (kind == K_RECORD || kind == K_UNION) {
        if (PyTuple_GET_SIZE(spec) != 2 || !PyTuple_Check(PyTuple_GET_ITEM(spec, 1)))
            return bad_spec("record/union needs a tuple of members", i);
        PyObject *members = PyTuple_GET_ITEM(spec, 1);
        Py_ssize_t n = PyTuple_GET_SIZE(members);
        nd->child = PyMem_Calloc(n ? n : 1, sizeof(int));
        PyObject ***a = kind == K_RECORD ? &nd->keys : &nd->names;
        PyObject ***b = kind == K_RECORD ? &nd->defaults : &nd->tagged;
        *a = PyMem_Calloc(n ? n : 1, sizeof(PyObject *));
        *b = PyMem_Calloc(n ? n : 1, sizeof(PyObject *));
        if (!nd->child || !*a || !*b) { PyErr_NoMemory(); return -1; }
        nd->n = n;
        for (Py_ssize_t j = 0; j < n; j++) {
            PyObject *m = PyTuple_GET_ITEM(members, j);
            if (!PyTuple_Check(m) || PyTuple_GET_SIZE(m) != (kind == K_RECORD ? 4 : 3))
                return bad_spec("bad member", i);
            PyObject *name = PyTuple_GET_ITEM(m, 0);
            if (!PyUnicode_CheckExact(name)) return bad_spec("member name not str", i);
            long c = PyLong_AsLong(PyTuple_GET_ITEM(m, 1));
            if (c < 0 || c >= total) return bad_spec("member child out of range", i);
            nd->child[j] = (int)c;
            Py_INCREF(name);
            PyUnicode_InternInPlace(&name);
            (*a)[j] = name;
            if (kind == K_RECORD) {
                if (PyObject_IsTrue(PyTuple_GET_ITEM(m, 2)))
                    nd->defaults[j] = Py_NewRef(PyTuple_GET_ITEM(m, 3));
            } else {
                PyObject *tag = PyTuple_GET_ITEM(m, 2);
                if (tag != Py_None) nd->tagged[j] = Py_NewRef(tag);
            }
        }
    } else if (PyTuple_GET_SIZE(spec) != 1) {
        return bad_spec("primitive takes no arguments", i);
    }
    return 0;
}

static int program_init(Program *self, PyObject *args, PyObject *kwds) {
    PyObject *specs;
    if (!PyArg_ParseTuple(args, "O!:Program", &PyTuple_Type, &specs)) return -1;
    if (self->nodes) { PyErr_SetString(PyExc_RuntimeError, "Program already built"); return -1; }
    Py_ssize_t n = PyTuple_GET_SIZE(specs);
    self->nodes = PyMem_Calloc(n ? n : 1, sizeof(Node));
    if (!self->nodes) { PyErr_NoMemory(); return -1; }
    self->n = n;
    self->size_hint = 256;
    for (Py_ssize_t i = 0; i < n; i++)
        if (build_node(&self->nodes[i], PyTuple_GET_ITEM(specs, i), i, n) < 0) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        Node *nd = &self->nodes[i];
        if (nd->kind != K_UNION) continue;
        int non_null = 0;
        for (Py_ssize_t j = 0; j < nd->n; j++) {
            Node *b = &self->nodes[nd->child[j]];
            if (b->kind == K_NULL) {
                if (nd->null_index < 0) nd->null_index = (int)j;
            } else {
                non_null++;
                nd->only_index = (int)j;
                nd->record_branch = b->kind == K_RECORD;
            }
        }
        if (non_null != 1) nd->only_index = -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ encoding */

typedef struct {
    PyObject *bytes;  /* PyBytes being filled */
    char *p;          /* its buffer */
    Py_ssize_t len, cap;
} Buf;

static int buf_grow(Buf *b, Py_ssize_t need) {
    Py_ssize_t cap = b->cap;
    while (cap < b->len + need) cap = cap * 2 + 64;
    if (_PyBytes_Resize(&b->bytes, cap) < 0) return -1;
    b->p = PyBytes_AS_STRING(b->bytes);
    b->cap = cap;
    return 0;
}

#define ENSURE(b, need) \
    do { if ((b)->len + (need) > (b)->cap && buf_grow((b), (need)) < 0) return ERR; } while (0)

static inline int put_long(Buf *b, int64_t v) {
    ENSURE(b, 10);
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    unsigned char *p = (unsigned char *)b->p + b->len;
    while (z >= 0x80) { *p++ = (unsigned char)(z | 0x80); z >>= 7; }
    *p++ = (unsigned char)z;
    b->len = (char *)p - b->p;
    return OK;
}

static inline int put_raw(Buf *b, const char *s, Py_ssize_t n) {
    if (put_long(b, n) < 0) return ERR;
    ENSURE(b, n);
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return OK;
}

static const int64_t US_PER_DAY = 86400LL * 1000000LL;

/* days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm) */
static int64_t days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int *y, int *m, int *d) {
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t yy = yoe + era * 400;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = (int)(yy + (*m <= 2));
}

static int enc(Program *P, int idx, PyObject *o, Buf *b, int depth);

static int enc_timestamp(PyObject *o, Buf *b) {
    if (PyLong_CheckExact(o)) {
        int ovf;
        long long v = PyLong_AsLongLongAndOverflow(o, &ovf);
        if (ovf || (v == -1 && PyErr_Occurred())) { PyErr_Clear(); return FALLBACK; }
        return put_long(b, v);
    }
    if (!PyDateTime_CheckExact(o)) return FALLBACK;  /* subclasses may redefine "-" */
    PyObject *tz = PyDateTime_DATE_GET_TZINFO(o);
    if (tz == Py_None) return FALLBACK;  /* naive: fastavro uses local time */
    int64_t offset = 0;
    if (tz != PyDateTime_TimeZone_UTC) {
        PyObject *off = PyObject_CallMethod(tz, "utcoffset", "O", o);
        if (!off) { PyErr_Clear(); return FALLBACK; }
        if (!PyDelta_Check(off)) { Py_DECREF(off); return FALLBACK; }
        offset = PyDateTime_DELTA_GET_DAYS(off) * US_PER_DAY
                 + (int64_t)PyDateTime_DELTA_GET_SECONDS(off) * 1000000
                 + PyDateTime_DELTA_GET_MICROSECONDS(off);
        Py_DECREF(off);
    }
    int64_t days = days_from_civil(PyDateTime_GET_YEAR(o), PyDateTime_GET_MONTH(o),
                                   PyDateTime_GET_DAY(o));
    int64_t us = days * US_PER_DAY
                 + ((int64_t)PyDateTime_DATE_GET_HOUR(o) * 3600
                    + PyDateTime_DATE_GET_MINUTE(o) * 60 + PyDateTime_DATE_GET_SECOND(o))
                       * 1000000
                 + PyDateTime_DATE_GET_MICROSECOND(o);
    return put_long(b, us - offset);
}

static int enc_record(Program *P, Node *nd, PyObject *o, Buf *b, int depth) {
    if (!PyDict_CheckExact(o)) return FALLBACK;
    for (Py_ssize_t j = 0; j < nd->n; j++) {
        PyObject *v = PyDict_GetItemWithError(o, nd->keys[j]);
        if (!v) {
            if (PyErr_Occurred()) { PyErr_Clear(); return FALLBACK; }
            v = nd->defaults[j];
            if (!v) return FALLBACK;
        }
        Py_INCREF(v);  /* a tzinfo's utcoffset() runs Python code that could drop it */
        int r = enc(P, nd->child[j], v, b, depth + 1);
        Py_DECREF(v);
        if (r != OK) return r;
    }
    return OK;
}

static int enc_union(Program *P, Node *nd, PyObject *o, Buf *b, int depth) {
    if (o == Py_None) {
        if (nd->null_index < 0) return FALLBACK;
        return put_long(b, nd->null_index);
    }
    if (PyTuple_CheckExact(o)) {  /* fastavro's (name, value) notation */
        if (PyTuple_GET_SIZE(o) != 2 || !PyUnicode_Check(PyTuple_GET_ITEM(o, 0)))
            return FALLBACK;
        PyObject *name = PyTuple_GET_ITEM(o, 0);
        for (Py_ssize_t j = 0; j < nd->n; j++) {
            if (nd->names[j] == name || PyUnicode_Compare(nd->names[j], name) == 0) {
                if (put_long(b, j) < 0) return ERR;
                return enc(P, nd->child[j], PyTuple_GET_ITEM(o, 1), b, depth + 1);
            }
        }
        if (PyErr_Occurred()) PyErr_Clear();
        return FALLBACK;
    }
    if (nd->only_index < 0) return FALLBACK;  /* several candidates: let fastavro choose */
    if (nd->record_branch && PyDict_CheckExact(o)) {
        PyObject *t = PyDict_GetItemWithError(o, dash_type);
        if (t || PyErr_Occurred()) { PyErr_Clear(); return FALLBACK; }
    }
    if (put_long(b, nd->only_index) < 0) return ERR;
    return enc(P, nd->child[nd->only_index], o, b, depth + 1);
}

static int enc(Program *P, int idx, PyObject *o, Buf *b, int depth) {
    Node *nd = &P->nodes[idx];
    if (depth > MAX_DEPTH) return FALLBACK;
    switch (nd->kind) {
    case K_NULL:
        return o == Py_None ? OK : FALLBACK;
    case K_BOOL:
        if (o != Py_True && o != Py_False) return FALLBACK;
        ENSURE(b, 1);
        b->p[b->len++] = o == Py_True ? 1 : 0;
        return OK;
    case K_INT:
    case K_LONG: {
        if (!PyLong_CheckExact(o)) return FALLBACK;
        int ovf;
        long long v = PyLong_AsLongLongAndOverflow(o, &ovf);
        if (ovf || (v == -1 && PyErr_Occurred())) { PyErr_Clear(); return FALLBACK; }
        if (nd->kind == K_INT && (v < INT32_MIN || v > INT32_MAX)) return FALLBACK;
        return put_long(b, v);
    }
    case K_FLOAT:
        if (!PyFloat_CheckExact(o)) return FALLBACK;
        ENSURE(b, 4);
        if (PyFloat_Pack4(PyFloat_AS_DOUBLE(o), b->p + b->len, 1) < 0) {
            PyErr_Clear();
            return FALLBACK;
        }
        b->len += 4;
        return OK;
    case K_DOUBLE:
        if (!PyFloat_CheckExact(o)) return FALLBACK;
        ENSURE(b, 8);
        if (PyFloat_Pack8(PyFloat_AS_DOUBLE(o), b->p + b->len, 1) < 0) {
            PyErr_Clear();
            return FALLBACK;
        }
        b->len += 8;
        return OK;
    case K_BYTES:
        if (!PyBytes_CheckExact(o)) return FALLBACK;
        return put_raw(b, PyBytes_AS_STRING(o), PyBytes_GET_SIZE(o));
    case K_STRING: {
        if (!PyUnicode_Check(o)) return FALLBACK;
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(o, &n);
        if (!s) { PyErr_Clear(); return FALLBACK; }
        return put_raw(b, s, n);
    }
    case K_TS_MICROS:
        return enc_timestamp(o, b);
    case K_ENUM: {
        if (!PyUnicode_Check(o)) return FALLBACK;
        Py_ssize_t n = PyTuple_GET_SIZE(nd->symbols);
        for (Py_ssize_t j = 0; j < n; j++) {
            PyObject *s = PyTuple_GET_ITEM(nd->symbols, j);
            if (s == o || PyUnicode_Compare(s, o) == 0) return put_long(b, j);
        }
        if (PyErr_Occurred()) PyErr_Clear();
        return FALLBACK;
    }
    case K_RECORD:
        return enc_record(P, nd, o, b, depth);
    case K_ARRAY: {
        if (!PyList_CheckExact(o) && !PyTuple_CheckExact(o)) return FALLBACK;
        Py_ssize_t n = Py_SIZE(o);
        if (n > 0) {
            if (put_long(b, n) < 0) return ERR;
            for (Py_ssize_t j = 0; j < Py_SIZE(o) && j < n; j++) {
                PyObject *item = PyList_CheckExact(o) ? PyList_GET_ITEM(o, j)
                                                      : PyTuple_GET_ITEM(o, j);
                Py_INCREF(item);
                int r = enc(P, nd->child[0], item, b, depth + 1);
                Py_DECREF(item);
                if (r != OK) return r;
            }
            if (Py_SIZE(o) != n) return FALLBACK;  /* a list changed under us */
        }
        return put_long(b, 0);
    }
    case K_MAP: {
        if (!PyDict_CheckExact(o)) return FALLBACK;
        Py_ssize_t n = PyDict_GET_SIZE(o);
        if (n > 0) {
            if (put_long(b, n) < 0) return ERR;
            Py_ssize_t pos = 0;
            PyObject *k, *v;
            while (PyDict_Next(o, &pos, &k, &v)) {
                if (!PyUnicode_Check(k)) return FALLBACK;
                Py_ssize_t kn;
                const char *s = PyUnicode_AsUTF8AndSize(k, &kn);
                if (!s) { PyErr_Clear(); return FALLBACK; }
                if (put_raw(b, s, kn) < 0) return ERR;
                Py_INCREF(v);
                int r = enc(P, nd->child[0], v, b, depth + 1);
                Py_DECREF(v);
                if (r != OK) return r;
            }
            if (PyDict_GET_SIZE(o) != n) return FALLBACK;
        }
        return put_long(b, 0);
    }
    case K_UNION:
        return enc_union(P, nd, o, b, depth);
    }
    return FALLBACK;
}

/* encode(root, datum, prefix) -> bytes (prefix + Avro body), or None to fall back */
static PyObject *program_encode(Program *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyLong_Check(args[0]) || !PyBytes_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "encode(root: int, datum, prefix: bytes)");
        return NULL;
    }
    long root = PyLong_AsLong(args[0]);
    if (root < 0 || root >= self->n) {
        PyErr_SetString(PyExc_ValueError, "root node out of range");
        return NULL;
    }
    Py_ssize_t plen = PyBytes_GET_SIZE(args[2]);
    Buf b;
    b.cap = self->size_hint + plen;
    b.bytes = PyBytes_FromStringAndSize(NULL, b.cap);
    if (!b.bytes) return NULL;
    b.p = PyBytes_AS_STRING(b.bytes);
    memcpy(b.p, PyBytes_AS_STRING(args[2]), plen);
    b.len = plen;
    int r = enc(self, (int)root, args[1], &b, 0);
    if (r == ERR) { Py_XDECREF(b.bytes); return NULL; }
    if (r == FALLBACK) {
        Py_XDECREF(b.bytes);
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    self->size_hint = (b.len - plen) + (b.len - plen) / 8 + 64;  /* follow recent sizes */
    if (b.len != b.cap && _PyBytes_Resize(&b.bytes, b.len) < 0) return NULL;
    return b.bytes;
}

/* ------------------------------------------------------------------ decoding */

typedef struct {
    const unsigned char *p, *end;
} Cur;

static PyObject *malformed(const char *what) {
    PyErr_SetString(PyExc_ValueError, what);
    return NULL;
}

static inline int get_long(Cur *c, int64_t *out) {
    uint64_t v = 0;
    int shift = 0;
    for (int i = 0; i < 10; i++) {
        if (c->p >= c->end) { PyErr_SetString(PyExc_ValueError, "truncated varint"); return -1; }
        unsigned char byte = *c->p++;
        if (i == 9 && (byte & 0x7e)) break;
        v |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80)) {
            *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
            return 0;
        }
        shift += 7;
    }
    PyErr_SetString(PyExc_ValueError, "varint too long");
    return -1;
}

static inline int get_len(Cur *c, Py_ssize_t *n) {
    int64_t v;
    if (get_long(c, &v) < 0) return -1;
    if (v < 0 || v > c->end - c->p) {
        PyErr_SetString(PyExc_ValueError, "bad length");
        return -1;
    }
    *n = (Py_ssize_t)v;
    return 0;
}

static PyObject *dec(Program *P, int idx, Cur *c, int depth);

static PyObject *dec_timestamp(Cur *c) {
    int64_t v;
    if (get_long(c, &v) < 0) return NULL;
    int64_t days = v / US_PER_DAY, rem = v % US_PER_DAY;
    if (rem < 0) { rem += US_PER_DAY; days -= 1; }
    if (days < -719162 || days > 2932896) return malformed("timestamp out of range");
    int y, m, d;
    civil_from_days(days, &y, &m, &d);
    int64_t secs = rem / 1000000;
    return PyDateTimeAPI->DateTime_FromDateAndTime(
        y, m, d, (int)(secs / 3600), (int)(secs / 60 % 60), (int)(secs % 60),
        (int)(rem % 1000000), PyDateTime_TimeZone_UTC, PyDateTimeAPI->DateTimeType);
}

static int dec_blocks(Cur *c, int64_t *count) {
    if (get_long(c, count) < 0) return -1;
    if (*count < 0) {
        int64_t size;
        if (*count == INT64_MIN) { PyErr_SetString(PyExc_ValueError, "bad block"); return -1; }
        *count = -*count;
        if (get_long(c, &size) < 0) return -1;
    }
    if (*count > ((int64_t)1 << 31)) {  /* null items take no bytes; cap the loop anyway */
        PyErr_SetString(PyExc_ValueError, "bad block count");
        return -1;
    }
    return 0;
}

static PyObject *dec(Program *P, int idx, Cur *c, int depth) {
    Node *nd = &P->nodes[idx];
    if (depth > MAX_DEPTH) return malformed("nested too deeply");
    switch (nd->kind) {
    case K_NULL:
        Py_RETURN_NONE;
    case K_BOOL:
        if (c->p >= c->end) return malformed("truncated boolean");
        if (*c->p > 1) return malformed("bad boolean");
        return PyBool_FromLong(*c->p++);
    case K_INT:
    case K_LONG: {
        int64_t v;
        if (get_long(c, &v) < 0) return NULL;
        if (nd->kind == K_INT && (v < INT32_MIN || v > INT32_MAX)) return malformed("int range");
        return PyLong_FromLongLong(v);
    }
    case K_FLOAT: {
        if (c->end - c->p < 4) return malformed("truncated float");
        double d = PyFloat_Unpack4((const char *)c->p, 1);
        if (d == -1.0 && PyErr_Occurred()) return NULL;
        c->p += 4;
        return PyFloat_FromDouble(d);
    }
    case K_DOUBLE: {
        if (c->end - c->p < 8) return malformed("truncated double");
        double d = PyFloat_Unpack8((const char *)c->p, 1);
        if (d == -1.0 && PyErr_Occurred()) return NULL;
        c->p += 8;
        return PyFloat_FromDouble(d);
    }
    case K_BYTES:
    case K_STRING: {
        Py_ssize_t n;
        if (get_len(c, &n) < 0) return NULL;
        const char *s = (const char *)c->p;
        c->p += n;
        if (nd->kind == K_BYTES) return PyBytes_FromStringAndSize(s, n);
        return PyUnicode_DecodeUTF8(s, n, NULL);
    }
    case K_TS_MICROS:
        return dec_timestamp(c);
    case K_ENUM: {
        int64_t v;
        if (get_long(c, &v) < 0) return NULL;
        if (v < 0 || v >= PyTuple_GET_SIZE(nd->symbols)) return malformed("bad enum index");
        return Py_NewRef(PyTuple_GET_ITEM(nd->symbols, v));
    }
    case K_RECORD: {
#if PY_VERSION_HEX < 0x030E0000
        PyObject *d = _PyDict_NewPresized(nd->n);
#else
        PyObject *d = PyDict_New();
#endif
        if (!d) return NULL;
        for (Py_ssize_t j = 0; j < nd->n; j++) {
            PyObject *v = dec(P, nd->child[j], c, depth + 1);
            if (!v || PyDict_SetItem(d, nd->keys[j], v) < 0) {
                Py_XDECREF(v);
                Py_DECREF(d);
                return NULL;
            }
            Py_DECREF(v);
        }
        return d;
    }
    case K_ARRAY: {
        PyObject *list = PyList_New(0);
        if (!list) return NULL;
        for (;;) {
            int64_t count;
            if (dec_blocks(c, &count) < 0) goto array_fail;
            if (count == 0) break;
            for (int64_t j = 0; j < count; j++) {
                PyObject *v = dec(P, nd->child[0], c, depth + 1);
                if (!v) goto array_fail;
                int r = PyList_Append(list, v);
                Py_DECREF(v);
                if (r < 0) goto array_fail;
            }
        }
        return list;
    array_fail:
        Py_DECREF(list);
        return NULL;
    }
    case K_MAP: {
        PyObject *d = PyDict_New();
        if (!d) return NULL;
        for (;;) {
            int64_t count;
            if (dec_blocks(c, &count) < 0) goto map_fail;
            if (count == 0) break;
            for (int64_t j = 0; j < count; j++) {
                Py_ssize_t n;
                if (get_len(c, &n) < 0) goto map_fail;
                PyObject *k = PyUnicode_DecodeUTF8((const char *)c->p, n, NULL);
                c->p += n;
                if (!k) goto map_fail;
                PyObject *v = dec(P, nd->child[0], c, depth + 1);
                int r = v ? PyDict_SetItem(d, k, v) : -1;
                Py_DECREF(k);
                Py_XDECREF(v);
                if (r < 0) goto map_fail;
            }
        }
        return d;
    map_fail:
        Py_DECREF(d);
        return NULL;
    }
    case K_UNION: {
        int64_t j;
        if (get_long(c, &j) < 0) return NULL;
        if (j < 0 || j >= nd->n) return malformed("bad union index");
        PyObject *v = dec(P, nd->child[j], c, depth + 1);
        if (!v || !nd->tagged[j]) return v;
        PyObject *t = PyTuple_Pack(2, nd->tagged[j], v);
        Py_DECREF(v);
        return t;
    }
    }
    return malformed("unknown node");
}

/* decode(root, data, offset) -> (datum, end offset); ValueError on anything unexpected */
static PyObject *program_decode(Program *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyLong_Check(args[0]) || !PyLong_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "decode(root: int, data: bytes, offset: int)");
        return NULL;
    }
    long root = PyLong_AsLong(args[0]);
    Py_ssize_t offset = PyLong_AsSsize_t(args[2]);
    if (root < 0 || root >= self->n) {
        PyErr_SetString(PyExc_ValueError, "root node out of range");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *result = NULL;
    if (offset < 0 || offset > view.len) {
        PyErr_SetString(PyExc_ValueError, "offset out of range");
    } else {
        Cur c = {(const unsigned char *)view.buf + offset,
                 (const unsigned char *)view.buf + view.len};
        PyObject *datum = dec(self, (int)root, &c, 0);
        if (datum) {
            result = Py_BuildValue("Nn", datum, (Py_ssize_t)(c.p - (const unsigned char *)view.buf));
        }
    }
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef program_methods[] = {
    {"encode", (PyCFunction)(void (*)(void))program_encode, METH_FASTCALL,
     "encode(root, datum, prefix) -> prefix + Avro bytes, or None when fastavro must do it"},
    {"decode", (PyCFunction)(void (*)(void))program_decode, METH_FASTCALL,
     "decode(root, data, offset) -> (datum, end); ValueError when fastavro must do it"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ProgramType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rllm_avrofast.Program",
    .tp_basicsize = sizeof(Program),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Program(nodes): a compiled Avro schema (see rllm/schemas/fastpath.py)",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)program_init,
    .tp_dealloc = (destructor)program_dealloc,
    .tp_methods = program_methods,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "rllm_avrofast",
    "Schema-driven Avro binary codec used by rllm.schemas.fastpath.", -1, NULL,
};

PyMODINIT_FUNC PyInit_rllm_avrofast(void) {
    PyDateTime_IMPORT;
    if (!PyDateTimeAPI) return NULL;
    if (PyType_Ready(&ProgramType) < 0) return NULL;
    dash_type = PyUnicode_InternFromString("-type");
    if (!dash_type) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "Program", (PyObject *)&ProgramType) < 0 ||
        PyModule_AddIntConstant(m, "ABI", 1) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    static const char *kinds[] = {"NULL", "BOOL", "INT", "LONG", "FLOAT", "DOUBLE", "BYTES",
                                  "STRING", "TS_MICROS", "ENUM", "RECORD", "ARRAY", "MAP",
                                  "UNION"};
    for (int i = 0; i < K_COUNT; i++)
        if (PyModule_AddIntConstant(m, kinds[i], i) < 0) { Py_DECREF(m); return NULL; }
    return m;
}
