/* tlx's native launch dispatcher: `kernel[grid](*args, **kwargs)` in C for the calls it has seen.
 *
 * Why: on the H200's host the driver call alone costs 3.2-3.3 us, so a launch <= 4 us leaves
 * well under a microsecond for binding the arguments, finding the specialization and packing
 * its parameters; the generated Python dispatcher (tlx/launch.py) takes 1.4 us for a
 * four-argument kernel on the CPU benchmark, twice that on the H200's host.
 *
 * How: a `Dispatcher` (one per @tlx.jit kernel) keeps up to MAX_PLANS *plans*. A plan is what one
 * successful Python launch learnt, stated so that C can check it holds again:
 *
 *   - the call's shape: the number of positional arguments and the keyword names;
 *   - per argument (positional, then keyword values in kwnames order) a role:
 *       RUNTIME  a kernel argument: the plan records its class, which is everything the Python
 *                dispatcher's specialization key reads of it (tlx.runtime.arrays.bind_source):
 *                a CUDA torch tensor of exactly torch.Tensor -> (dtype object, address % 16 == 0);
 *                an exact int -> (int32 / int64 / uint64 range, == 1, % 16 == 0); an exact float;
 *       VALUE    a constexpr or a launch option in the key (num_warps, ...): the same type and an
 *                equal value (identity first);
 *       IGNORE   accepted and unused (num_stages);
 *   - how to write the kernel's parameter buffer: per parameter its byte offset, and per value a
 *     writer (pointer from a tensor, range-checked integer, fp32/fp64, or constant bytes for a
 *     default or the null scratch pointer);
 *   - the launch config (block, dynamic shared memory, cluster attribute), function handle and
 *     the specialization's compiled kernel, which the launch returns.
 *
 * A call whose arguments match a plan (same shape, every RUNTIME class and VALUE equal) has the
 * same specialization key, so it launches from C: parameters packed on the C stack (reentrant:
 * no buffer shared between threads), the stream read as the Python dispatcher reads it
 * (torch's current stream, else `default_stream()`), the grid fixed when `kernel[grid]` was
 * taken. Where torch offers DLPack's C exchange API (`__dlpack_c_exchange_api__`, dlpack.h
 * 1.2+), a tensor's device and address come from one C call (`dltensor_from_py_object_no_sync`)
 * instead of the `is_cuda` getter and the `data_ptr()` method, and torch's current stream from
 * `current_work_stream` instead of a Python call: 0.22 us less of a four-argument launch on the
 * H200's host (benchmarks/launch_exchange.py: 3.94 -> 3.72 us). The same call gives the tensor's
 * DLPack data type; the plan compares torch's dtype object, so C maps one to the other with a
 * table read off one CPU sample tensor of every torch dtype when the dispatcher is made
 * (`dtype_samples`): a DLPack type that two torch dtypes export is left out of the table (those
 * tensors' dtype is read with the getter), and every plan made checks the table against the
 * getter (a disagreement switches the table off). With a TorchFunctionMode active (it may
 * override those getters) tensors are read the Python way. Anything else -- no matching plan, an argument C does not classify, a grid C cannot
 * use, a driver error, TLX_INTERPRET set -- calls back into Python: the miss `hook` launches
 * through the generated dispatcher and returns the plan for C to keep (or None); a driver error
 * goes to the plain dispatcher, which retries or raises the tlx error. So C never decides what
 * Python would decide differently: it only repeats a decision under the conditions that made it. */

#include "native_launch.h"

#include <structmember.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* DLPack's C exchange API (dlpack/dlpack.h, 1.2 and later): the part the dispatcher calls. */
enum { DL_CUDA = 2 };
typedef struct { int32_t device_type, device_id; } DLDev;
typedef struct { uint8_t code, bits; uint16_t lanes; } DLType;
typedef struct {
    void *data;
    DLDev device;
    int32_t ndim;
    DLType dtype;
    int64_t *shape, *strides;
    uint64_t byte_offset;
} DLTens;
typedef struct DLHeader {
    struct { uint32_t major, minor; } version;
    struct DLHeader *prev_api;
} DLHeader;
typedef struct {
    DLHeader header;
    void *managed_tensor_allocator;
    void *managed_tensor_from_py_object_no_sync;
    void *managed_tensor_to_py_object_no_sync;
    int (*dltensor_from_py_object_no_sync)(void *py_object, DLTens *out);
    int (*current_work_stream)(int32_t device_type, int32_t device_id, void **out_stream);
} DLExchange;

#define MAX_ELEMS 64     /* arguments (positional + keyword) a plannable call may have */
#define MAX_PARAMS 64    /* kernel parameters a plan may write */
#define MAX_BUF 2048     /* parameter bytes (pointers and scalars; no tensor maps) */
#define MAX_PLANS 16     /* plans per kernel, most recently used first */
#define MAX_DTYPES 64    /* DLPack data types the dtype table maps */
#define NO_DL_KEY 0xffffffffu /* a tensor read without the exchange API (no DLPack type) */

enum { ROLE_RUNTIME = 0, ROLE_VALUE = 1, ROLE_IGNORE = 2 };
enum { KIND_OTHER = 0, KIND_TENSOR = 1, KIND_INT = 2, KIND_FLOAT = 3 };
enum { RANGE_I32 = 0, RANGE_I64 = 1, RANGE_U64 = 2 };
enum { W_PTR = 0, W_INT = 1, W_F32 = 2, W_F64 = 3, W_CONST = 4 };

static PyObject *s_is_cuda, *s_dtype, *s_data_ptr; /* interned attribute names */
static PyObject *s_exchange_api, *s_exchange_api_old; /* dlpack.h's attribute name, and tvm-ffi's first one */
static PyObject *s_current_device;                  /* -1: torch's "the current device" */

/* ---- one argument as the launch reads it ------------------------------------------------- */

typedef struct {
    int done;          /* computed for this call */
    int kind;          /* KIND_* */
    PyObject *dtype;   /* tensor: its dtype (compared by identity; a plan holds a reference) */
    int dtype_from_table; /* tensor: `dtype` came from the dtype table, not the getter */
    int cls;           /* tensor: aligned; int: range * 4 + is_one * 2 + aligned */
    uint64_t bits;     /* tensor: address; int: two's-complement value */
    int range;         /* int: RANGE_* */
    double real;       /* float */
} Seen;

