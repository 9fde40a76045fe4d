/* Call kernels of a heronlike library from C through the TVM runtime (tvm-ffi C API).
 *
 * Build (paths from the installed wheels; see docs/library.md):
 *   cc call_kernel.c -o call_kernel \
 *      -I$SITE/tvm_ffi/include -L$SITE/tvm_ffi/lib -L$SITE/tvm/lib \
 *      -Wl,--no-as-needed -ltvm_ffi -ltvm_runtime \
 *      -Wl,-rpath,$SITE/tvm_ffi/lib -Wl,-rpath,$SITE/tvm/lib
 * (libtvm_runtime provides TVMBackendParallelLaunch and the thread pool the kernels call.)
 *
 * Usage:
 *   call_kernel LIB.so FUNCTION ARG ARG ... [-- FUNCTION ARG ...]
 * ARG is in:FILE:DTYPE:D0xD1x... (read a raw row-major array from FILE) or
 *        out:FILE:DTYPE:D0xD1x... (zero-filled; written to FILE after the call).
 * DTYPE is uint8, int8, int32, float32 or float16. Buffers are 64-byte aligned, as TVM's
 * kernels require. Calls run in order, so a later call can
 * read what an earlier one wrote (e.g. a weight packed by FUNCTION__pack_W).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlpack/dlpack.h>
#include <tvm/ffi/c_api.h>

static int fail(const char* what) {
  TVMFFIObjectHandle err = NULL;
  TVMFFIErrorMoveFromRaised(&err);
  fprintf(stderr, "error: %s\n", what);
  return 1;
}

/* ffi.<name>(args...) -> result; returns nonzero on error */
static int call_global(const char* name, TVMFFIAny* args, int n, TVMFFIAny* result) {
  TVMFFIByteArray key = {name, strlen(name)};
  TVMFFIObjectHandle fn = NULL;
  if (TVMFFIFunctionGetGlobal(&key, &fn) != 0 || fn == NULL) return fail(name);
  result->type_index = kTVMFFINone;
  result->zero_padding = 0;
  result->v_int64 = 0;
  int rc = TVMFFIFunctionCall(fn, args, n, result);
  TVMFFIObjectDecRef(fn);
  return rc != 0 ? fail(name) : 0;
}

static int parse_dtype(const char* s, DLDataType* t) {
  t->lanes = 1;
  if (!strcmp(s, "uint8")) { t->code = kDLUInt; t->bits = 8; }
  else if (!strcmp(s, "int8")) { t->code = kDLInt; t->bits = 8; }
  else if (!strcmp(s, "int32")) { t->code = kDLInt; t->bits = 32; }
  else if (!strcmp(s, "float32")) { t->code = kDLFloat; t->bits = 32; }
  else if (!strcmp(s, "float16")) { t->code = kDLFloat; t->bits = 16; }
  else return 1;
  return 0;
}

typedef struct {
  DLTensor t;
  int64_t shape[8];
  int out;
  char file[1024];
} Arg;

static int parse_arg(char* spec, Arg* a) {
  char* role = strtok(spec, ":");
  char* file = strtok(NULL, ":");
  char* dtype = strtok(NULL, ":");
  char* dims = strtok(NULL, ":");
  if (!role || !file || !dtype || !dims) return 1;
  a->out = !strcmp(role, "out");
  snprintf(a->file, sizeof a->file, "%s", file);
  if (parse_dtype(dtype, &a->t.dtype)) return 1;
  int nd = 0;
  size_t n = 1;
  for (char* d = strtok(dims, "x"); d; d = strtok(NULL, "x")) {
    if (nd == 8) return 1;
    a->shape[nd] = atoll(d);
    n *= (size_t)a->shape[nd++];
  }
  size_t bytes = n * a->t.dtype.bits / 8;
  /* TVM kernels assume 64-byte aligned data (they use aligned vector loads and stores) */
  size_t alloc = (bytes + 63) / 64 * 64;
  a->t.data = aligned_alloc(64, alloc ? alloc : 64);
  if (!a->t.data) return 1;
  memset(a->t.data, 0, alloc ? alloc : 64);
  a->t.device.device_type = kDLCPU;
  a->t.device.device_id = 0;
  a->t.ndim = nd;
  a->t.shape = a->shape;
  a->t.strides = NULL;
  a->t.byte_offset = 0;
  if (!a->out) {
    FILE* f = fopen(a->file, "rb");
    if (!f || fread(a->t.data, 1, bytes, f) != bytes) return 1;
    fclose(f);
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s LIB.so FUNCTION ARG... [-- FUNCTION ARG...]\n", argv[0]);
    return 2;
  }
  /* module = ffi.ModuleLoadFromFile(path) */
  TVMFFIAny path = {0};
  path.type_index = kTVMFFIRawStr;
  path.v_c_str = argv[1];
  TVMFFIAny module;
  if (call_global("ffi.ModuleLoadFromFile", &path, 1, &module)) return 1;
  int i = 2;
  while (i < argc) {
    const char* name = argv[i++];
    Arg args[16];
    int n = 0;
    for (; i < argc && strcmp(argv[i], "--"); ++i) {
      if (n == 16 || parse_arg(argv[i], &args[n])) {
        fprintf(stderr, "bad argument %s\n", argv[i]);
        return 2;
      }
      ++n;
    }
    if (i < argc) ++i; /* skip "--" */
    /* fn = ffi.ModuleGetFunction(module, name, query_imports=true) */
    TVMFFIAny q[3] = {module, {0}, {0}};
    q[1].type_index = kTVMFFIRawStr;
    q[1].v_c_str = name;
    q[2].type_index = kTVMFFIBool;
    q[2].v_int64 = 1;
    TVMFFIAny fn;
    if (call_global("ffi.ModuleGetFunction", q, 3, &fn)) return 1;
    if (fn.type_index != kTVMFFIFunction) {
      fprintf(stderr, "no function %s in %s\n", name, argv[1]);
      return 1;
    }
    TVMFFIAny packed[16];
    for (int k = 0; k < n; ++k) {
      memset(&packed[k], 0, sizeof packed[k]);
      packed[k].type_index = kTVMFFIDLTensorPtr;
      packed[k].v_ptr = &args[k].t;
    }
    TVMFFIAny ret = {0};
    ret.type_index = kTVMFFINone;
    if (TVMFFIFunctionCall(fn.v_obj, packed, n, &ret) != 0) return fail(name);
    TVMFFIObjectDecRef(fn.v_obj);
    for (int k = 0; k < n; ++k) {
      if (args[k].out) {
        size_t bytes = args[k].t.dtype.bits / 8;
        for (int d = 0; d < args[k].t.ndim; ++d) bytes *= (size_t)args[k].shape[d];
        FILE* f = fopen(args[k].file, "wb");
        if (!f || fwrite(args[k].t.data, 1, bytes, f) != bytes) return 1;
        fclose(f);
      }
      free(args[k].t.data);
    }
    printf("%s: ok\n", name);
  }
  TVMFFIObjectDecRef(module.v_obj);
  return 0;
}
