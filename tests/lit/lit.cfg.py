# lit configuration for kiln's dialect and pass tests.
import os
import lit.formats

config.name = "kiln"
config.test_format = lit.formats.ShTest(not lit_config.isWindows)
config.suffixes = [".mlir"]
config.excludes = ["inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.kiln_obj_root, "tests", "lit")
config.environment["PATH"] = os.pathsep.join(
    [config.kiln_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", os.environ["PATH"])])
if config.ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", config.ptxas))
