/* tlx's native launch entry: one call from Python straight into the driver's cuLaunchKernelEx.
 *
 * Why: cuda.bindings' cuLaunchKernelEx wrapper adds its Python-to-C conversion to every launch:
 * on the H200's host the call measured 3.9-4.0 us through it and 3.2-3.3 us from here
 * (benchmarks/launch_overhead.py), and a launcher launch with four arguments 5.8 vs 4.6 us. The
 * launcher already keeps a prebuilt CUlaunchConfig (cuda.bindings' own struct, whose address it
 * passes here) and a pre-packed void** per specialization, so all this module does is turn
 * three Python ints into pointers and make the call, with the GIL released as the driver runs.
 *
 * It needs neither cuda.h nor libcuda at build time: the driver's entry point arrives as an
 * address (`set_entry`), and the one struct it touches is declared below with cuda.h's layout.
 * `recording_entry()` is a C stand-in for cuLaunchKernelEx that records what it was given, so
 * tests and the CPU benchmark exercise this exact code on machines without a GPU.
 *
 * The module also holds the launch dispatcher (native_dispatch.c), which calls the same entry.
 *
 * Built on first use by tlx/runtime/native_launch.py (see there); the module name is fixed. */

#include "native_launch.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

tlx_launch_fn tlx_launch_entry = NULL;

static PyObject *set_entry(PyObject *self, PyObject *address) {
    void *p = PyLong_AsVoidPtr(address);
    if (p == NULL && PyErr_Occurred())
        return NULL;
    tlx_launch_entry = (tlx_launch_fn)p;
    Py_RETURN_NONE;
}

/* launch(config_address, function_handle, params_address) -> CUresult as an int */
static PyObject *launch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "launch(config_address, function_handle, params_address)");
        return NULL;
    }
    const tlx_launch_config *config = (const tlx_launch_config *)PyLong_AsVoidPtr(args[0]);
    void *function = PyLong_AsVoidPtr(args[1]);
    void **params = (void **)PyLong_AsVoidPtr(args[2]);
    if (PyErr_Occurred())
        return NULL;
    if (tlx_launch_entry == NULL || config == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "tlx native launch: no driver entry point or config");
        return NULL;
    }
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = tlx_launch_entry(config, function, params, NULL);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(err);
}

/* The recording stand-in: keeps a copy of the last call's arguments, returns `recorded_result`. */
static tlx_launch_config recorded_config;
static void *recorded_function = NULL;
static void **recorded_params = NULL;
static unsigned long long recorded_first_param = 0;
static unsigned long long recorded_calls = 0;
static int recorded_result = 0;

/* The call log the frontend's tests read (`logged_calls`): every call's config, function and
 * parameter bytes, for the function handles whose parameter sizes were registered
 * (`record_param_sizes`); parameters are copied during the call, as the driver copies them. */
#define LOG_CAPACITY 4096
#define LOG_KERNELS 256
#define LOG_PARAMS 64
typedef struct { void *function; int n; unsigned sizes[LOG_PARAMS]; } logged_kernel;
typedef struct { tlx_launch_config config; void *function; int n; unsigned sizes[LOG_PARAMS]; unsigned char *bytes; } logged_call;
static logged_kernel log_kernels[LOG_KERNELS];
static int log_nkernels = 0;
static logged_call call_log[LOG_CAPACITY];
static int log_ncalls = 0;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER; /* calls come without the GIL */

static void log_call_locked(const tlx_launch_config *config, void *f, void **params) {
    const logged_kernel *k = NULL;
    for (int i = 0; i < log_nkernels; i++)
        if (log_kernels[i].function == f) { k = &log_kernels[i]; break; }
    if (k == NULL || log_ncalls >= LOG_CAPACITY) return;
    size_t total = 0;
    for (int i = 0; i < k->n; i++) total += k->sizes[i];
    unsigned char *bytes = malloc(total ? total : 1);
    if (bytes == NULL) return;
    size_t at = 0;
    for (int i = 0; i < k->n; i++) {
        memcpy(bytes + at, params[i], k->sizes[i]);
        at += k->sizes[i];
    }
    logged_call *c = &call_log[log_ncalls++];
    c->config = *config;
    c->function = f;
    c->n = k->n;
    memcpy(c->sizes, k->sizes, sizeof(c->sizes));
    c->bytes = bytes;
}

static void log_call(const tlx_launch_config *config, void *f, void **params) {
    pthread_mutex_lock(&log_lock);
    log_call_locked(config, f, params);
    pthread_mutex_unlock(&log_lock);
}

static PyObject *record_param_sizes(PyObject *self, PyObject *args) {
    unsigned long long function;
    PyObject *sizes;
    if (!PyArg_ParseTuple(args, "KO!", &function, &PyTuple_Type, &sizes)) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(sizes);
    if (n > LOG_PARAMS || log_nkernels >= LOG_KERNELS) {
        PyErr_SetString(PyExc_ValueError, "record_param_sizes: too many parameters or kernels");
        return NULL;
    }
    pthread_mutex_lock(&log_lock);
    logged_kernel *k = &log_kernels[log_nkernels];
    k->function = (void *)(uintptr_t)function;
    k->n = (int)n;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned long v = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(sizes, i));
        if (PyErr_Occurred() || v > 128) {
            pthread_mutex_unlock(&log_lock);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "record_param_sizes: a parameter over 128 bytes");
            return NULL;
        }
        k->sizes[i] = (unsigned)v;
    }
    log_nkernels++;
    pthread_mutex_unlock(&log_lock);
    Py_RETURN_NONE;
}