/* How C reads a torch tensor: exactly this type, and its `is_cuda` / `dtype` data descriptors
 * (looked up once: a data descriptor on the type wins over anything else, so calling its getter
 * is what `x.is_cuda` does, minus the lookup), NULL where the type has none; and its C method
 * `data_ptr`, called straight through the method descriptor (on the H200's host 57 instead of
 * 60-70 ns a tensor: no method lookup, no instance-dict probe -- a `data_ptr` set on one tensor
 * object is not looked for), NULL where the type's `data_ptr` is not a C method. */
typedef struct {
    PyTypeObject *type;
    PyObject *is_cuda;
    PyObject *dtype;
    PyObject *data_ptr;
    const DLExchange *exchange; /* the type's DLPack exchange API, or NULL (see `exchange_api`) */
    PyObject *exchange_owner;   /* the capsule that holds it */
    PyObject *mode_enabled;     /* torch._C._is_torch_function_mode_enabled, or NULL */
    /* DLPack data type (dl_key) -> torch dtype, for the types exactly one torch dtype exports
     * (strong references; `dtype` NULL: exported by several, read with the getter) */
    int ndtypes;
    int dtypes_trusted;         /* 0 once a plan found the table disagreeing with the getter */
    struct { uint32_t key; PyObject *dtype; } dtypes[MAX_DTYPES];
} TensorReader;

static uint32_t dl_key(DLType t) { return (uint32_t)t.code | (uint32_t)t.bits << 8 | (uint32_t)t.lanes << 16; }

/* The torch dtype DLPack type `key` stands for, NULL when the table does not say (borrowed). */
static PyObject *table_dtype(const TensorReader *tensor, uint32_t key) {
    if (!tensor->dtypes_trusted) return NULL;
    for (int i = 0; i < tensor->ndtypes; i++)
        if (tensor->dtypes[i].key == key) return tensor->dtypes[i].dtype;
    return NULL;
}

static PyObject *read_attr(PyObject *x, PyObject *descr, PyObject *name) {
    if (descr != NULL)
        return Py_TYPE(descr)->tp_descr_get(descr, x, (PyObject *)Py_TYPE(x));
    return PyObject_GetAttr(x, name);
}

static PyObject *data_descriptor(PyTypeObject *type, PyObject *name) {
    PyObject *d = PyObject_GetAttr((PyObject *)type, name); /* a descriptor read on its class is itself */
    if (d == NULL) { PyErr_Clear(); return NULL; }
    if (Py_TYPE(d)->tp_descr_get == NULL || Py_TYPE(d)->tp_descr_set == NULL) { Py_DECREF(d); return NULL; }
    return d;
}

static PyObject *c_method(PyTypeObject *type, PyObject *name) {
    PyObject *m = PyObject_GetAttr((PyObject *)type, name); /* a method read on its class is itself */
    if (m == NULL) { PyErr_Clear(); return NULL; }
    if (!Py_IS_TYPE(m, &PyMethodDescr_Type)) { Py_DECREF(m); return NULL; }
    return m;
}

/* The DLPack exchange API a tensor type offers (on the type, as dlpack.h says to look it up),
 * NULL when it has none or one of another major version or without the dltensor function. */
static const DLExchange *exchange_api(PyTypeObject *type, PyObject **owner) {
    *owner = NULL;
    PyObject *cap = PyObject_GetAttr((PyObject *)type, s_exchange_api);
    if (cap == NULL) {
        PyErr_Clear();
        cap = PyObject_GetAttr((PyObject *)type, s_exchange_api_old);
    }
    if (cap == NULL) { PyErr_Clear(); return NULL; }
    const DLExchange *api = PyCapsule_IsValid(cap, "dlpack_exchange_api")
                                ? (const DLExchange *)PyCapsule_GetPointer(cap, "dlpack_exchange_api") : NULL;
    if (api == NULL || api->header.version.major != 1 || api->header.version.minor < 2 ||
        api->dltensor_from_py_object_no_sync == NULL) {
        PyErr_Clear();
        Py_DECREF(cap);
        return NULL;
    }
    *owner = cap;
    return api;
}

/* A tensor's device, address and DLPack type through the exchange API: 1 a CUDA tensor (`*p` its
 * address, `*key` its type), 0 not one C can launch with (not CUDA, or the exporter refused it:
 * the Python path decides). */
static int exchange_read(const TensorReader *tensor, PyObject *x, unsigned long long *p, uint32_t *key) {
    DLTens t;
    if (tensor->exchange->dltensor_from_py_object_no_sync(x, &t) != 0) { PyErr_Clear(); return 0; }
    if (t.device.device_type != DL_CUDA) return 0;
    *p = (unsigned long long)(uintptr_t)t.data + t.byte_offset;
    *key = dl_key(t.dtype);
    return 1;
}

/* Whether the getters must be called (a TorchFunctionMode may override them). */
static int modes_active(const TensorReader *tensor) {
    if (tensor->mode_enabled == NULL) return 0;
    PyObject *r = PyObject_CallNoArgs(tensor->mode_enabled);
    if (r == NULL) { PyErr_Clear(); return 1; }
    int on = r != Py_False;
    Py_DECREF(r);
    return on;
}

/* A torch tensor's address when it is a CUDA tensor: 1 with `*p` set, 0 when C does not launch
 * with it (not CUDA, or a read failed: the Python path decides). Through the exchange API unless
 * a TorchFunctionMode is active (`*modes`: asked at the first tensor of a call; `*key` the
 * tensor's DLPack type), else through the `is_cuda` getter and `data_ptr()` (`*key` NO_DL_KEY). */
