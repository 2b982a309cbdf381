/* tlx's native launch: packs one launch's arguments and calls the driver's cuLaunchKernelEx.
 *
 * cuda.bindings' cuLaunchKernelEx converts Python objects to C on every call; here one call
 * takes the specialization's launch spec (bytes built once by runtime/packing.py: the
 * function handle, block, shared memory, cluster shape, and per parameter its kind, size and
 * offset), the grid, the stream handle and the arguments, packs the parameters on the stack
 * (so threads never share a buffer) and launches with the GIL released.
 *
 * It decides nothing about specialization: the frontend chose the spec by its key
 * (tlx/specialize.py); with a guard (`guard_of` there) this only compares the call's arguments
 * with those the key was computed from, and launches nothing on a difference. An argument it
 * cannot pack as given (a CAI array, a value out of range) raises TypeError/OverflowError, a
 * bad grid ValueError, before anything is launched; the Python launcher then explains.
 *
 * No cuda.h or libcuda is needed to build it: the driver entry arrives as an address
 * (`set_entry`) and the two structs it fills are declared below with cuda.h's layouts.
 * runtime/native_launch.py builds it once per machine and Python into the cache folder. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct { /* cuda.h's CUlaunchConfig (CUDA >= 12.0) */
    unsigned int gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
    void *hStream;
    void *attrs;
    unsigned int numAttrs;
} launch_config;

typedef struct { /* cuda.h's CUlaunchAttribute: id, padding, a 64-byte value union */
    int id;
    int pad;
    union { unsigned int cluster[3]; char bytes[64]; } value;
} launch_attribute;

#define CLUSTER_DIMENSION 4 /* CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION */

typedef int (*launch_fn)(const launch_config *, void *, void **, void **);

typedef struct { /* the spec's header (runtime/packing.py, `launch_spec`) */
    uint64_t function;
    uint32_t block, shared, cluster[3], grid_in_clusters, nparams, size;
} spec_header;

typedef struct { uint8_t kind, bits; uint16_t size; uint32_t offset; } spec_param;

#if PY_VERSION_HEX < 0x030B0000 /* public from 3.11 */
#define PyFloat_Pack2(x, p, le) _PyFloat_Pack2((x), (unsigned char *)(p), (le))
#endif

#define MAX_PARAM_BYTES 4096 /* packing.py's NATIVE_MAX_BYTES: larger kernels launch from Python */
#define MAX_PARAMS 512

static launch_fn entry = NULL;
static PyObject *data_ptr_name, *is_cuda_name, *dtype_name;
static PyObject *stream_namespace, *stream_name, *stream_fallback; /* `set_default_stream` */

static PyObject *set_entry(PyObject *self, PyObject *address) {
    entry = (launch_fn)PyLong_AsVoidPtr(address);
    return entry == NULL && PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
}

/* set_default_stream(namespace, name, fallback): a launch given stream None launches on
 * getter(arg) (getter() when arg is None) while namespace[name] is a pair (getter, arg), else
 * on fallback() (runtime/streams.py: the pair once torch is bound, `default_stream`). */
static PyObject *set_default_stream(PyObject *self, PyObject *const *a, Py_ssize_t nargs) {
    if (nargs != 3 || !PyDict_Check(a[0]) || !PyUnicode_Check(a[1]) || !PyCallable_Check(a[2]))
        return PyErr_SetString(PyExc_TypeError, "set_default_stream(namespace: dict, name: str, fallback)"), NULL;
    Py_XSETREF(stream_namespace, Py_NewRef(a[0]));
    Py_XSETREF(stream_name, Py_NewRef(a[1]));
    Py_XSETREF(stream_fallback, Py_NewRef(a[2]));
    Py_RETURN_NONE;
}

/* The stream handle of `stream`: an int, or None for the default stream (`set_default_stream`;
 * 0, the legacy default stream, when it was never called). */
