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

    def test_checkout_copy_does_not_guess_a_build(self):
        # The package straight from the checkout has no library of its own:
        # it asks for MK_RUNTIME_LIB instead of picking one of the build
        # trees (the checkout has several).
        code = ("import megakernel\n"
                "try:\n"
                "    megakernel.load_library()\n"
                "    print('loaded', megakernel._capi._lib)\n"
                "except OSError as e:\n"
                "    print('OSError', e)\n")
        env = {k: v for k, v in os.environ.items() if k != "MK_RUNTIME_LIB"}
        env["PYTHONPATH"] = os.path.join(ROOT, "python")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, cwd="/").stdout
        self.assertIn("OSError", out)
        self.assertIn("MK_RUNTIME_LIB=BUILD/runtime/libmk_runtime_c.so", out)

    def test_ships_its_type_hints(self):
        # PEP 561: type checkers read the package's annotations.
        self.assertTrue(os.path.exists(os.path.join(os.path.dirname(megakernel.__file__),
                                                    "py.typed")))

    def test_error_names_the_status(self):
        e = megakernel.MegakernelError(1, "tensor 'x' has the wrong shape")
        self.assertEqual(str(e), "invalid argument: tensor 'x' has the wrong shape")
        self.assertEqual(e.code, 1)


HF_CONFIG = os.path.join(ROOT, "examples", "hf", "kimi_linear_48b_a3b.config.json")


class SpecFromHuggingFace(unittest.TestCase):
    """megakernel.spec_from_hf: the runtime library's importer (the one mkc
    --from-hf runs), no compiler and no GPU needed."""

    def test_released_kimi_linear_maps_as_it_is(self):
        # Every form of the released model is one of the family's: the dense
        # layer 0 (dense_layers), the sigmoid router (router), the MLA form
        # (mla_rotary, mla_latent_norm), the FFNs' bf16 steps
        # (ffn_rounding): no as_unit, no note but the group's.
        notes = []
        spec = megakernel.spec_from_hf(HF_CONFIG, notes=notes)
        self.assertEqual(spec["name"], "kimi_linear_27l")
        self.assertEqual(spec["config"]["n_experts"], 256)
        self.assertIs(spec["config"]["mla_rotary"], False)
        self.assertIs(spec["config"]["mla_latent_norm"], True)
        self.assertEqual(spec["config"]["rmsnorm_rounding"], "twice")
        self.assertEqual(spec["config"]["kda_form"], "released")
        self.assertEqual(spec["config"]["ffn_rounding"], "each")
        self.assertEqual(spec["config"]["eps"], 1e-05)
        self.assertEqual("".join(spec["pattern"]), "KKKM" * 6 + "KKM")
        self.assertEqual(spec["config"]["dense_layers"], 1)
        self.assertEqual(spec["config"]["dense_inter"], 9216)
        self.assertEqual(spec["config"]["router"], "sigmoid")
        self.assertEqual(len(notes), 1)  # the group
        self.assertTrue(notes[0].startswith("quantization group 128"))

    def test_differences_are_refused_unless_as_unit(self):
        import json
        with open(HF_CONFIG) as f:
            cfg = json.load(f)
        cfg["tie_word_embeddings"] = True
        with self.assertRaises(megakernel.MegakernelError) as cm:
            megakernel.spec_from_hf(cfg)
        msg = str(cm.exception)
        for key in ("tie_word_embeddings = true", "as_unit=True"):
            self.assertIn(key, msg)
        self.assertNotIn("model_type", msg)
        self.assertNotIn("mla_use_nope", msg)
        notes = []
        spec = megakernel.spec_from_hf(cfg, as_unit=True, notes=notes)
        self.assertEqual(spec["config"]["n_experts"], 256)
        self.assertEqual(len(notes), 2)  # the group, the tied head
        self.assertIn("tie_word_embeddings = true", notes[1])

    def test_qwen3_is_the_dense_gqa_family(self):
        # The same importer maps a Qwen3 config.json onto the dense family:
        # Qwen3-8B's dimensions give the repository's 36-layer spec.
        import json
        qwen3 = os.path.join(os.path.dirname(HF_CONFIG), "qwen3_8b.config.json")
        spec = megakernel.spec_from_hf(qwen3)
        self.assertEqual(spec["family"], "dense_gqa")
        with open(os.path.join(os.path.dirname(os.path.dirname(HF_CONFIG)),
                               "specs", "qwen3_8b_36l.json")) as f:
            self.assertEqual(spec["config"], json.load(f)["config"])

    def test_checkpoint_directory(self):
        import shutil
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            shutil.copy(HF_CONFIG, os.path.join(d, "config.json"))
            self.assertEqual(megakernel.spec_from_hf(d), megakernel.spec_from_hf(HF_CONFIG))

    def test_dict_input_group_and_name(self):
        import json
        with open(HF_CONFIG) as f:
            cfg = json.load(f)
        spec = megakernel.spec_from_hf(cfg, group=64, name="kl")
        self.assertEqual(spec["name"], "kl")
        self.assertEqual(spec["config"]["group"], 64)
        cfg["hidden_size"] = "wide"
        with self.assertRaises(megakernel.MegakernelError) as cm:
            megakernel.spec_from_hf(cfg)
        self.assertIn('hidden_size must be a positive integer, got "wide"', str(cm.exception))
        with self.assertRaises(ValueError):
            megakernel.spec_from_hf(cfg, group=-1)