static int tensor_address(PyObject *x, const TensorReader *tensor, int *modes, unsigned long long *p,
                          uint32_t *key) {
    *key = NO_DL_KEY;
    if (tensor->exchange != NULL) {
        if (*modes < 0) *modes = modes_active(tensor);
        if (*modes == 0) return exchange_read(tensor, x, p, key);
    }
    PyObject *is_cuda = read_attr(x, tensor->is_cuda, s_is_cuda);
    if (is_cuda == NULL) { PyErr_Clear(); return 0; }
    int cuda = is_cuda == Py_True;
    Py_DECREF(is_cuda);
    if (!cuda) return 0;
    PyObject *self[1] = {x};
    PyObject *ptr = tensor->data_ptr != NULL ? PyObject_Vectorcall(tensor->data_ptr, self, 1, NULL)
                                             : PyObject_CallMethodNoArgs(x, s_data_ptr);
    if (ptr == NULL) { PyErr_Clear(); return 0; }
    *p = PyLong_AsUnsignedLongLong(ptr);
    Py_DECREF(ptr);
    if (*p == (unsigned long long)-1 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
    return 1;
}

static void classify(Seen *seen, PyObject *x, const TensorReader *tensor, int *modes) {
    seen->done = 1;
    seen->kind = KIND_OTHER;
    PyTypeObject *tp = Py_TYPE(x);
    if (tp == tensor->type) {
        unsigned long long p;
        uint32_t key;
        if (!tensor_address(x, tensor, modes, &p, &key)) return;
        PyObject *dtype = key == NO_DL_KEY ? NULL : table_dtype(tensor, key);
        seen->dtype_from_table = dtype != NULL;
        if (dtype == NULL) {
            dtype = read_attr(x, tensor->dtype, s_dtype);
            if (dtype == NULL) { PyErr_Clear(); return; }
            /* Borrowed from here on: torch's dtypes live as long as torch; a plan that compares
             * against this pointer holds its own reference to its dtype. */
            Py_DECREF(dtype);
        }
        seen->kind = KIND_TENSOR;
        seen->dtype = dtype;
        seen->bits = p;
        seen->cls = (p & 15) == 0;
    } else if (tp == &PyLong_Type) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(x, &overflow);
        if (v == -1 && PyErr_Occurred()) { PyErr_Clear(); return; }
        if (overflow > 0) {
            unsigned long long u = PyLong_AsUnsignedLongLong(x);
            if (u == (unsigned long long)-1 && PyErr_Occurred()) { PyErr_Clear(); return; }
            seen->bits = u;
            seen->range = RANGE_U64;
        } else if (overflow < 0) {
            return; /* below int64: the Python path raises its error */
        } else {
            seen->bits = (uint64_t)v;
            seen->range = (v >= INT32_MIN && v <= INT32_MAX) ? RANGE_I32 : RANGE_I64;
        }
        int is_one = seen->range == RANGE_I32 && seen->bits == 1;
        seen->kind = KIND_INT;
        seen->cls = seen->range * 4 + is_one * 2 + ((seen->bits & 15) == 0);
    } else if (tp == &PyFloat_Type) {
        seen->kind = KIND_FLOAT;
        seen->real = PyFloat_AS_DOUBLE(x);
        seen->cls = 0;
    }
}

/* ---- plans -------------------------------------------------------------------------------- */

typedef struct {
    int role;
    int kind;         /* RUNTIME: KIND_* */
    int cls;          /* RUNTIME: Seen.cls */
    PyObject *obj;    /* RUNTIME tensor: its dtype; VALUE: the value (strong references) */
} Elem;

typedef struct {
    int code;         /* W_* */
    int src;          /* the argument it reads (W_PTR, W_INT, W_F32, W_F64) */
    unsigned offset;  /* byte offset in the parameter buffer */
    unsigned size;    /* bytes written */
    long long lo;     /* W_INT: the parameter type's range */
    unsigned long long hi;
    unsigned long long bits; /* W_CONST: the bytes, little-endian */
} Writer;

typedef struct {
    PyObject_HEAD
    Py_ssize_t nargs;
    PyObject *kwnames;   /* a tuple, or NULL for none */
    Py_ssize_t nelem;
    Elem elems[MAX_ELEMS];
    int nwriters;
    Writer writers[MAX_PARAMS];
    int nparams;
    unsigned offsets[MAX_PARAMS];
    tlx_launch_config config;  /* block, smem, cluster attribute; grid and stream set per call */
    void *function;
    unsigned cluster[3];
    int grid_in_clusters;
    PyObject *compiled;  /* what the launch returns */
    PyObject *keepalive; /* the launcher and its config (the cluster attribute's memory) */
} PlanObject;

static void plan_dealloc(PlanObject *p) {
    for (Py_ssize_t i = 0; i < p->nelem; i++)
        Py_XDECREF(p->elems[i].obj);
    Py_XDECREF(p->kwnames);
    Py_XDECREF(p->compiled);
    Py_XDECREF(p->keepalive);
    Py_TYPE(p)->tp_free((PyObject *)p);
}

static PyTypeObject PlanType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_tlx_native_launch.Plan",
    .tp_basicsize = sizeof(PlanObject),
    .tp_dealloc = (destructor)plan_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One specialization's launch, as the native dispatcher repeats it (internal).",
};

static int kwnames_equal(PyObject *a, PyObject *b) {
    if (a == b) return 1;
    Py_ssize_t na = a ? PyTuple_GET_SIZE(a) : 0, nb = b ? PyTuple_GET_SIZE(b) : 0;
    if (na != nb) return 0;
    for (Py_ssize_t i = 0; i < na; i++) {
        PyObject *x = PyTuple_GET_ITEM(a, i), *y = PyTuple_GET_ITEM(b, i);
        if (x != y && PyUnicode_Compare(x, y) != 0) return 0; /* names are str: no error */
    }
    return 1;
}

static int value_equal(PyObject *x, PyObject *v) {
    if (x == v) return 1;
    if (Py_TYPE(x) != Py_TYPE(v)) return 0; /* 1 and 1.0 and True are different keys */
    int eq = PyObject_RichCompareBool(x, v, Py_EQ);
    if (eq < 0) { PyErr_Clear(); return 0; }
    return eq;
}

/* Whether the call's arguments satisfy plan `p` (computing each argument's class once). */
static int plan_matches(PlanObject *p, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                        Seen *seen, const TensorReader *tensor, int *modes) {
    if (p->nargs != nargs || !kwnames_equal(p->kwnames, kwnames)) return 0;
    for (Py_ssize_t i = 0; i < p->nelem; i++) {
        const Elem *e = &p->elems[i];
        if (e->role == ROLE_RUNTIME) {
            if (!seen[i].done) classify(&seen[i], args[i], tensor, modes);
            if (seen[i].kind != e->kind || seen[i].cls != e->cls) return 0;
            if (e->kind == KIND_TENSOR && seen[i].dtype != e->obj) return 0;
        } else if (e->role == ROLE_VALUE) {
            if (!value_equal(args[i], e->obj)) return 0;
        }
    }
    return 1;
}

/* Writes the parameter values; 0 when one does not fit its type (the Python path says why). */
static int pack_params(PlanObject *p, const Seen *seen, unsigned char *buf) {
    for (int w = 0; w < p->nwriters; w++) {
        const Writer *wr = &p->writers[w];
        unsigned char *at = buf + wr->offset;
        switch (wr->code) {
        case W_PTR:
            memcpy(at, &seen[wr->src].bits, 8);
            break;
        case W_INT: {
            const Seen *s = &seen[wr->src];
            if (s->range == RANGE_U64) {
                if (s->bits > wr->hi) return 0;
            } else {
                long long v = (long long)s->bits;
                if (v < wr->lo || (v > 0 && (unsigned long long)v > wr->hi)) return 0;
            }
            memcpy(at, &s->bits, wr->size); /* little-endian: the low bytes, sign kept */
            break;
        }
        case W_F32: {
            double d = seen[wr->src].real;
            if (isfinite(d) && fabs(d) > FLT_MAX) return 0; /* struct.pack('f') refuses it too */
            float f = (float)d;
            memcpy(at, &f, 4);
            break;
        }
        case W_F64:
            memcpy(at, &seen[wr->src].real, 8);
            break;
        default: /* W_CONST */
            memcpy(at, &wr->bits, wr->size);
        }
    }
    return 1;
}

