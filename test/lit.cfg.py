# lit configuration for coil's golden (FileCheck) tests.
import os
import subprocess

import lit.formats

config.name = "coil"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".coil", ".test", ".loops", ".sched"]
config.excludes = ["Inputs", "conformance", "CMakeLists.txt"]
config.test_source_root = os.path.join(config.coil_src_dir, "test")
config.test_exec_root = os.path.join(os.path.dirname(config.coil_bin_dir), "test")
config.substitutions.append(("%coil", os.path.join(config.coil_bin_dir, "coil")))
config.substitutions.append(("%python", config.python))
config.substitutions.append(("FileCheck", config.filecheck))
config.environment["PATH"] = config.coil_bin_dir + os.pathsep + os.environ.get("PATH", "")
config.environment["PYTHONPATH"] = os.path.join(config.coil_src_dir, "scripts")
# `REQUIRES: cutlass`: the CUTLASS headers coil finds ($COIL_CUTLASS_DIR, else pip nvidia-cutlass).
if os.environ.get("COIL_CUTLASS_DIR"):
    config.environment["COIL_CUTLASS_DIR"] = os.environ["COIL_CUTLASS_DIR"]
    config.available_features.add("cutlass")
elif subprocess.run(["python3", "-c", "import cutlass_library"], capture_output=True).returncode == 0:
    config.available_features.add("cutlass")