class SpecFromConfig(unittest.TestCase):
    """megakernel.spec_from_config: pure Python, no library needed."""

    def _cfg(self, **extra):
        import json
        import types
        with open(os.path.join(ROOT, "examples", "specs", "tiny.json")) as f:
            spec = json.load(f)
        conf = dict(spec["config"], **extra)
        return spec, types.SimpleNamespace(name=spec["name"], pattern=spec["pattern"], **conf)

    def test_router_written_only_when_sigmoid(self):
        _, cfg = self._cfg()
        self.assertNotIn("router", megakernel.spec_from_config(cfg)["config"])
        _, cfg = self._cfg(router="softmax")
        self.assertNotIn("router", megakernel.spec_from_config(cfg)["config"])
        _, cfg = self._cfg(router="sigmoid")
        self.assertEqual(megakernel.spec_from_config(cfg)["config"]["router"], "sigmoid")

    def test_mla_form_written_only_where_not_the_units(self):
        _, cfg = self._cfg()
        conf = megakernel.spec_from_config(cfg)["config"]
        self.assertNotIn("mla_rotary", conf)
        self.assertNotIn("mla_latent_norm", conf)
        _, cfg = self._cfg(mla_rotary=False, mla_latent_norm=True)
        conf = megakernel.spec_from_config(cfg)["config"]
        self.assertIs(conf["mla_rotary"], False)
        self.assertIs(conf["mla_latent_norm"], True)
        _, cfg = self._cfg(mla_rotary="no")
        with self.assertRaises(ValueError) as cm:
            megakernel.spec_from_config(cfg)
        self.assertIn("mla_rotary", str(cm.exception))

    def _check_two_valued_key(self, key, second, bad):
        """A two-valued form key: absent from the spec at its unit value,
        written at the released model's, any other value refused by name."""
        _, cfg = self._cfg()
        self.assertNotIn(key, megakernel.spec_from_config(cfg)["config"])
        _, cfg = self._cfg(**{key: second})
        self.assertEqual(megakernel.spec_from_config(cfg)["config"][key], second)
        _, cfg = self._cfg(**{key: bad})
        with self.assertRaises(ValueError) as cm:
            megakernel.spec_from_config(cfg)
        self.assertIn(key, str(cm.exception))

    def test_rmsnorm_rounding_written_only_when_twice(self):
        self._check_two_valued_key("rmsnorm_rounding", "twice", "thrice")

    def test_kda_form_written_only_when_released(self):
        self._check_two_valued_key("kda_form", "released", "full")

    def test_ffn_rounding_written_only_when_each(self):
        self._check_two_valued_key("ffn_rounding", "each", "twice")

    def test_unknown_router_is_refused(self):
        _, cfg = self._cfg(router="relu")
        with self.assertRaises(ValueError) as cm:
            megakernel.spec_from_config(cfg)
        self.assertIn("'relu'", str(cm.exception))

    def test_gqa_layers_in_the_pattern(self):
        _, cfg = self._cfg()
        cfg.pattern = ["K", "gqa", "G", "mla"]
        spec = megakernel.spec_from_config(cfg)
        self.assertEqual(spec["pattern"], ["K", "G", "G", "M"])
        self.assertFalse([k for k in spec["config"] if k.startswith("gqa_")])
        _, cfg = self._cfg(gqa_heads=4, gqa_kv_heads=2, gqa_head_dim=64)
        cfg.pattern = ["K", "G", "K", "M"]
        conf = megakernel.spec_from_config(cfg)["config"]
        self.assertEqual((conf["gqa_heads"], conf["gqa_kv_heads"], conf["gqa_head_dim"]),
                         (4, 2, 64))
        cfg.pattern = ["K", "X"]
        with self.assertRaises(ValueError) as cm:
            megakernel.spec_from_config(cfg)
        self.assertIn("'X'", str(cm.exception))

    def _dense(self, path, **extra):
        import json
        import types
        with open(os.path.join(ROOT, "examples", "specs", path)) as f:
            spec = json.load(f)
        conf = dict(spec["config"], **extra)
        return spec, types.SimpleNamespace(name=spec["name"], **conf)

    def test_dense_gqa_config(self):
        # Recognized by its fields (no pattern) or by its family; the spec's
        # keys in the spec's order.
        for path in ("tiny_dense_gqa.json", "qwen3_8b_layer.json"):
            spec, cfg = self._dense(path)
            self.assertEqual(megakernel.spec_from_config(cfg), spec)
            self.assertEqual(list(megakernel.spec_from_config(cfg)["config"]),
                             list(spec["config"]))
            cfg.family = "dense_gqa"
            self.assertEqual(megakernel.spec_from_config(cfg), spec)

    def test_dense_gqa_optional_keys_and_name(self):
        spec, cfg = self._dense("tiny_dense_gqa.json")
        del cfg.eps, cfg.name
        got = megakernel.spec_from_config(cfg)
        self.assertNotIn("eps", got["config"])
        self.assertEqual(got["name"], "dense_gqa_w4a16")
        self.assertEqual(megakernel.spec_from_config(cfg, "qd")["name"], "qd")
        # A dense config needs every field but eps.
        _, cfg = self._dense("tiny_dense_gqa.json")
        del cfg.rope_theta
        with self.assertRaises(AttributeError):
            megakernel.spec_from_config(cfg)

    def test_family_decides(self):
        # The unit's family named explicitly stays the unit's; an unknown
        # family is refused.
        spec, cfg = self._cfg()
        cfg.family = "kimi_linear"
        self.assertEqual(megakernel.spec_from_config(cfg), spec)
        cfg.family = "llama"
        with self.assertRaises(ValueError) as cm:
            megakernel.spec_from_config(cfg)
        self.assertIn("'llama'", str(cm.exception))