/* ---- the dispatcher ----------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *hook;           /* hook(grid, *args, **kw) -> (result, plan spec or None) */
    PyObject *fallback;       /* the generated Python dispatcher: fallback(grid, *args, **kw) */
    PyObject *interpret;      /* interpret(grid, *args, **kw): the launch under TLX_INTERPRET */
    TensorReader tensor;
    PyObject *get_device;     /* torch's current stream: get_stream(get_device()), or */
    PyObject *get_stream;     /* get_stream(-1) without get_device (-1: the current device), */
    PyObject *default_stream; /* else default_stream() */
    int exchange_stream;      /* torch's current stream through the exchange API (see `current_stream`) */
    PyObject *env, *env_key, *env_off; /* where TLX_INTERPRET is read (see `interpreting`) */
    PyObject *plans;          /* list of Plan, most recently used first */
    unsigned long long hits, misses;
} DispatcherObject;

static void dispatcher_dealloc(DispatcherObject *d) {
    Py_XDECREF(d->hook);
    Py_XDECREF(d->fallback);
    Py_XDECREF(d->interpret);
    Py_XDECREF(d->tensor.type);
    Py_XDECREF(d->tensor.is_cuda);
    Py_XDECREF(d->tensor.dtype);
    Py_XDECREF(d->tensor.data_ptr);
    Py_XDECREF(d->tensor.exchange_owner);
    Py_XDECREF(d->tensor.mode_enabled);
    for (int i = 0; i < d->tensor.ndtypes; i++) Py_XDECREF(d->tensor.dtypes[i].dtype);
    Py_XDECREF(d->get_device);
    Py_XDECREF(d->get_stream);
    Py_XDECREF(d->default_stream);
    Py_XDECREF(d->plans);
    Py_XDECREF(d->env);
    Py_XDECREF(d->env_key);
    Py_XDECREF(d->env_off);
    Py_TYPE(d)->tp_free((PyObject *)d);
}

/* The dtype table (see TensorReader) from one sample tensor per torch dtype: each sample's DLPack
 * type through the exchange API (whatever its device) and its dtype through the getter; a type
 * that two dtypes export maps to none. Samples the exporter refuses are skipped. */
static int build_dtype_table(TensorReader *tensor, PyObject *samples) {
    tensor->ndtypes = 0;
    tensor->dtypes_trusted = 1;
    if (tensor->exchange == NULL || samples == Py_None) return 0;
    PyObject *seq = PySequence_Fast(samples, "dtype_samples must be a sequence of tensors");
    if (seq == NULL) return -1;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *x = PySequence_Fast_GET_ITEM(seq, i);
        DLTens t;
        if (Py_TYPE(x) != tensor->type) continue;
        if (tensor->exchange->dltensor_from_py_object_no_sync(x, &t) != 0) { PyErr_Clear(); continue; }
        PyObject *dtype = read_attr(x, tensor->dtype, s_dtype);
        if (dtype == NULL) { PyErr_Clear(); continue; }
        uint32_t key = dl_key(t.dtype);
        int j = 0;
        while (j < tensor->ndtypes && tensor->dtypes[j].key != key) j++;
        if (j < tensor->ndtypes) {
            if (tensor->dtypes[j].dtype != dtype) Py_CLEAR(tensor->dtypes[j].dtype); /* one type, two dtypes */
            Py_DECREF(dtype);
        } else if (j < MAX_DTYPES) {
            tensor->dtypes[j].key = key;
            tensor->dtypes[j].dtype = dtype; /* the reference read_attr gave */
            tensor->ndtypes++;
        } else {
            Py_DECREF(dtype);
        }
    }
    Py_DECREF(seq);
    return 0;
}

static int table_size(const TensorReader *tensor) {
    int n = 0;
    for (int i = 0; tensor->dtypes_trusted && i < tensor->ndtypes; i++) n += tensor->dtypes[i].dtype != NULL;
    return n;
}

static PyObject *dispatcher_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *names[] = {"hook", "fallback", "interpret", "tensor_type", "get_device",
                            "get_stream", "default_stream", "env", "env_key", "env_off",
                            "mode_enabled", "dtype_samples", NULL};
    PyObject *hook, *fallback, *interpret, *tensor_type, *get_device, *get_stream, *default_stream;
    PyObject *env, *env_key, *env_off, *mode_enabled = Py_None, *dtype_samples = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO!OOOO!OO!|OO", names, &hook, &fallback, &interpret,
                                     &PyType_Type, &tensor_type, &get_device, &get_stream,
                                     &default_stream, &PyDict_Type, &env, &env_key, &PyTuple_Type,
                                     &env_off, &mode_enabled, &dtype_samples))
        return NULL;
    DispatcherObject *d = (DispatcherObject *)type->tp_alloc(type, 0);
    if (d == NULL) return NULL;
    d->plans = PyList_New(0);
    if (d->plans == NULL) { Py_DECREF(d); return NULL; }
    d->hook = Py_NewRef(hook);
    d->fallback = Py_NewRef(fallback);
    d->interpret = Py_NewRef(interpret);
    d->tensor.type = (PyTypeObject *)Py_NewRef(tensor_type);
    d->tensor.is_cuda = data_descriptor(d->tensor.type, s_is_cuda);
    d->tensor.dtype = data_descriptor(d->tensor.type, s_dtype);
    d->tensor.data_ptr = c_method(d->tensor.type, s_data_ptr);
    d->get_device = get_device == Py_None ? NULL : Py_NewRef(get_device);
    d->get_stream = get_stream == Py_None ? NULL : Py_NewRef(get_stream);
    d->default_stream = Py_NewRef(default_stream);
    d->tensor.exchange = exchange_api(d->tensor.type, &d->tensor.exchange_owner);
    d->tensor.mode_enabled = mode_enabled == Py_None ? NULL : Py_NewRef(mode_enabled);
    if (build_dtype_table(&d->tensor, dtype_samples) < 0) { Py_DECREF(d); return NULL; }
    d->exchange_stream = 0;
    if (d->tensor.exchange != NULL && d->tensor.exchange->current_work_stream != NULL &&
        d->get_device == NULL && d->get_stream != NULL) {
        /* get_stream(-1) is what the Python path asks (tlx/launch.py checked it names the current
         * device's stream); current_work_stream(CUDA, -1) must give the same stream to stand in */
        void *mine = NULL;
        PyObject *theirs = NULL;
        if (d->tensor.exchange->current_work_stream(DL_CUDA, -1, &mine) == 0 &&
            (theirs = PyObject_CallOneArg(d->get_stream, s_current_device)) != NULL) {
            void *t = PyLong_AsVoidPtr(theirs);
            d->exchange_stream = !PyErr_Occurred() && t == mine;
        }
        Py_XDECREF(theirs);
        PyErr_Clear();
    }
    d->env = Py_NewRef(env);
    d->env_key = Py_NewRef(env_key);
    d->env_off = Py_NewRef(env_off);
    return (PyObject *)d;
}

