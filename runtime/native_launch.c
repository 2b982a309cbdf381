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
 * Built on first use by tlx/runtime/native_launch.py (see there); the module name is fixed. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* cuda.h's CUlaunchConfig (CUDA >= 12.0): the layout cuda.bindings' CUlaunchConfig wraps. */
typedef struct {
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    void *hStream;
    void *attrs;
    unsigned int numAttrs;
} tlx_launch_config;

typedef int (*tlx_launch_fn)(const tlx_launch_config *config, void *f, void **params, void **extra);

static tlx_launch_fn launch_entry = NULL;

static PyObject *set_entry(PyObject *self, PyObject *address) {
    void *p = PyLong_AsVoidPtr(address);
    if (p == NULL && PyErr_Occurred())
        return NULL;
    launch_entry = (tlx_launch_fn)p;
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
    if (launch_entry == NULL || config == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "tlx native launch: no driver entry point or config");
        return NULL;
    }
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = launch_entry(config, function, params, NULL);
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

static int record_launch(const tlx_launch_config *config, void *f, void **params, void **extra) {
    (void)extra;
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
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_tlx_native_launch", NULL, -1, methods};

PyMODINIT_FUNC PyInit__tlx_native_launch(void) { return PyModule_Create(&module); }
