# lit configuration of the compiler's IR tests. Run through ctest (test
# "lit") or `ninja check-mk`; lit.site.cfg.py (generated) says where the build is.
import os

import lit.formats

config.name = "megakernel"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = config.mk_lit_obj_root

# mkc and mk-opt from the build, FileCheck and not from LLVM.
config.environment["PATH"] = os.pathsep.join(
    [config.mk_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")]
)
config.substitutions.append(("%examples", os.path.join(config.mk_source_dir, "examples")))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "mkc", "Inputs")))
# The project's version (CMake's project(VERSION)), which --version prints.
config.substitutions.append(("%mk_version", config.mk_version))