/* Builds a plan from the hook's spec and the arguments of the call it launched. NULL (no
 * error set) when the spec or the arguments are not something C can repeat. */
static PlanObject *plan_from_spec(DispatcherObject *d, PyObject *spec, PyObject *const *args,
                                  Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *roles, *values, *writers, *offsets, *cluster, *compiled, *keepalive;
    unsigned long long config_address, function;
    int grid_in_clusters;
    if (!PyArg_ParseTuple(spec, "OOOOKKOpOO", &roles, &values, &writers, &offsets, &config_address,
                          &function, &cluster, &grid_in_clusters, &compiled, &keepalive))
        return NULL;
    Py_ssize_t nelem = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
    if (!PyTuple_Check(roles) || !PyTuple_Check(values) || !PyTuple_Check(writers) ||
        !PyTuple_Check(offsets) || PyTuple_GET_SIZE(roles) != nelem ||
        PyTuple_GET_SIZE(values) != nelem || nelem > MAX_ELEMS ||
        PyTuple_GET_SIZE(writers) > MAX_PARAMS || PyTuple_GET_SIZE(offsets) > MAX_PARAMS) {
        PyErr_SetString(PyExc_ValueError, "native dispatcher: malformed plan spec");
        return NULL;
    }
    PlanObject *p = PyObject_New(PlanObject, &PlanType);
    if (p == NULL) return NULL;
    p->nelem = 0; /* plan_dealloc reads only what is filled */
    p->kwnames = kwnames ? Py_NewRef(kwnames) : NULL;
    p->compiled = Py_NewRef(compiled);
    p->keepalive = Py_NewRef(keepalive);
    p->nargs = nargs;
    Seen seen[MAX_ELEMS];
    memset(seen, 0, sizeof(seen));
    int modes = -1; /* whether a TorchFunctionMode is active: asked at the first tensor */
    for (Py_ssize_t i = 0; i < nelem; i++) {
        Elem *e = &p->elems[i];
        e->role = (int)PyLong_AsLong(PyTuple_GET_ITEM(roles, i));
        e->obj = NULL;
        e->kind = KIND_OTHER;
        e->cls = 0;
        p->nelem = i + 1;
        if (e->role == ROLE_RUNTIME) {
            classify(&seen[i], args[i], &d->tensor, &modes);
            if (seen[i].kind == KIND_OTHER) goto decline;
            e->kind = seen[i].kind;
            e->cls = seen[i].cls;
            if (e->kind == KIND_TENSOR && seen[i].dtype_from_table) {
                /* every plan checks the dtype table against the getter, the Python path's reading */
                PyObject *dtype = read_attr(args[i], d->tensor.dtype, s_dtype);
                if (dtype == NULL) { PyErr_Clear(); goto decline; }
                Py_DECREF(dtype); /* borrowed, as in classify */
                if (dtype != seen[i].dtype) {
                    d->tensor.dtypes_trusted = 0;
                    seen[i].dtype = dtype;
                }
            }
            if (e->kind == KIND_TENSOR) e->obj = Py_NewRef(seen[i].dtype);
        } else if (e->role == ROLE_VALUE) {
            e->obj = Py_NewRef(PyTuple_GET_ITEM(values, i));
        } else if (e->role != ROLE_IGNORE) {
            goto bad;
        }
    }
    p->nwriters = (int)PyTuple_GET_SIZE(writers);
    for (int w = 0; w < p->nwriters; w++) {
        Writer *wr = &p->writers[w];
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(writers, w), "iiIILKK", &wr->code, &wr->src,
                              &wr->offset, &wr->size, &wr->lo, &wr->hi, &wr->bits))
            goto error;
        if (wr->size > 8 || wr->offset + wr->size > MAX_BUF) goto bad;
        if (wr->code != W_CONST) {
            /* the argument a writer reads must be a RUNTIME one of the kind it writes */
            static const int kind_of[] = {KIND_TENSOR, KIND_INT, KIND_FLOAT, KIND_FLOAT};
            if (wr->code < 0 || wr->code > W_F64 || wr->src < 0 || wr->src >= nelem) goto bad;
            if (p->elems[wr->src].role != ROLE_RUNTIME) goto bad;
            if (p->elems[wr->src].kind != kind_of[wr->code]) goto decline; /* e.g. int -> fp32 */
        }
    }
    p->nparams = (int)PyTuple_GET_SIZE(offsets);
    for (int i = 0; i < p->nparams; i++) {
        unsigned long o = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(offsets, i));
        if (PyErr_Occurred()) goto error;
        if (o >= MAX_BUF) goto bad;
        p->offsets[i] = (unsigned)o;
    }
    if (!PyArg_ParseTuple(cluster, "III", &p->cluster[0], &p->cluster[1], &p->cluster[2])) goto error;
    if (!p->cluster[0] || !p->cluster[1] || !p->cluster[2]) goto bad;
    p->grid_in_clusters = grid_in_clusters;
    if (config_address == 0) goto bad;
    memcpy(&p->config, (const void *)(uintptr_t)config_address, sizeof(tlx_launch_config));
    p->function = (void *)(uintptr_t)function;
    return p;
bad:
    PyErr_SetString(PyExc_ValueError, "native dispatcher: malformed plan spec");
error:
    Py_DECREF(p);
    return NULL;
decline:
    Py_DECREF(p);
    return NULL; /* no error set: the call is fine, C just cannot repeat it */
}

static int add_plan(DispatcherObject *d, PlanObject *p) {
    Py_ssize_t n = PyList_GET_SIZE(d->plans);
    if (n >= MAX_PLANS && PyList_SetSlice(d->plans, MAX_PLANS - 1, n, NULL) < 0) return -1;
    return PyList_Insert(d->plans, 0, (PyObject *)p);
}

