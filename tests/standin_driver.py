"""A stand-in for the NVIDIA driver's user space and procfs, for the suites that run without a GPU (tests/slurm,
tests/images, tests/e2e). Nothing here is a recording: these are programs built with gcc that say what they are.

* ``libcuda.so.1``: the CUDA driver API calls hack/gpu_check.py's program makes, computing on the CPU (it refuses a
  module without the kernel ``vadd`` and adds the vectors in cuLaunchKernel), and ``standin_cuda()``, which names it;
* ``libnvidia-ml.so.1``: ``nvmlInit_v2`` and ``standin_nvml()``;
* both with the driver's SONAMEs and versioned file names (:data:`VERSION`);
* :func:`build_smi`: ``nvidia-smi``, an ELF program as the driver's is (the worker exposes only programs to the
  jail, never scripts), linked against ``libnvidia-ml.so.1``, answering the arguments it was built with;
* :func:`information`: the lines of ``/proc/driver/nvidia/gpus/<bus>/information`` Slurm's gpu/nvidia plugin reads.
"""

import csv
import io
import os
import subprocess

VERSION = "550.54.15"
MODEL = "NVIDIA H100 80GB HBM3"  # as the driver prints it; Slurm's gpu/nvidia makes it nvidia_h100_80gb_hbm3

LIBCUDA_C = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
typedef int CUresult;
static int ctx, module, func;
const char *standin_cuda(void) { return "libcuda stand-in " VERSION; }
CUresult cuInit(unsigned int flags) { return flags ? 1 : 0; }
CUresult cuDriverGetVersion(int *v) { *v = 12040; return 0; }
CUresult cuDeviceGetCount(int *n) { *n = 1; return 0; }
CUresult cuDeviceGet(int *d, int ordinal) {
    if (ordinal)
        return 101;
    *d = 0;
    return 0;
}
CUresult cuDeviceGetName(char *name, int len, int dev) {
    (void)dev;
    strncpy(name, "stand-in GPU (computes on the CPU)", len - 1);
    name[len - 1] = 0;
    return 0;
}
CUresult cuCtxCreate_v2(void **c, unsigned int flags, int dev) { (void)flags; (void)dev; *c = &ctx; return 0; }
CUresult cuModuleLoadData(void **m, const void *image) {
    if (!strstr((const char *)image, ".entry vadd("))
        return 218;
    *m = &module;
    return 0;
}
CUresult cuModuleGetFunction(void **f, void *m, const char *name) {
    if (m != &module || strcmp(name, "vadd"))
        return 500;
    *f = &func;
    return 0;
}
CUresult cuMemAlloc_v2(uint64_t *p, size_t n) {
    void *q = malloc(n);
    if (!q)
        return 2;
    *p = (uintptr_t)q;
    return 0;
}
CUresult cuMemFree_v2(uint64_t p) { free((void *)(uintptr_t)p); return 0; }
CUresult cuMemcpyHtoD_v2(uint64_t d, const void *h, size_t n) { memcpy((void *)(uintptr_t)d, h, n); return 0; }
CUresult cuMemcpyDtoH_v2(void *h, uint64_t d, size_t n) { memcpy(h, (void *)(uintptr_t)d, n); return 0; }
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void *stream, void **params, void **extra) {
    (void)shared; (void)stream; (void)extra;
    if (f != &func)
        return 400;
    const float *a = (const float *)(uintptr_t)*(uint64_t *)params[0];
    const float *b = (const float *)(uintptr_t)*(uint64_t *)params[1];
    float *c = (float *)(uintptr_t)*(uint64_t *)params[2];
    uint64_t n = *(uint32_t *)params[3], threads = (uint64_t)gx * gy * gz * bx * by * bz;
    for (uint64_t i = 0; i < n && i < threads; i++) c[i] = a[i] + b[i];
    return 0;
}
CUresult cuCtxSynchronize(void) { return 0; }
CUresult cuCtxDestroy_v2(void *c) { return c == &ctx ? 0 : 201; }
CUresult cuGetErrorName(CUresult e, const char **s) { *s = e ? "CUDA_ERROR_STANDIN" : "CUDA_SUCCESS"; return 0; }
"""

LIBNVML_C = r"""
int nvmlInit_v2(void) { return 0; }
const char *standin_nvml(void) { return "libnvidia-ml stand-in " VERSION; }
"""

LIBRARIES = (("libcuda", "libcuda.so.1", LIBCUDA_C), ("libnvidia-ml", "libnvidia-ml.so.1", LIBNVML_C))


def build_libraries(lib_dir, cc=("gcc",)):
    """libcuda.so.<VERSION> and libnvidia-ml.so.<VERSION> in ``lib_dir`` with their SONAME links; ``cc``: the
    compiler's argv prefix (e.g. a chroot), paths as it sees them."""
    os.makedirs(lib_dir, exist_ok=True)
    for name, soname, source in LIBRARIES:
        src = os.path.join(lib_dir, name + ".c")
        with open(src, "w") as f:
            f.write(source)
        target = "%s.so.%s" % (name, VERSION)
        res = subprocess.run(list(cc) + ["-O2", "-Wall", "-Werror", "-DVERSION=\"%s\"" % VERSION, "-shared", "-fPIC",
                                         "-Wl,-soname," + soname, "-o", os.path.join(lib_dir, target), src],
                             capture_output=True, text=True)
        if res.returncode:
            raise RuntimeError("%s: %s" % (" ".join(res.args), res.stderr))
        os.remove(src)
        link = os.path.join(lib_dir, soname)
        if not os.path.lexists(link):
            os.symlink(target, link)