static void *stream_of(PyObject *stream) {
    PyObject *handle = stream;
    if (stream == Py_None) {
        if (stream_namespace == NULL)
            return NULL;
        /* a reference: the getter may rebind the name (streams.py binds torch on first use) */
        PyObject *pair = Py_XNewRef(PyDict_GetItemWithError(stream_namespace, stream_name));
        int paired = pair != NULL && PyTuple_Check(pair) && PyTuple_GET_SIZE(pair) == 2;
        PyObject *getter = paired ? PyTuple_GET_ITEM(pair, 0) : stream_fallback;
        PyObject *arg = paired ? PyTuple_GET_ITEM(pair, 1) : Py_None;
        handle = PyErr_Occurred() ? NULL : arg == Py_None ? PyObject_CallNoArgs(getter) : PyObject_CallOneArg(getter, arg);
        Py_XDECREF(pair);
        if (handle == NULL)
            return NULL;
    }
    void *p = PyLong_Check(handle) ? PyLong_AsVoidPtr(handle) : NULL;
    if (!PyLong_Check(handle))
        PyErr_SetString(PyExc_TypeError, "a stream handle is an int");
    if (handle != stream)
        Py_DECREF(handle);
    return p;
}

static int noop_launch(const launch_config *c, void *f, void **params, void **extra) { return 0; }

static PyObject *noop_entry(PyObject *self, PyObject *unused) { return PyLong_FromVoidPtr((void *)noop_launch); }

static int fail(PyObject *type, int index, const char *what) {
    PyErr_Format(type, "parameter %d: %s", index, what);
    return -1;
}

/* One parameter into dst: kind 'p' pointer (an int, or the object's data_ptr()), 'i'/'u'
 * integer of `bits` value bits stored in `size` bytes, 'f' IEEE float of `size` bytes, 'b'
 * bfloat16, 'd' a 128-byte tensor map given as bytes. */