/* fn(grid, *args, **kw) with the call's own vector (grid put first) */
static PyObject *call_with_grid(PyObject *fn, PyObject *grid, PyObject *const *args,
                                size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t total = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
    if (nargsf & PY_VECTORCALL_ARGUMENTS_OFFSET) { /* the caller lent us args[-1] */
        PyObject **slot = (PyObject **)args - 1;
        PyObject *saved = *slot;
        *slot = grid;
        PyObject *r = PyObject_Vectorcall(fn, slot, nargs + 1, kwnames);
        *slot = saved;
        return r;
    }
    PyObject *small[MAX_ELEMS + 1];
    PyObject **vec = total < MAX_ELEMS ? small : PyMem_Malloc((total + 1) * sizeof(PyObject *));
    if (vec == NULL) return PyErr_NoMemory();
    vec[0] = grid;
    memcpy(vec + 1, args, total * sizeof(PyObject *));
    PyObject *r = PyObject_Vectorcall(fn, vec, nargs + 1, kwnames);
    if (vec != small) PyMem_Free(vec);
    return r;
}

/* The miss path: launch through Python, keep the plan it returns. */
static PyObject *miss(DispatcherObject *d, PyObject *grid, PyObject *const *args, size_t nargsf,
                      PyObject *kwnames) {
    d->misses++;
    PyObject *pair = call_with_grid(d->hook, grid, args, nargsf, kwnames);
    if (pair == NULL) return NULL;
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
        Py_DECREF(pair);
        PyErr_SetString(PyExc_TypeError, "native dispatcher: the hook must return (result, plan)");
        return NULL;
    }
    PyObject *result = Py_NewRef(PyTuple_GET_ITEM(pair, 0));
    PyObject *spec = PyTuple_GET_ITEM(pair, 1);
    if (spec != Py_None) {
        PlanObject *p = plan_from_spec(d, spec, args, PyVectorcall_NARGS(nargsf), kwnames);
        if (p != NULL) {
            if (add_plan(d, p) < 0) { Py_DECREF(p); Py_DECREF(pair); Py_DECREF(result); return NULL; }
            Py_DECREF(p);
        } else if (PyErr_Occurred()) {
            Py_DECREF(pair);
            Py_DECREF(result);
            return NULL;
        }
    }
    Py_DECREF(pair);
    return result;
}

/* Whether TLX_INTERPRET asks for the interpreter, read as tlx/jit.py's interpret_requested reads
 * it: `env` (os.environ's own dict of encoded entries) at `env_key`, set and none of `env_off`. */
static int interpreting(DispatcherObject *d) {
    PyObject *v = PyDict_GetItemWithError(d->env, d->env_key); /* borrowed */
    if (v == NULL) {
        PyErr_Clear();
        return 0;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(d->env_off);
    for (Py_ssize_t i = 0; i < n; i++) {
        int eq = PyObject_RichCompareBool(v, PyTuple_GET_ITEM(d->env_off, i), Py_EQ);
        if (eq < 0) PyErr_Clear();
        if (eq > 0) return 0;
    }
    return 1;
}

static int current_stream(DispatcherObject *d, void **stream) {
    PyObject *s;
    if (d->exchange_stream) {
        if (d->tensor.exchange->current_work_stream(DL_CUDA, -1, stream) == 0) return 0;
        return -1; /* the Python path asks again and raises torch's error */
    }
    if (d->get_device != NULL) {
        PyObject *dev = PyObject_CallNoArgs(d->get_device);
        if (dev == NULL) return -1;
        s = PyObject_CallOneArg(d->get_stream, dev);
        Py_DECREF(dev);
    } else if (d->get_stream != NULL) {
        s = PyObject_CallOneArg(d->get_stream, s_current_device);
    } else {
        s = PyObject_CallNoArgs(d->default_stream);
    }
    if (s == NULL) return -1;
    *stream = PyLong_AsVoidPtr(s);
    Py_DECREF(s);
    return (*stream == NULL && PyErr_Occurred()) ? -1 : 0;
}

static PyTypeObject DispatcherType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_tlx_native_launch.Dispatcher",
    .tp_basicsize = sizeof(DispatcherObject),
    .tp_dealloc = (destructor)dispatcher_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = dispatcher_new,
    .tp_doc = "Dispatcher(hook, fallback, interpret, tensor_type, get_device, get_stream, "
              "default_stream, env, env_key, env_off, mode_enabled=None, dtype_samples=None): one "
              "kernel's native launch plans (see native_dispatch.c).",
};

static PyObject *dispatcher_stats(DispatcherObject *d, PyObject *unused) {
    return Py_BuildValue("{s:K,s:K,s:n,s:O,s:O,s:i}", "hits", d->hits, "misses", d->misses, "plans",
                         PyList_GET_SIZE(d->plans), "exchange", d->tensor.exchange ? Py_True : Py_False,
                         "exchange_stream", d->exchange_stream ? Py_True : Py_False,
                         "dtype_table", table_size(&d->tensor));
}