# nvidia-smi: without arguments a line saying what it is (from libnvidia-ml); with arguments the answer it was built
# with for exactly those arguments (it runs in slurmd's container and in the jail, where no file of a test's is).
SMI_C = r"""
#include <stdio.h>
#include <string.h>
const char *standin_nvml(void);
static const char *answers[][2] = {
ANSWERS
};
int main(int argc, char **argv) {
    char args[4096] = "";
    if (argc == 1) { printf("nvidia-smi stand-in (%s)\n", standin_nvml()); return 0; }
    for (int i = 1; i < argc; i++) {
        if (strlen(args) + strlen(argv[i]) + 2 > sizeof(args)) return 2;
        if (i > 1) strcat(args, " ");
        strcat(args, argv[i]);
    }
    for (size_t i = 0; i < sizeof(answers) / sizeof(answers[0]); i++)
        if (!strcmp(args, answers[i][0])) { fputs(answers[i][1], stdout); return 0; }
    printf("nvidia-smi stand-in: no recording for %s\n", args);
    return 2;
}
"""


def c_string(text):
    """``text`` as a C string literal (octal escapes for all but printable ASCII)."""
    return '"%s"' % "".join(c if " " <= c <= "~" and c not in '"\\?' else "\\%03o" % ord(c) for c in text)


def build_smi(path, answers, lib_dir, cc=("gcc",)):
    """nvidia-smi at ``path``: ``answers`` maps an argument string (the arguments joined by blanks) to its output;
    linked against ``lib_dir``'s libnvidia-ml (:func:`build_libraries` first)."""
    table = ",\n".join("{%s, %s}" % (c_string(k), c_string(v)) for k, v in answers.items())
    src = path + ".c"
    with open(src, "w") as f:
        f.write(SMI_C.replace("ANSWERS", table))
    try:
        res = subprocess.run(list(cc) + ["-O2", "-Wall", "-Werror", "-o", path, src,
                                         os.path.join(lib_dir, "libnvidia-ml.so.%s" % VERSION)],
                             capture_output=True, text=True)
        if res.returncode:
            raise RuntimeError("%s: %s" % (" ".join(res.args), res.stderr))
    finally:
        os.remove(src)


def columns(recording, fields, header):
    """A recorded ``nvidia-smi --query-gpu=<every field> --format=csv`` output's columns ``fields``, in that order, as
    nvidia-smi prints them when asked for just those (with the header line, or ``noheader``)."""
    rows = list(csv.reader(io.StringIO(recording), skipinitialspace=True))
    names = [h.strip().split(" [")[0] for h in rows[0]]
    cols = [names.index(f) for f in fields]
    return "".join(", ".join(row[c].strip() for c in cols) + "\n" for row in rows[0 if header else 1:])


def information(bus, minor, model=MODEL):
    """``/proc/driver/nvidia/gpus/<bus>/information`` as the driver writes it (the lines Slurm reads among them)."""
    return ("Model: \t\t %s\nIRQ:   \t\t 0\nGPU UUID: \t GPU-00000000-0000-0000-0000-00000000000%d\n"
            "Video BIOS: \t 96.00.a5.00.01\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\n"
            "Bus Location: \t %s\nDevice Minor: \t %d\nGPU Excluded:\t No\n" % (model, minor, bus, minor))
