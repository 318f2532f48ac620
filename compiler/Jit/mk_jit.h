/*===- mk_jit.h - C API of the embedded JIT's compiler ---------------------===*
 *
 * The compiler pipeline behind a C call, for ctypes and other languages
 * (libmk_jit_c.so; built where the compiler is). What `mkc SPEC --emit=cuda
 * -o DIR` does, in process: a block spec (JSON text, the format of
 * docs/spec-format.md) in, a kernel directory out (<kernel>.cu and
 * <kernel>.manifest.json, byte for byte what mkc writes), which the runtime
 * (mk.h, mk_kernel_load_dir) loads. Statuses are the runtime's mk_status
 * values; on failure mk_jit_last_error() gives a one-line message
 * (thread-local).
 *
 *===----------------------------------------------------------------------===*/

#ifndef MK_JIT_MK_JIT_H
#define MK_JIT_MK_JIT_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define MK_JIT_API __attribute__((visibility("default")))
#else
#define MK_JIT_API
#endif

/* Compiles `spec_json` into the directory `out_dir` (created if missing).
 * `kernel_name` NULL or "": mk_<spec name>. `target_sms` 0: the pipeline's
 * default (264, an H200's 132 SMs x 2 blocks). Returns 0 (MK_OK), 1
 * (MK_ERR_INVALID_ARGUMENT: a malformed spec or argument), 3
 * (MK_ERR_COMPILE: a failing pipeline stage, its diagnostics in the
 * message) or 9 (MK_ERR_IO: the directory or a file cannot be written). */
MK_JIT_API int mk_jit_compile_spec(const char *spec_json, const char *out_dir,
                                   const char *kernel_name, long long target_sms);

/* mk_jit_compile_spec with the packed tiles' arithmetic: NULL or "" the
 * default ("folded": each group's zero point and scale applied to fp32
 * sums), "exact" (the spec's per-weight bf16 rounding), "scaled" or "int8" (docs/pipeline.md,
 * "Arithmetic and its error budget"); another value is MK_ERR_INVALID_ARGUMENT. */
MK_JIT_API int mk_jit_compile_spec_with(const char *spec_json, const char *out_dir,
                                        const char *kernel_name, long long target_sms,
                                        const char *arithmetic);

/* The message of the last failure on this thread ("" if none). */
MK_JIT_API const char *mk_jit_last_error(void);

/* The project's version ("0.4.0"), as mkc --version prints it. */
MK_JIT_API const char *mk_jit_version(void);

#ifdef __cplusplus
}
#endif

#endif /* MK_JIT_MK_JIT_H */