static PyObject *dispatcher_clear(DispatcherObject *d, PyObject *unused) {
    if (PyList_SetSlice(d->plans, 0, PyList_GET_SIZE(d->plans), NULL) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef dispatcher_methods[] = {
    {"stats", (PyCFunction)dispatcher_stats, METH_NOARGS,
     "{'hits', 'misses', 'plans', 'exchange' (tensors read through DLPack's C exchange API), "
     "'exchange_stream' (torch's stream too), 'dtype_table' (DLPack types whose torch dtype C "
     "knows without the getter)}"},
    {"clear", (PyCFunction)dispatcher_clear, METH_NOARGS, "Forget every plan."},
    {NULL, NULL, 0, NULL},
};

/* ---- kernel[grid] --------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    DispatcherObject *dispatcher;
    PyObject *grid;
    unsigned dims[3];
} BoundLaunchObject;

static const unsigned long long MAX_GRID[3] = {2147483647ULL, 65535ULL, 65535ULL};

/* Launches `plan` (held by the caller) with the call's classified arguments; the compiled kernel,
 * or NULL (no error set) when C does not launch it: a grid or value the Python path must judge,
 * the stream query failing, a driver error (nothing was launched then). */
static PyObject *launch_plan(DispatcherObject *d, BoundLaunchObject *b, PlanObject *plan,
                             const Seen *seen) {
    tlx_launch_config config = plan->config;
    unsigned long long g[3];
    for (int a = 0; a < 3; a++) {
        g[a] = (unsigned long long)b->dims[a] * (plan->grid_in_clusters ? plan->cluster[a] : 1);
        if (g[a] > MAX_GRID[a] || g[a] % plan->cluster[a])
            return NULL;
    }
    if (g[0] == 0 || g[1] == 0 || g[2] == 0) { /* an empty grid launches nothing */
        d->hits++;
        return Py_NewRef(plan->compiled);
    }
    config.gridDimX = (unsigned)g[0];
    config.gridDimY = (unsigned)g[1];
    config.gridDimZ = (unsigned)g[2];
    if (current_stream(d, &config.hStream) < 0) {
        PyErr_Clear();
        return NULL;
    }
    _Alignas(16) unsigned char buf[MAX_BUF];
    void *params[MAX_PARAMS];
    params[0] = NULL; /* a kernel without parameters: nothing for the driver to read */
    if (!pack_params(plan, seen, buf))
        return NULL;
    for (int i = 0; i < plan->nparams; i++) params[i] = buf + plan->offsets[i];
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = tlx_launch_entry(&config, plan->function, params, NULL);
    Py_END_ALLOW_THREADS
    if (err) /* the Python path retries (no context on this thread, another device) or raises */
        return NULL;
    d->hits++;
    return Py_NewRef(plan->compiled);
}

static PyObject *bound_call(BoundLaunchObject *b, PyObject *const *args, size_t nargsf,
                            PyObject *kwnames) {
    DispatcherObject *d = b->dispatcher;
    if (interpreting(d))
        return call_with_grid(d->interpret, b->grid, args, nargsf, kwnames);
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t nelem = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
    if (nelem > MAX_ELEMS || tlx_launch_entry == NULL)
        return call_with_grid(d->fallback, b->grid, args, nargsf, kwnames);
    Seen seen[MAX_ELEMS];
    for (Py_ssize_t i = 0; i < nelem; i++) seen[i].done = 0;
    /* Matching calls back into Python (torch's getters, a constexpr's __eq__, the stream query),
     * where another thread may run and change the plan list: each plan is held while it is
     * looked at, and the list is re-read at every step. */
    PlanObject *plan = NULL;
    int modes = -1; /* whether a TorchFunctionMode is active: asked at the first tensor */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(d->plans); i++) {
        PlanObject *p = (PlanObject *)Py_NewRef(PyList_GET_ITEM(d->plans, i));
        if (plan_matches(p, args, nargs, kwnames, seen, &d->tensor, &modes)) {
            plan = p; /* a strong reference, released below */
            if (i > 0 && i < PyList_GET_SIZE(d->plans) && PyList_GET_ITEM(d->plans, i) == (PyObject *)p) {
                /* most recently used first */
                if (PyList_SetSlice(d->plans, i, i + 1, NULL) < 0 ||
                    PyList_Insert(d->plans, 0, (PyObject *)p) < 0) {
                    Py_DECREF(p);
                    return NULL;
                }
            }
            break;
        }
        Py_DECREF(p);
    }
    if (plan == NULL)
        return miss(d, b->grid, args, nargsf, kwnames);
    PyObject *result = launch_plan(d, b, plan, seen);
    Py_DECREF(plan);
    if (result == NULL) /* not launched here: the Python path retries, raises or says why */
        return call_with_grid(d->fallback, b->grid, args, nargsf, kwnames);
    return result;
}

static void bound_dealloc(BoundLaunchObject *b) {
    Py_XDECREF(b->dispatcher);
    Py_XDECREF(b->grid);
    Py_TYPE(b)->tp_free((PyObject *)b);
}

/* BoundLaunch(dispatcher, grid): grid a tuple of 1 to 3 ints in 0..2**31-1, or one such int
 * (anything else is a ValueError: that grid takes the Python path). */
static PyObject *bound_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *dispatcher, *grid;
    if (!PyArg_ParseTuple(args, "O!O", &DispatcherType, &dispatcher, &grid)) return NULL;
    unsigned dims[3] = {1, 1, 1};
    Py_ssize_t n = 1;
    if (PyLong_CheckExact(grid)) {
        n = 1;
    } else if (PyTuple_CheckExact(grid)) {
        n = PyTuple_GET_SIZE(grid);
    } else {
        PyErr_SetString(PyExc_ValueError, "grid is not an int or a tuple of ints");
        return NULL;
    }
    if (n < 1 || n > 3) {
        PyErr_SetString(PyExc_ValueError, "grid has not 1 to 3 dimensions");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyLong_CheckExact(grid) ? grid : PyTuple_GET_ITEM(grid, i);
        if (!PyLong_CheckExact(x)) {
            PyErr_SetString(PyExc_ValueError, "grid dimension is not an int");
            return NULL;
        }
        long long v = PyLong_AsLongLong(x);
        if (v == -1 && PyErr_Occurred()) return NULL;
        if (v < 0 || v > 2147483647LL) {
            PyErr_SetString(PyExc_ValueError, "grid dimension out of range");
            return NULL;
        }
        dims[i] = (unsigned)v;
    }
    BoundLaunchObject *b = (BoundLaunchObject *)type->tp_alloc(type, 0);
    if (b == NULL) return NULL;
    b->vectorcall = (vectorcallfunc)bound_call;
    b->dispatcher = (DispatcherObject *)Py_NewRef(dispatcher);
    b->grid = Py_NewRef(grid);
    memcpy(b->dims, dims, sizeof(dims));
    return (PyObject *)b;
}

