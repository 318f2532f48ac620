/*===- mk.h - C API of the megakernel runtime ------------------------------===*
 *
 * Opaque handles over the C++ runtime (mk/runtime/Session.h), for ctypes and
 * other languages. Every function returns an mk_status; on failure
 * mk_last_error() gives a one-line message (thread-local, valid until the
 * next failing call on the thread). Device pointers are passed as uint64_t.
 * Tensor shapes are int64_t arrays; dtypes are strings "u8", "bf16", "f32",
 * "i32".
 *
 *===----------------------------------------------------------------------===*/

#ifndef MK_RUNTIME_MK_H
#define MK_RUNTIME_MK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define MK_API __attribute__((visibility("default")))
#else
#define MK_API
#endif

typedef enum mk_status {
  MK_OK = 0,
  MK_ERR_INVALID_ARGUMENT = 1,
  MK_ERR_MANIFEST = 2,
  MK_ERR_COMPILE = 3,
  MK_ERR_NO_DRIVER = 4,
  MK_ERR_CUDA = 5,
  MK_ERR_BINDING = 6,
  MK_ERR_CACHE_FULL = 7,
  MK_ERR_NOT_BOUND = 8,
  MK_ERR_IO = 9
} mk_status;

typedef struct mk_device mk_device;
typedef struct mk_kernel mk_kernel;
typedef struct mk_session mk_session;

/* The message of the last failure on this thread ("" if none). */
MK_API const char *mk_last_error(void);
/* The runtime's ABI version (bumped on incompatible changes): 1. */
MK_API int mk_api_version(void);

/* The block spec of a Hugging Face config.json (text), docs/spec-format.md:
   *spec_json is the spec, *notes the import's notes one per line ("" if
   none), both valid until the next call on this thread. as_unit != 0 takes
   the model's dimensions into the unit family where its semantics differ
   (each difference a note; else an MK_ERR_INVALID_ARGUMENT naming them);
   group 0: the config's quantization group, else 128; name NULL or "":
   derived. Needs no device. */
MK_API mk_status mk_spec_from_hf_config(const char *config_json, int as_unit,
                                        int64_t group, const char *name,
                                        const char **spec_json,
                                        const char **notes);

/* Devices. mk_device_open fails with MK_ERR_NO_DRIVER without a driver. */
MK_API mk_status mk_device_count(int *count);
MK_API mk_status mk_device_open(int ordinal, mk_device **out);
/* name: buffer of name_size bytes (may be NULL). */
MK_API mk_status mk_device_info(const mk_device *dev, int *cc_major,
                                int *cc_minor, int *multiprocessors,
                                char *name, size_t name_size);
MK_API void mk_device_destroy(mk_device *dev);

/* Kernels. arch NULL or "": the device's architecture (dev required);
 * cache_dir NULL: $MK_CACHE_DIR or ~/.cache/megakernel; use_cache 0 skips
 * the on-disk cache. kernel_name NULL: the dir's only *.manifest.json. */
MK_API mk_status mk_kernel_load_dir(const mk_device *dev, const char *dir,
                                    const char *kernel_name, const char *arch,
                                    const char *cache_dir, int use_cache,
                                    mk_kernel **out);
MK_API mk_status mk_kernel_from_strings(const mk_device *dev,
                                        const char *source,
                                        const char *manifest_json,
                                        const char *arch,
                                        const char *cache_dir, int use_cache,
                                        mk_kernel **out);
/* The manifest text (owned by the kernel). */
MK_API const char *mk_kernel_manifest(const mk_kernel *k);
MK_API int mk_kernel_from_cache(const mk_kernel *k);
MK_API void mk_kernel_destroy(mk_kernel *k);

/* Sessions. cache_capacity: initial MLA cache rows (0: 4096). */
MK_API mk_status mk_session_create(mk_device *dev, const mk_kernel *k,
                                   int64_t cache_capacity, mk_session **out);
MK_API void mk_session_destroy(mk_session *s);
/* Launch on this stream (a CUstream / cudaStream_t; 0: legacy default). */
MK_API mk_status mk_session_set_stream(mk_session *s, uint64_t stream);
MK_API mk_status mk_session_grid(const mk_session *s, int *grid,
                                 int *threads_per_block);

