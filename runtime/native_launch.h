/* Shared by native_launch.c (the module, the driver entry) and native_dispatch.c (the launch
 * dispatcher): cuda.h's CUlaunchConfig layout and the entry point both call. */
#ifndef TLX_NATIVE_LAUNCH_H
#define TLX_NATIVE_LAUNCH_H

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

/* cuLaunchKernelEx (or the recording stand-in): set by set_entry, NULL until then. */
extern tlx_launch_fn tlx_launch_entry;

/* Adds the Dispatcher and BoundLaunch types (native_dispatch.c) to the module. */
int tlx_dispatch_add_types(PyObject *module);

#endif