# The build tree scripts/test.sh just built (MK_TEST_BUILD_DIR): the compiler
# (mkc) and the embedded JIT's C library, where the build has the compiler.
BUILD = os.environ.get("MK_TEST_BUILD_DIR", "")
JIT_LIB = os.path.join(BUILD, "compiler", "Jit", "libmk_jit_c.so")
MKC = os.path.join(BUILD, "bin", "mkc")
TINY = os.path.join(ROOT, "examples", "specs", "tiny.json")


def _run(code, **env):
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **env),
                         capture_output=True, text=True, cwd="/")
    return out.stdout + out.stderr


def _files(d):
    out = {}
    for name in sorted(os.listdir(d)):
        with open(os.path.join(d, name), "rb") as f:
            out[name] = f.read()
    return out


@unittest.skipUnless(os.path.exists(JIT_LIB) and os.path.exists(MKC),
                     "no compiler in MK_TEST_BUILD_DIR (built without MLIR)")
class CompileThroughTheJit(unittest.TestCase):
    """megakernel.compile runs the compiler in process (libmk_jit_c.so) and
    writes what `mkc SPEC --emit=cuda -o DIR` writes, byte for byte."""

    def test_same_kernel_as_mkc(self):
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            jit_dir, mkc_dir = os.path.join(tmp, "jit"), os.path.join(tmp, "mkc")
            out = _run("import megakernel, sys\n"
                       "assert megakernel.load_jit() is not None\n"
                       "print(megakernel.compile(%r, %r))\n"
                       % (TINY, jit_dir), MK_JIT_LIB=JIT_LIB)
            self.assertIn(jit_dir, out)
            subprocess.run([MKC, TINY, "--emit=cuda", "-o", mkc_dir], check=True)
            jit, ref = _files(jit_dir), _files(mkc_dir)
            self.assertEqual(sorted(jit), ["mk_tiny.cu", "mk_tiny.manifest.json"])
            self.assertEqual(jit, ref)

    def test_spec_mapping_and_cache(self):
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            code = ("import json, megakernel\n"
                    "spec = json.load(open(%r))\n"
                    "a = megakernel.compile(spec)\n"
                    "b = megakernel.compile(spec)\n"
                    "print('same', a == b, sorted(__import__('os').listdir(a)))\n" % TINY)
            out = _run(code, MK_JIT_LIB=JIT_LIB, MK_CACHE_DIR=tmp)
            self.assertIn("same True ['mk_tiny.cu', 'mk_tiny.manifest.json']", out)

    def test_config_object(self):
        # What Model takes: an object with the spec's fields as attributes.
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            code = ("import json, types, megakernel\n"
                    "spec = json.load(open(%r))\n"
                    "cfg = types.SimpleNamespace(name=spec['name'], pattern=spec['pattern'],\n"
                    "                            **spec['config'])\n"
                    "assert megakernel.spec_from_config(cfg) == spec, megakernel.spec_from_config(cfg)\n"
                    "print('dir', megakernel.compile(cfg, %r))\n" % (TINY, os.path.join(tmp, "k")))
            out = _run(code, MK_JIT_LIB=JIT_LIB)
            self.assertIn("dir " + os.path.join(tmp, "k"), out)
            self.assertEqual(sorted(os.listdir(os.path.join(tmp, "k"))),
                             ["mk_tiny.cu", "mk_tiny.manifest.json"])

    def test_dense_gqa_config_object(self):
        # The dense GQA family's config object (no pattern) compiles to the
        # kernel of its spec file.
        import tempfile
        spec_path = os.path.join(ROOT, "examples", "specs", "tiny_dense_gqa.json")
        with tempfile.TemporaryDirectory() as tmp:
            code = ("import json, types, megakernel\n"
                    "spec = json.load(open(%r))\n"
                    "cfg = types.SimpleNamespace(name=spec['name'], **spec['config'])\n"
                    "assert megakernel.spec_from_config(cfg) == spec, megakernel.spec_from_config(cfg)\n"
                    "print('dir', megakernel.compile(cfg, %r))\n"
                    % (spec_path, os.path.join(tmp, "k")))
            out = _run(code, MK_JIT_LIB=JIT_LIB)
            self.assertIn("dir " + os.path.join(tmp, "k"), out)
            with open(os.path.join(tmp, "k", "mk_tiny_dense_gqa.manifest.json")) as f:
                import json
                config = json.load(f)["config"]
            self.assertEqual(config["family"], "dense_gqa")
            self.assertNotIn("pattern", config)
            mkc_dir = os.path.join(tmp, "mkc")
            subprocess.run([MKC, spec_path, "--emit=cuda", "-o", mkc_dir], check=True)
            self.assertEqual(_files(os.path.join(tmp, "k")), _files(mkc_dir))

    def test_arithmetic_is_mkc_option(self):
        # arithmetic="exact" is mkc's schedule-tile-weights arithmetic=exact,
        # byte for byte; an unknown one is a ValueError before any work.
        import tempfile
        unit = os.path.join(ROOT, "examples", "kimi_linear_w4a16.json")
        with tempfile.TemporaryDirectory() as tmp:
            jit_dir, mkc_dir = os.path.join(tmp, "jit"), os.path.join(tmp, "mkc")
            code = ("import megakernel\n"
                    "print(megakernel.compile(%r, %r, arithmetic='exact'))\n"
                    "try:\n"
                    "    megakernel.compile(%r, %r, arithmetic='fp8')\n"
                    "except ValueError as e:\n"
                    "    print('ValueError', e)\n"
                    % (unit, jit_dir, unit, os.path.join(tmp, "bad")))
            out = _run(code, MK_JIT_LIB=JIT_LIB)
            self.assertIn("ValueError arithmetic must be one of folded, scaled, exact, int8, "
                          "got 'fp8'", out)
            self.assertFalse(os.path.exists(os.path.join(tmp, "bad")))
            subprocess.run([MKC, unit, "--emit=cuda", "-o", mkc_dir,
                            "--pass-option=schedule-tile-weights=arithmetic=exact"], check=True)
            self.assertEqual(_files(jit_dir), _files(mkc_dir))
            self.assertIn(b"mk::kOrderMma>", _files(jit_dir)["mk_kimi_linear_w4a16.cu"])

    def test_refused_spec_is_a_named_error(self):
        code = ("import megakernel\n"
                "try:\n"
                "    megakernel.compile({'name': 'bad', 'config': {'hidden': 64}, "
                "'pattern': ['K']}, '/tmp/never-written')\n"
                "except megakernel.MegakernelError as e:\n"
                "    print('code', e.code, e)\n")
        out = _run(code, MK_JIT_LIB=JIT_LIB)
        self.assertIn("code 1 invalid argument: spec:", out)
        self.assertFalse(os.path.exists("/tmp/never-written"))

    def test_refused_spec_through_mkc(self):
        # Without the JIT library (no MK_JIT_LIB, and an mkc on PATH with no
        # library beside it) compile runs mkc; a refused spec is the same
        # MegakernelError, with mkc's message.
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            bindir = os.path.join(tmp, "bin")
            os.mkdir(bindir)
            wrapper = os.path.join(bindir, "mkc")
            with open(wrapper, "w") as f:
                f.write('#!/bin/sh\nexec "%s" "$@"\n' % MKC)
            os.chmod(wrapper, 0o755)
            env = {k: v for k, v in os.environ.items() if k != "MK_JIT_LIB"}
            env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
            code = ("import megakernel\n"
                    "assert megakernel.load_jit() is None\n"
                    "try:\n"
                    "    megakernel.compile({'name': 'bad', 'config': {'hidden': 64}, "
                    "'pattern': ['K']}, %r)\n"
                    "except megakernel.MegakernelError as e:\n"
                    "    print('code', e.code, e)\n" % os.path.join(tmp, "never"))
            out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                 text=True, cwd="/")
            text = out.stdout + out.stderr
            self.assertIn("code 1 invalid argument: mkc exited with 1: mkc: error:", text)
            self.assertFalse(os.path.exists(os.path.join(tmp, "never")))

    def test_bad_override_is_an_error(self):
        code = ("import megakernel\n"
                "try:\n"
                "    megakernel.load_jit()\n"
                "except OSError as e:\n"
                "    print('OSError', e)\n")
        out = _run(code, MK_JIT_LIB="/no/such/libmk_jit_c.so")
        self.assertIn("OSError", out)
        self.assertIn("/no/such/libmk_jit_c.so", out)


if __name__ == "__main__":
    unittest.main()