MK_API mk_status mk_session_bind_weight_host(mk_session *s, const char *name,
                                             const void *data,
                                             const char *dtype,
                                             const int64_t *shape, int ndim);
MK_API mk_status mk_session_bind_weight_device(mk_session *s, const char *name,
                                               uint64_t ptr, const char *dtype,
                                               const int64_t *shape, int ndim);
MK_API mk_status mk_session_bind_safetensors(mk_session *s, const char *path,
                                             int *bound);
/* Number of unbound weights; the first one's name in `first` (may be NULL). */
MK_API mk_status mk_session_unbound_weights(const mk_session *s, int *count,
                                            char *first, size_t first_size);

MK_API mk_status mk_session_context_length(const mk_session *s, int64_t *ctx,
                                           int64_t *capacity);
MK_API mk_status mk_session_set_context_length(mk_session *s, int64_t rows);
MK_API mk_status mk_session_reserve(mk_session *s, int64_t rows);
MK_API mk_status mk_session_zero_state(mk_session *s);
MK_API mk_status mk_session_write_state_host(mk_session *s, const char *name,
                                             const void *data,
                                             const char *dtype,
                                             const int64_t *shape, int ndim);
MK_API mk_status mk_session_read_state_host(mk_session *s, const char *name,
                                            void *data, size_t bytes);
MK_API mk_status mk_session_state_pointer(const mk_session *s,
                                          const char *name, uint64_t *ptr);
/* n tensors: names[i], ptrs[i], dtypes[i], shapes[i] (ndims[i] dims). */
MK_API mk_status mk_session_set_state_storage(
    mk_session *s, int n, const char *const *names, const uint64_t *ptrs,
    const char *const *dtypes, const int64_t *const *shapes,
    const int *ndims, int64_t capacity);
MK_API mk_status mk_session_use_owned_storage(mk_session *s);
MK_API mk_status mk_session_adopt_state(mk_session *s, int n,
                                        const char *const *names,
                                        const uint64_t *ptrs,
                                        const char *const *dtypes,
                                        const int64_t *const *shapes,
                                        const int *ndims, int64_t ctx_len);

/* One token, one cooperative launch, asynchronous on the session stream. */
MK_API mk_status mk_session_step(mk_session *s, uint64_t hidden_in,
                                 uint64_t hidden_out);
/* Host bf16 bits in/out; synchronous. */
MK_API mk_status mk_session_step_host(mk_session *s, const uint16_t *in,
                                      uint16_t *out);
/* The whole model (a spec with a vocabulary): one launch from token id
 * `token` (0 <= token < vocab, else MK_ERR_INVALID_ARGUMENT before any
 * launch), the next token (int32) written to device pointer `next_token`;
 * asynchronous. A block's kernel refuses it (a whole model's refuses
 * mk_session_step). */
MK_API mk_status mk_session_step_token(mk_session *s, int32_t token,
                                       uint64_t next_token);
/* The same, the next token copied to *next; synchronous. */
MK_API mk_status mk_session_step_token_host(mk_session *s, int32_t token,
                                            int32_t *next);
/* The last step's bf16 logits: their device pointer and count (0 and 0 for
 * a block's kernel). */
MK_API mk_status mk_session_logits(const mk_session *s, uint64_t *ptr,
                                   int64_t *count);
/* Copies them to host: `count` must be the vocabulary; synchronous. */
MK_API mk_status mk_session_read_logits_host(mk_session *s, uint16_t *out,
                                             int64_t count);
MK_API mk_status mk_session_synchronize(mk_session *s);
/* Median event-timed milliseconds of `iters` steps after `warmup`, all at
 * the current context length. */
MK_API mk_status mk_session_time_steps(mk_session *s, uint64_t hidden_in,
                                       uint64_t hidden_out, int warmup,
                                       int iters, float *median_ms);
/* The same for a whole model: every step from token id `token`. */
MK_API mk_status mk_session_time_token_steps(mk_session *s, int32_t token,
                                             uint64_t next_token, int warmup,
                                             int iters, float *median_ms);
MK_API uint64_t mk_session_launch_count(const mk_session *s);
/* A debug capture's bytes (debug_capture kernels). */
MK_API mk_status mk_session_read_capture(mk_session *s, const char *name,
                                         void *data, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif /* MK_RUNTIME_MK_H */