static PyObject *reset_log(PyObject *self, PyObject *unused) {
    pthread_mutex_lock(&log_lock);
    for (int i = 0; i < log_ncalls; i++) free(call_log[i].bytes);
    log_ncalls = 0;
    log_nkernels = 0;
    pthread_mutex_unlock(&log_lock);
    Py_RETURN_NONE;
}

static PyObject *logged_calls_locked(void) {
    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    for (int i = 0; i < log_ncalls; i++) {
        logged_call *c = &call_log[i];
        PyObject *params = PyList_New(c->n);
        if (params == NULL) { Py_DECREF(out); return NULL; }
        size_t at = 0;
        for (int j = 0; j < c->n; j++) {
            PyList_SET_ITEM(params, j, PyBytes_FromStringAndSize((const char *)c->bytes + at, c->sizes[j]));
            at += c->sizes[j];
        }
        const tlx_launch_config *g = &c->config;
        PyObject *d = Py_BuildValue("{s:K,s:(III),s:(III),s:I,s:K,s:I,s:N}",
                                    "function", (unsigned long long)(uintptr_t)c->function,
                                    "grid", g->gridDimX, g->gridDimY, g->gridDimZ,
                                    "block", g->blockDimX, g->blockDimY, g->blockDimZ,
                                    "shared_bytes", g->sharedMemBytes,
                                    "stream", (unsigned long long)(uintptr_t)g->hStream,
                                    "num_attrs", g->numAttrs, "params", params);
        if (d == NULL || PyList_Append(out, d) < 0) { Py_XDECREF(d); Py_DECREF(out); return NULL; }
        Py_DECREF(d);
    }
    for (int i = 0; i < log_ncalls; i++) free(call_log[i].bytes);
    log_ncalls = 0;
    return out;
}

static PyObject *logged_calls(PyObject *self, PyObject *unused) {
    pthread_mutex_lock(&log_lock);
    PyObject *out = logged_calls_locked();
    pthread_mutex_unlock(&log_lock);
    return out;
}

static int record_launch(const tlx_launch_config *config, void *f, void **params, void **extra) {
    (void)extra;
    log_call(config, f, params);
    recorded_config = *config;
    recorded_function = f;
    recorded_params = params;
    /* the first parameter's first 8 bytes: proves the void** is read as the driver reads it */
    recorded_first_param = (params != NULL && params[0] != NULL) ? *(unsigned long long *)params[0] : 0;
    recorded_calls++;
    return recorded_result;
}

static PyObject *recording_entry(PyObject *self, PyObject *result) {
    long r = PyLong_AsLong(result);
    if (r == -1 && PyErr_Occurred())
        return NULL;
    recorded_result = (int)r;
    recorded_calls = 0;
    return PyLong_FromVoidPtr((void *)record_launch);
}

static PyObject *last_recorded(PyObject *self, PyObject *unused) {
    const tlx_launch_config *c = &recorded_config;
    return Py_BuildValue("{s:K,s:(III),s:(III),s:I,s:K,s:I,s:K,s:K,s:K}",
                         "calls", recorded_calls,
                         "grid", c->gridDimX, c->gridDimY, c->gridDimZ,
                         "block", c->blockDimX, c->blockDimY, c->blockDimZ,
                         "shared_bytes", c->sharedMemBytes,
                         "stream", (unsigned long long)(uintptr_t)c->hStream,
                         "num_attrs", c->numAttrs,
                         "function", (unsigned long long)(uintptr_t)recorded_function,
                         "params", (unsigned long long)(uintptr_t)recorded_params,
                         "first_param", recorded_first_param);
}

static PyMethodDef methods[] = {
    {"set_entry", (PyCFunction)set_entry, METH_O, "Set the address of cuLaunchKernelEx."},
    {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL,
     "launch(config_address, function_handle, params_address) -> CUresult (int)."},
    {"recording_entry", (PyCFunction)recording_entry, METH_O,
     "recording_entry(result) -> address of a stand-in for cuLaunchKernelEx that records."},
    {"last_recorded", (PyCFunction)last_recorded, METH_NOARGS, "What the stand-in last saw."},
    {"record_param_sizes", (PyCFunction)record_param_sizes, METH_VARARGS,
     "record_param_sizes(function_handle, sizes): log the stand-in's calls of this function."},
    {"logged_calls", (PyCFunction)logged_calls, METH_NOARGS,
     "The stand-in's logged calls since the last read (then cleared), oldest first."},
    {"reset_log", (PyCFunction)reset_log, METH_NOARGS, "Forget the logged calls and sizes."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_tlx_native_launch", NULL, -1, methods};

PyMODINIT_FUNC PyInit__tlx_native_launch(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && tlx_dispatch_add_types(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
