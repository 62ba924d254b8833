import os
import shutil
import subprocess

import lit.formats

config.name = "df"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py.in"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.df_obj_root, "test", "lit")

path = os.pathsep.join([config.df_tools_dir, config.llvm_tools_dir,
                        config.environment.get("PATH", os.environ["PATH"])])
config.environment["PATH"] = path

config.substitutions.append(("%df_src", config.df_src_root))
config.substitutions.append(("%examples", os.path.join(config.df_src_root, "examples")))
config.substitutions.append(
    ("%irdl", os.path.join(config.df_src_root, "lib", "Dialect", "df.irdl.mlir")))

# The device runtime bitcode built by lib/Runtime/device, and ptxas.
config.substitutions.append(
    ("%device_bc", os.path.join(config.df_obj_root, "lib", "Runtime", "device",
                                "df_device_runtime.bc")))
# The traced runtime (-DDF_RT_TRACE, df/rt_trace.h), for --df-runtime.
config.substitutions.append(
    ("%device_trace_bc", os.path.join(config.df_obj_root, "lib", "Runtime", "device",
                                      "df_device_runtime_trace.bc")))
config.substitutions.append(("%ptxas", config.ptxas or "ptxas"))

def ptxas_release(path):
    """(major, minor) of a ptxas binary, or None."""
    import re
    import subprocess
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"release (\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


# Kernels are PTX ISA 8.6 (docs/codegen.md): only CUDA 12.8+ ptxas takes them.
if config.ptxas and os.path.exists(config.ptxas) and (ptxas_release(config.ptxas) or (0, 0)) >= (12, 8):
    config.available_features.add("ptxas")

# cuobjdump, for tests that read the SASS ptxas makes: on PATH, in the CUDA
# toolkit, or from the pinned pip package (requirements-test.txt).
def find_cuobjdump():
    import shutil
    import subprocess
    found = shutil.which("cuobjdump") or "/usr/local/cuda/bin/cuobjdump"
    if os.path.exists(found):
        return found
    try:
        out = subprocess.run(
            ["python3", "-c", "import nvidia, os; print(os.path.join(list(nvidia.__path__)[0],"
             " 'cu13', 'bin', 'cuobjdump'))"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    out = out.strip()
    return out if out and os.path.exists(out) else None


cuobjdump = find_cuobjdump()
if cuobjdump:
    config.available_features.add("cuobjdump")
config.substitutions.append(("%cuobjdump", cuobjdump or "cuobjdump"))

# Build-tree helpers (input/reference generators of the runtime tests).
config.substitutions.append(("%df_obj", config.df_obj_root))

# GPU tests (test/lit/GPU, REQUIRES: cuda-gpu) run where a CUDA GPU answers
# `nvidia-smi -L`, or when DF_CUDA_GPU=1 says so (DF_CUDA_GPU=0 turns them
# off). They need the driver's libcuda.so.1, found through the environment.
config.substitutions.append(("%df_bin", config.df_tools_dir))
for var in ("LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "DF_GPU_RUN_TIMEOUT"):
    if var in os.environ:
        config.environment[var] = os.environ[var]


def _cuda_gpu():
    forced = os.environ.get("DF_CUDA_GPU")
    if forced is not None:
        return forced == "1"
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        r = subprocess.run([smi, "-L"], capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0 and b"GPU" in r.stdout


if _cuda_gpu():
    config.available_features.add("cuda-gpu")