static int pack(const spec_param *p, PyObject *arg, unsigned char *dst, int index) {
    switch (p->kind) {
    case 'p': {
        PyObject *v = PyLong_Check(arg) ? Py_NewRef(arg) : PyObject_CallMethodNoArgs(arg, data_ptr_name);
        if (v == NULL && PyErr_ExceptionMatches(PyExc_AttributeError))
            return PyErr_Clear(), fail(PyExc_TypeError, index, "a pointer is an int or an object with data_ptr()");
        unsigned long long ptr = v != NULL && PyLong_Check(v) ? PyLong_AsUnsignedLongLong(v) : 0;
        if (v != NULL && !PyLong_Check(v))
            PyErr_SetString(PyExc_TypeError, "data_ptr() did not return an int");
        Py_XDECREF(v);
        return PyErr_Occurred() ? -1 : (memcpy(dst, &ptr, 8), 0);
    }
    case 'i':
    case 'u': {
        PyObject *v = PyNumber_Index(arg); /* u64: the whole unsigned range, else as signed */
        unsigned long long u = v == NULL ? 0 : p->kind == 'u' && p->bits == 64 ? PyLong_AsUnsignedLongLong(v)
                                                                                : (unsigned long long)PyLong_AsLongLong(v);
        long long s = (long long)u;
        Py_XDECREF(v);
        if (PyErr_Occurred())
            return -1;
        if (p->bits < 64) {
            long long lo = p->kind == 'i' ? -(1LL << (p->bits - 1)) : 0;
            long long hi = p->kind == 'i' ? (1LL << (p->bits - 1)) - 1 : (long long)((1ULL << p->bits) - 1);
            if (s < lo || s > hi)
                return fail(PyExc_OverflowError, index, "integer out of range for its type");
        }
        if (p->size != 1 && p->size != 2 && p->size != 4 && p->size != 8)
            return fail(PyExc_ValueError, index, "bad integer size");
        memcpy(dst, &u, p->size); /* the low bytes: CUDA hosts are little-endian */
        return 0;
    }
    case 'f':
    case 'b': {
        double d = PyFloat_AsDouble(arg);
        if (d == -1.0 && PyErr_Occurred())
            return -1;
        if (p->kind == 'f' && p->size == 8)
            return memcpy(dst, &d, 8), 0;
        if (p->kind == 'f' && p->size == 2)
            return PyFloat_Pack2(d, (char *)dst, 1) < 0 ? -1 : 0;
        if (isfinite(d) && fabs(d) > FLT_MAX)
            return fail(PyExc_OverflowError, index, "float too large for fp32");
        float f = (float)d;
        if (p->kind == 'f')
            return memcpy(dst, &f, 4), 0;
        uint32_t bits; /* bfloat16: the top half of the fp32 bits, rounded to nearest even */
        memcpy(&bits, &f, 4);
        uint16_t h = isnan(f) ? (uint16_t)(0x7FC0 | ((bits >> 16) & 0x8000))
                              : (uint16_t)((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
        memcpy(dst, &h, 2);
        return 0;
    }
    case 'd':
        if (!PyBytes_Check(arg) || PyBytes_GET_SIZE(arg) != 128)
            return fail(PyExc_TypeError, index, "a tensor descriptor is passed as its 128 encoded bytes");
        memcpy(dst, PyBytes_AS_STRING(arg), 128);
        return 0;
    }
    return fail(PyExc_ValueError, index, "unknown parameter kind in the launch spec");
}

/* The grid in CTAs: an int or a tuple of 1 to 3 ints, times the cluster shape when the grid
 * counts clusters (checked before multiplying: a product that would wrap is out of range), each
 * within the driver's limit and a multiple of the cluster shape. */
static int read_grid(PyObject *grid, const spec_header *h, unsigned int dims[3]) {
    static const unsigned long long limit[3] = {2147483647ULL, 65535ULL, 65535ULL};
    int tuple = PyTuple_Check(grid);
    Py_ssize_t n = tuple ? PyTuple_GET_SIZE(grid) : 1;
    if (n < 1 || n > 3)
        return PyErr_SetString(PyExc_ValueError, "grid: 1 to 3 dimensions"), -1;
    for (Py_ssize_t i = 0; i < 3; i++) {
        PyObject *item = i >= n ? NULL : tuple ? PyTuple_GET_ITEM(grid, i) : grid;
        if (item != NULL && !PyLong_Check(item))
            return PyErr_SetString(PyExc_ValueError, "grid: not an int"), -1;
        unsigned long long d = item ? PyLong_AsUnsignedLongLong(item) : 1, c = h->cluster[i];
        if (PyErr_Occurred())
            PyErr_Clear();
        else if (c != 0 && (h->grid_in_clusters ? d <= limit[i] / c : d <= limit[i] && d % c == 0)) {
            dims[i] = (unsigned int)(h->grid_in_clusters ? d * c : d);
            continue;
        }
        return PyErr_SetString(PyExc_ValueError, "grid: out of range or not a multiple of the cluster"), -1;
    }
    return 0;
}

/* The guard's comparisons (1 the same, 0 not, -1 an exception). A constexpr or option: exactly
 * the type, and equal; a tensor: exactly the type, is_cuda, the same dtype object, and its
 * data_ptr() in *ptr (the packing reuses it). */
static int same_value(PyObject *v, PyObject *type, PyObject *expected) {
    return (PyObject *)Py_TYPE(v) == type ? PyObject_RichCompareBool(v, expected, Py_EQ) : 0;
}

/* a.name as PyObject_GetAttr reads it; a data descriptor of the type (torch's getters, which no
 * instance attribute can shadow) is called here, sparing the generic lookup a fifth of its cost. */
static PyObject *getattr_of(PyObject *a, PyObject *name) {
    PyObject *d = Py_TYPE(a)->tp_getattro == PyObject_GenericGetAttr ? Py_XNewRef(_PyType_Lookup(Py_TYPE(a), name)) : NULL;
    PyObject *v = d && Py_TYPE(d)->tp_descr_get && Py_TYPE(d)->tp_descr_set ? Py_TYPE(d)->tp_descr_get(d, a, (PyObject *)Py_TYPE(a))
                                                                             : PyObject_GetAttr(a, name);
    Py_XDECREF(d); /* (held: a getter could rebind the class attribute) */
    return v;
}

static int same_tensor(PyObject *a, PyObject *type, PyObject *dtype, unsigned long long *ptr) {
    if ((PyObject *)Py_TYPE(a) != type)
        return 0;
    PyObject *cuda = getattr_of(a, is_cuda_name), *d = cuda == Py_True ? getattr_of(a, dtype_name) : NULL;
    PyObject *v = d != NULL && d == dtype ? PyObject_CallMethodNoArgs(a, data_ptr_name) : NULL;
    int same = v != NULL && PyLong_Check(v);
    *ptr = same ? PyLong_AsUnsignedLongLong(v) : 0;
    Py_XDECREF(cuda); Py_XDECREF(d); Py_XDECREF(v);
    return PyErr_Occurred() ? -1 : same;
}

/* Whether a call's positional `args` and `kwargs` match `guard` = (kinds: bytes, one per
 * positional argument; objects: a (type, value) pair per positional argument; keywords:
 * (name, type, value) triples), as the specializer (tlx/specialize.py, `guard_of`) recorded
 * them of the call it keyed. Kinds: 'P'/'p' a tensor (`same_tensor`) whose data_ptr() is / is
 * not a multiple of 16; 'I'/'i'/'1' an int (bool, a subclass, is i1) in int32 that is a
 * multiple of 16 / is not / is 1; 'f' a float; 'c' a constexpr (`same_value`). The keywords
 * must be exactly those named, each `same_value`. 1 yes, 0 no, -1 an exception. */
static int guard_holds(PyObject *guard, PyObject *const *args, Py_ssize_t n, PyObject *kwargs,
                       unsigned long long *ptrs) {
    PyObject *kinds = PyTuple_GET_ITEM(guard, 0), *objs = PyTuple_GET_ITEM(guard, 1), *kw = PyTuple_GET_ITEM(guard, 2);
    if (PyBytes_GET_SIZE(kinds) != n || PyTuple_GET_SIZE(objs) != 2 * n || PyDict_GET_SIZE(kwargs) != PyTuple_GET_SIZE(kw) / 3)
        return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = args[i], *type = PyTuple_GET_ITEM(objs, 2 * i), *value = PyTuple_GET_ITEM(objs, 2 * i + 1);
        char kind = PyBytes_AS_STRING(kinds)[i];
        int same, overflow = 0;
        long long v;
        switch (kind) {
        case 'P': case 'p':
            same = same_tensor(a, type, value, &ptrs[i]);
            same = same == 1 ? ((ptrs[i] & 15) == 0) == (kind == 'P') : same;
            break;
        case 'I': case 'i': case '1':
            v = PyLong_CheckExact(a) ? PyLong_AsLongLongAndOverflow(a, &overflow) : (overflow = 1);
            same = !overflow && v >= INT32_MIN && v <= INT32_MAX && kind == (v == 1 ? '1' : v % 16 ? 'i' : 'I');
            break;
        case 'f': same = PyFloat_CheckExact(a); break;
        default: same = kind == 'c' ? same_value(a, type, value) : 0;
        }
        if (same != 1)
            return same;
    }
    for (Py_ssize_t j = 0; j + 2 < PyTuple_GET_SIZE(kw); j += 3) {
        PyObject *v = PyDict_GetItemWithError(kwargs, PyTuple_GET_ITEM(kw, j));
        int same = v ? same_value(v, PyTuple_GET_ITEM(kw, j + 1), PyTuple_GET_ITEM(kw, j + 2)) : PyErr_Occurred() ? -1 : 0;
        if (same != 1)
            return same;
    }
    return 1;
}

/* launch(spec, grid, stream, args, skip_if_env[, guard, kwargs]) -> CUresult as an int.
 * `stream`: a handle (int), or None for the default stream (`stream_of`).
 * `skip_if_env`: None, or the name (bytes) of an environment variable that, set to anything
 * but "" or "0", makes it launch nothing and return -1 (the frontend's TLX_INTERPRET). With a
 * guard, `args` are the call's positional arguments (the kernel's parameters, then positional
 * constexprs), `kwargs` its keywords; a call the guard does not hold for returns -2. */
static PyObject *launch(PyObject *self, PyObject *const *a, Py_ssize_t nargs) {
    if ((nargs != 5 && nargs != 7) || !PyBytes_Check(a[0]) || !PyTuple_Check(a[3]) ||
        (nargs == 7 && (!PyTuple_Check(a[5]) || PyTuple_GET_SIZE(a[5]) != 3 || !PyDict_Check(a[6]) ||
                        !PyBytes_Check(PyTuple_GET_ITEM(a[5], 0)) || !PyTuple_Check(PyTuple_GET_ITEM(a[5], 1)) ||
                        !PyTuple_Check(PyTuple_GET_ITEM(a[5], 2)))))
        return PyErr_SetString(PyExc_TypeError, "launch(spec: bytes, grid, stream: int or None, args: tuple, "
                                                "skip_if_env[, guard: (bytes, tuple, tuple), kwargs: dict])"), NULL;
    if (a[4] != Py_None) {
        const char *v = PyBytes_Check(a[4]) ? getenv(PyBytes_AS_STRING(a[4])) : NULL;
        if (v != NULL && v[0] != '\0' && strcmp(v, "0") != 0)
            return PyLong_FromLong(-1);
    }
    const spec_header *h = (const spec_header *)PyBytes_AS_STRING(a[0]);
    const spec_param *params = (const spec_param *)(h + 1);
    if ((size_t)PyBytes_GET_SIZE(a[0]) < sizeof(spec_header) ||
        (size_t)PyBytes_GET_SIZE(a[0]) != sizeof(spec_header) + h->nparams * sizeof(spec_param) ||
        h->nparams > MAX_PARAMS || h->size > MAX_PARAM_BYTES)
        return PyErr_SetString(PyExc_ValueError, "not a launch spec"), NULL;
    Py_ssize_t given = PyTuple_GET_SIZE(a[3]);
    unsigned long long ptrs[MAX_PARAMS];
    const char *kinds = NULL; /* with a guard: ptrs[i] holds the pointer it read of a 'P'/'p' argument */
    if (nargs == 7) {
        if (given > MAX_PARAMS || given < (Py_ssize_t)h->nparams)
            return PyLong_FromLong(-2);
        int holds = guard_holds(a[5], &PyTuple_GET_ITEM(a[3], 0), given, a[6], ptrs);
        if (holds != 1)
            return holds < 0 ? NULL : PyLong_FromLong(-2);
        kinds = PyBytes_AS_STRING(PyTuple_GET_ITEM(a[5], 0));
    } else if (given != (Py_ssize_t)h->nparams)
        return PyErr_Format(PyExc_TypeError, "the kernel takes %u arguments, got %zd", h->nparams, given);
    void *stream = stream_of(a[2]);
    if (stream == NULL && PyErr_Occurred())
        return NULL;
    unsigned int dims[3];
    if (read_grid(a[1], h, dims) < 0)
        return NULL;
    if (dims[0] == 0 || dims[1] == 0 || dims[2] == 0)
        return PyLong_FromLong(0); /* an empty grid launches nothing, as in Triton */
    _Alignas(64) unsigned char buffer[MAX_PARAM_BYTES];
    void *pointers[MAX_PARAMS];
    for (uint32_t i = 0; i < h->nparams; i++) {
        const spec_param *p = &params[i];
        if (p->offset + p->size > h->size)
            return PyErr_SetString(PyExc_ValueError, "launch spec: a parameter outside the buffer"), NULL;
        pointers[i] = buffer + p->offset;
        if (kinds && (kinds[i] | 0x20) == 'p' && p->kind == 'p' && p->size == 8)
            memcpy(buffer + p->offset, &ptrs[i], 8);
        else if (pack(p, PyTuple_GET_ITEM(a[3], i), buffer + p->offset, (int)i) < 0)
            return NULL;
    }
    if (entry == NULL)
        return PyErr_SetString(PyExc_RuntimeError, "tlx native launch: no driver entry point (set_entry)"), NULL;
    launch_attribute cluster = {CLUSTER_DIMENSION, 0, {{h->cluster[0], h->cluster[1], h->cluster[2]}}};
    int clustered = h->cluster[0] * h->cluster[1] * h->cluster[2] != 1;
    launch_config config = {dims[0], dims[1], dims[2], h->block, 1, 1, h->shared, stream,
                            clustered ? &cluster : NULL, clustered ? 1u : 0u};
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = entry(&config, (void *)(uintptr_t)h->function, pointers, NULL);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(err);
}

static PyMethodDef methods[] = {
    {"set_entry", (PyCFunction)set_entry, METH_O, "set_entry(address): the cuLaunchKernelEx to call."},
    {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL,
     "launch(spec, grid, stream, args, skip_if_env[, guard, kwargs]) -> CUresult as an int (-1: skipped, -2: no match)."},
    {"set_default_stream", (PyCFunction)(void (*)(void))set_default_stream, METH_FASTCALL,
     "set_default_stream(namespace, name, fallback): where a launch given stream None finds its stream."},
    {"noop_entry", (PyCFunction)noop_entry, METH_NOARGS,
     "The address of a C stand-in for cuLaunchKernelEx that does nothing (CPU benchmark, tests)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_tlx_native_launch", NULL, -1, methods};

PyMODINIT_FUNC PyInit__tlx_native_launch(void) {
    data_ptr_name = PyUnicode_InternFromString("data_ptr");
    is_cuda_name = PyUnicode_InternFromString("is_cuda");
    dtype_name = PyUnicode_InternFromString("dtype");
    return data_ptr_name && is_cuda_name && dtype_name ? PyModule_Create(&module) : NULL;
}
