"""CPU-side tests of the installed Python package (no GPU, no torch): run
from outside the source tree after `pip install ./python`, as scripts/test.sh
does (python -m unittest discover -s tests/package). Not under python/tests,
whose drop-in tests run on the GPU machine against the source tree."""

import os
import re
import subprocess
import sys
import unittest

import megakernel

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/package/..


class InstalledPackage(unittest.TestCase):
    def test_imported_from_the_installation(self):
        # Not the checkout's python/megakernel: the installed copy.
        self.assertNotEqual(os.path.dirname(os.path.dirname(megakernel.__file__)),
                            os.path.join(ROOT, "python"))

    def test_version_is_the_projects(self):
        with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
            cmake = re.search(r"project\(megakernel VERSION ([0-9.]+)", f.read()).group(1)
        with open(os.path.join(ROOT, "python", "pyproject.toml")) as f:
            pyproject = re.search(r'^version = "([0-9.]+)"', f.read(), re.M).group(1)
        self.assertEqual(megakernel.__version__, cmake)
        self.assertEqual(pyproject, cmake)

    def test_loads_its_own_library(self):
        lib = megakernel.load_library()
        self.assertEqual(lib.mk_api_version(), 1)
        own = os.path.join(os.path.dirname(megakernel.__file__), "libmk_runtime_c.so")
        self.assertTrue(os.path.exists(own))

    def test_override_is_the_only_choice_when_set(self):
        # A bad MK_RUNTIME_LIB is an error naming it, not a silent fallback.
        code = ("import megakernel\n"
                "try:\n"
                "    megakernel.load_library()\n"
                "except OSError as e:\n"
                "    print('OSError', e)\n")
        env = dict(os.environ, MK_RUNTIME_LIB="/no/such/libmk_runtime_c.so")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, cwd="/").stdout
        self.assertIn("OSError", out)
        self.assertIn("/no/such/libmk_runtime_c.so", out)

    def test_ships_its_type_hints(self):
        # PEP 561: type checkers read the package's annotations.
        self.assertTrue(os.path.exists(os.path.join(os.path.dirname(megakernel.__file__),
                                                    "py.typed")))

    def test_error_names_the_status(self):
        e = megakernel.MegakernelError(1, "tensor 'x' has the wrong shape")
        self.assertEqual(str(e), "invalid argument: tensor 'x' has the wrong shape")
        self.assertEqual(e.code, 1)


if __name__ == "__main__":
    unittest.main()
