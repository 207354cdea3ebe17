# -*- Python -*-
# lit configuration of the omni test suite.

import os

import lit.formats
from lit.llvm import llvm_config

config.name = "omni"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.omni_obj_root, "test")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%omni_src_root", config.omni_src_root))

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

tool_dirs = [config.omni_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(
    ["omni-opt", "omni-eval", "omnic", "omnirun", "omnirun-testgen", "omnigen",
     "omni-bench-kernels"], tool_dirs)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

# The tools print a phase that runs longer than 2 s (runtime/base/
# PhaseTimer.h). How long a phase takes depends on the machine and its
# load, so the tests' stderr would too: they run with the lines off, and
# test/train/run-logs.test sets OMNI_PROGRESS_AFTER_MS itself.
config.environment["OMNI_PROGRESS_AFTER_MS"] = "1000000000"

# `mpirun -np N omnirun` tests (REQUIRES: mpi): OpenMPI refuses root
# without the two variables and more ranks than cores without
# --oversubscribe; and two mpirun starting at once race to create their
# shared session directory under /tmp (OpenMPI 4, open-mpi/ompi#8510),
# so each test's jobs get their own (%t.ompi: lit expands %t after this
# substitution) (docs/backend.md, "MPI").
if getattr(config, "omni_mpiexec", ""):
    config.available_features.add("mpi")
    config.substitutions.append(
        ("%mpirun",
         "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
         "OMPI_MCA_orte_tmpdir_base=%t.ompi "
         + config.omni_mpiexec + " --oversubscribe"))

# Tests that run ptxas (omnic --target=cuda assembles every kernel; REQUIRES:
# ptxas): the toolkit's ptxas that CMake found (compiler/codegen/cuda).
omni_ptxas = getattr(config, "omni_ptxas", "") or "/usr/local/cuda/bin/ptxas"
if os.access(omni_ptxas, os.X_OK):
    config.available_features.add("ptxas")
else:
    lit_config.note("no ptxas at %s: the ptxas tests are unsupported" % omni_ptxas)

# The cuda driver against the host model of libcuda, cuBLASLt and NCCL
# (REQUIRES: cuda-host-model): %host_cuda is the environment that loads it
# in their place (runtime/hal/drivers/cuda/host/HostModel.h; its cuDNN
# too, so convolutions take the path they take on a GPU).
omni_host_cuda = getattr(config, "omni_host_cuda", "")
if omni_host_cuda:
    config.available_features.add("cuda-host-model")
    config.substitutions.append(
        ("%host_cuda",
         "env OMNI_CUDA_DRIVER_LIBRARY=%s OMNI_CUBLASLT_LIBRARY=%s "
         "OMNI_NCCL_LIBRARY=%s OMNI_CUDNN_LIBRARY=%s"
         % ((omni_host_cuda,) * 4)))

# An NVIDIA GPU with a working driver (`nvidia-smi -L` lists one): GPU tests
# REQUIRE `cuda-gpu`; the tests of what omnirun says without one are
# UNSUPPORTED there (test/runtime/gpu-missing.test).
def _has_cuda_gpu():
    import shutil
    import subprocess
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        listed = subprocess.run([smi, "-L"], capture_output=True, text=True,
                                timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return listed.returncode == 0 and "GPU " in listed.stdout

if _has_cuda_gpu():
    config.available_features.add("cuda-gpu")