static PyMemberDef bound_members[] = {
    {"grid", T_OBJECT_EX, offsetof(BoundLaunchObject, grid), READONLY, "the grid it launches"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject BoundLaunchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_tlx_native_launch.BoundLaunch",
    .tp_basicsize = sizeof(BoundLaunchObject),
    .tp_dealloc = (destructor)bound_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(BoundLaunchObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = bound_new,
    .tp_members = bound_members,
    .tp_doc = "BoundLaunch(dispatcher, grid): `kernel[grid]`; calling it launches.",
};

/* ---- kernel[grid] itself ---------------------------------------------------------------------
 * Subscript(getitem): installed as JITFunction.__getitem__ (tlx/launch.py), a method descriptor
 * that CPython calls as (kernel, grid) without binding. When the kernel's `_last_launch` tuple
 * (grid, launch, is_native) holds a native BoundLaunch for this very grid object, it returns it;
 * otherwise it calls `getitem(kernel, grid)`, the Python method, which decides and records. */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *getitem;
} SubscriptObject;

static PyObject *s_last_launch;

static PyObject *subscript_call(SubscriptObject *s, PyObject *const *args, size_t nargsf,
                                PyObject *kwnames) {
    if (PyVectorcall_NARGS(nargsf) == 2 && kwnames == NULL) {
        PyObject *last = PyObject_GetAttr(args[0], s_last_launch);
        if (last == NULL) {
            PyErr_Clear();
        } else {
            if (PyTuple_CheckExact(last) && PyTuple_GET_SIZE(last) == 3 &&
                PyTuple_GET_ITEM(last, 0) == args[1] && PyTuple_GET_ITEM(last, 2) == Py_True) {
                PyObject *bound = Py_NewRef(PyTuple_GET_ITEM(last, 1));
                Py_DECREF(last);
                return bound;
            }
            Py_DECREF(last);
        }
    }
    return PyObject_Vectorcall(s->getitem, args, nargsf, kwnames);
}

static PyObject *subscript_get(PyObject *self, PyObject *obj, PyObject *type) {
    if (obj == NULL || obj == Py_None) return Py_NewRef(self);
    return PyMethod_New(self, obj); /* kernel.__getitem__ read as an attribute */
}

static void subscript_dealloc(SubscriptObject *s) {
    Py_XDECREF(s->getitem);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyObject *subscript_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *getitem;
    if (!PyArg_ParseTuple(args, "O", &getitem)) return NULL;
    SubscriptObject *s = (SubscriptObject *)type->tp_alloc(type, 0);
    if (s == NULL) return NULL;
    s->vectorcall = (vectorcallfunc)subscript_call;
    s->getitem = Py_NewRef(getitem);
    return (PyObject *)s;
}

static PyMemberDef subscript_members[] = {
    {"getitem", T_OBJECT_EX, offsetof(SubscriptObject, getitem), READONLY, "the Python method"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject SubscriptType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_tlx_native_launch.Subscript",
    .tp_basicsize = sizeof(SubscriptObject),
    .tp_dealloc = (destructor)subscript_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_vectorcall_offset = offsetof(SubscriptObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = subscript_get,
    .tp_new = subscript_new,
    .tp_members = subscript_members,
    .tp_doc = "Subscript(getitem): JITFunction.__getitem__ with its cache hit in C.",
};

/* ---- a DLPack exchange API for tests ------------------------------------------------------
 * exchange_for_tests(read, stream, major=1, minor=3) -> a "dlpack_exchange_api" capsule whose
 * dltensor_from_py_object_no_sync calls read(x) -> (address, device_type[, (code, bits, lanes)])
 * (the DLPack data type, zeros when left out; an exception: the exporter refuses x) and
 * current_work_stream calls stream(device_id) -> int: the CPU tests put it on their stand-in
 * tensor class, so the exchange path runs without torch. One at a time. */

static PyObject *test_read, *test_stream;
static DLExchange test_api;

static int test_dltensor(void *x, DLTens *out) {
    memset(out, 0, sizeof(*out));
    PyObject *r = PyObject_CallOneArg(test_read, (PyObject *)x);
    if (r == NULL) return -1;
    unsigned long long a;
    int dev;
    unsigned char code = 0, bits = 0;
    unsigned short lanes = 0;
    int ok = PyArg_ParseTuple(r, "Ki|(bbH)", &a, &dev, &code, &bits, &lanes);
    Py_DECREF(r);
    if (!ok) return -1;
    out->data = (void *)(uintptr_t)a;
    out->device.device_type = dev;
    out->dtype.code = code;
    out->dtype.bits = bits;
    out->dtype.lanes = lanes;
    return 0;
}

static int test_work_stream(int32_t device_type, int32_t device_id, void **out) {
    if (device_type != DL_CUDA) { *out = NULL; return 0; }
    PyObject *r = PyObject_CallFunction(test_stream, "i", (int)device_id);
    if (r == NULL) return -1;
    *out = PyLong_AsVoidPtr(r);
    Py_DECREF(r);
    return PyErr_Occurred() ? -1 : 0;
}

static PyObject *exchange_for_tests(PyObject *self, PyObject *args) {
    PyObject *read, *stream;
    unsigned major = 1, minor = 3;
    if (!PyArg_ParseTuple(args, "OO|II", &read, &stream, &major, &minor)) return NULL;
    Py_XSETREF(test_read, Py_NewRef(read));
    Py_XSETREF(test_stream, Py_NewRef(stream));
    test_api.header.version.major = major;
    test_api.header.version.minor = minor;
    test_api.dltensor_from_py_object_no_sync = test_dltensor;
    test_api.current_work_stream = test_work_stream;
    return PyCapsule_New(&test_api, "dlpack_exchange_api", NULL);
}

static PyMethodDef dispatch_functions[] = {
    {"exchange_for_tests", exchange_for_tests, METH_VARARGS,
     "exchange_for_tests(read, stream, major=1, minor=3): a DLPack exchange API capsule for tests."},
    {NULL, NULL, 0, NULL},
};

int tlx_dispatch_add_types(PyObject *module) {
    s_is_cuda = PyUnicode_InternFromString("is_cuda");
    s_dtype = PyUnicode_InternFromString("dtype");
    s_data_ptr = PyUnicode_InternFromString("data_ptr");
    s_last_launch = PyUnicode_InternFromString("_last_launch");
    s_exchange_api = PyUnicode_InternFromString("__dlpack_c_exchange_api__");
    s_exchange_api_old = PyUnicode_InternFromString("__c_dlpack_exchange_api__");
    s_current_device = PyLong_FromLong(-1);
    if (!s_is_cuda || !s_dtype || !s_data_ptr || !s_last_launch || !s_current_device || !s_exchange_api || !s_exchange_api_old) return -1;
    DispatcherType.tp_methods = dispatcher_methods;
    if (PyType_Ready(&PlanType) < 0 || PyType_Ready(&DispatcherType) < 0 ||
        PyType_Ready(&BoundLaunchType) < 0 || PyType_Ready(&SubscriptType) < 0)
        return -1;
    if (PyModule_AddObjectRef(module, "Dispatcher", (PyObject *)&DispatcherType) < 0 ||
        PyModule_AddObjectRef(module, "BoundLaunch", (PyObject *)&BoundLaunchType) < 0 ||
        PyModule_AddObjectRef(module, "Subscript", (PyObject *)&SubscriptType) < 0)
        return -1;
    if (PyModule_AddFunctions(module, dispatch_functions) < 0) return -1;
    PyModule_AddIntConstant(module, "MAX_PLANS", MAX_PLANS);
    PyModule_AddIntConstant(module, "MAX_ELEMS", MAX_ELEMS);
    PyModule_AddIntConstant(module, "MAX_PARAMS", MAX_PARAMS);
    PyModule_AddIntConstant(module, "MAX_BUF", MAX_BUF);
    return 0;
}
