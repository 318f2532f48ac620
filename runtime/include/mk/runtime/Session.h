//===- Session.h - Weights, decode state and the per-token launch -*- C++ -*-===//
//
// A Session holds one compiled kernel loaded on a device, its weights and one
// decode state, and runs one token per step() as exactly ONE cooperative
// kernel launch: no copy, memset or other kernel happens inside step(). Every
// check (weights bound, shapes, cache capacity) happens before the launch, so
// a failed step leaves the state untouched.
//
// State. The session's state lives in "storage" buffers: owned by the session
// by default, or the caller's own device buffers (setStateStorage, e.g.
// PyTorch tensors). The MLA caches hold `capacity()` rows of which the first
// `contextLength()` are valid. Normally state_in == state_out == storage (in
// place). adoptState() hands in a foreign state for the NEXT step only: that
// step's launch reads the foreign tensors and writes the new state (with the
// foreign cache rows copied over by the kernel) into storage.
//
// Where memory moves (never inside step()): reserve() reallocates the owned
// caches and copies their valid rows; adoptState() on owned storage too small
// for the foreign context reallocates without copying (the kernel fills it);
// writeStateHost()/readStateHost() copy between host and storage.
//
//===----------------------------------------------------------------------===//

#ifndef MK_RUNTIME_SESSION_H
#define MK_RUNTIME_SESSION_H

#include "mk/Safetensors.h"
#include "mk/runtime/Binding.h"
#include "mk/runtime/Device.h"
#include "mk/runtime/Kernel.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mk {
namespace rt {

/// A named tensor already on the device (not owned).
struct DeviceTensor {
  std::string name;
  CUdeviceptr ptr = 0;
  DType dtype = DType::U8;
  std::vector<int64_t> shape;
};

struct SessionOptions {
  /// Initial rows of the owned MLA caches.
  int64_t cacheCapacity = 4096;
  /// Blocks to launch; 0 = min(co-resident blocks, manifest max_blocks).
  /// Must not exceed the co-resident maximum. $MK_GRID overrides when 0.
  int grid = 0;
  /// The stream every launch and copy uses (0 = the legacy default stream,
  /// which PyTorch's default stream also is).
  CUstream stream = nullptr;
};

struct LaunchConfig {
  int grid = 0;
  int threadsPerBlock = 0;
  int dynamicSharedBytes = 0;
  int blocksPerSm = 0;
  int multiprocessors = 0;
};

class Session {
public:
  /// Loads `kernel` (compiled for dev->arch()) into the device's context,
  /// allocates workspace, sync (zeroed once), debug, staging buffers and the
  /// owned state (zeroed), and computes the launch grid.
  static Status create(std::shared_ptr<Device> dev,
                       std::shared_ptr<const Kernel> kernel,
                       const SessionOptions &opts,
                       std::unique_ptr<Session> &out);
  ~Session();

  //===--- Weights --------------------------------------------------------===//
  /// Copies a host tensor to owned device memory.
  Status bindWeightHost(const std::string &name, const void *data, DType dtype,
                        const std::vector<int64_t> &shape);
  /// Binds caller-owned device memory (zero copy; must outlive the session's
  /// use of it).
  Status bindWeightDevice(const DeviceTensor &t);
  /// Binds every weight found in a safetensors file (names not of this
  /// kernel are ignored; a weight present with the wrong shape or dtype is an
  /// error, as is a file holding none of the weights).
  Status bindSafetensors(const std::string &path, int *boundCount = nullptr);
  /// Binds every tensor of `weights` with bindWeightHost (all must be
  /// weights of this kernel; the first error names its tensor).
  Status bindWeightsHost(const TensorMap &weights);
  /// Names of weights not bound yet (manifest order).
  std::vector<std::string> unboundWeights() const;

  //===--- State ----------------------------------------------------------===//
  int64_t contextLength() const { return ctxLen_; }
  int64_t capacity() const { return capacity_; }
  /// Sets the number of valid cache rows (<= capacity). Host-side only.
  Status setContextLength(int64_t rows);
  /// Grows the owned caches to at least `rows` rows, keeping the valid rows
  /// (reallocation + device copy). Invalid with external storage.
  Status reserve(int64_t rows);
  /// Copies a host tensor into storage. Caches must have contextLength() rows.
  Status writeStateHost(const std::string &name, const void *data, DType dtype,
                        const std::vector<int64_t> &shape);
  /// Makes the whole decode state `tensors` (stateTensors(cfg, ctxLen)) the
  /// session's: reserves room for the next row, sets the context length and
  /// writes every tensor.
  Status loadStateHost(const TensorMap &tensors, int64_t ctxLen);
  /// Copies storage to host (caches: contextLength() rows). Synchronizes.
  Status readStateHost(const std::string &name, void *data, size_t bytes);
  /// Zeroes every state tensor (capacity rows). contextLength() unchanged.
  Status zeroState();
  /// Uses caller-owned device buffers as storage: every state tensor, caches
  /// with `capacity` rows. Valid rows: min(contextLength(), capacity).
  Status setStateStorage(const std::vector<DeviceTensor> &tensors,
                         int64_t capacity);
  /// Back to owned storage (reallocated at the current capacity, zeroed).
  Status useOwnedStorage();
  /// The next step reads this foreign state (every state tensor, caches with
  /// `ctxLen` rows) and writes the result to storage; contextLength()
  /// becomes ctxLen. Grows owned storage when ctxLen + 1 > capacity.
  Status adoptState(const std::vector<DeviceTensor> &tensors, int64_t ctxLen);
  /// Storage pointer of a state tensor.
  Status statePointer(const std::string &name, CUdeviceptr &ptr) const;
  const std::vector<StateSlot> &stateSlots() const { return layout_.state; }

  //===--- Steps ----------------------------------------------------------===//
  /// One token: exactly one cooperative launch on the session's stream,
  /// asynchronous. hidden pointers are bf16 [hidden] device buffers.
  Status step(CUdeviceptr hiddenIn, CUdeviceptr hiddenOut);
  /// Host convenience: copies `in` up, steps, copies the output back, syncs.
  Status stepHost(const uint16_t *in, uint16_t *out);
  /// The whole model's step (its config has a vocabulary): one launch from
  /// token id `token` (0 <= token < vocab, else InvalidArgument before
  /// anything runs: the state is untouched), the next token (int32) written
  /// to `nextToken` on the device and the logits to logits(). A block's
  /// kernel refuses it (and a whole model's refuses step()).
  Status stepToken(int32_t token, CUdeviceptr nextToken);
  /// The same, the next token copied to host; synchronizes.
  Status stepTokenHost(int32_t token, int32_t *next);
  /// The whole model's bf16 logits [vocab] of the last step (in the
  /// workspace), or 0 for a block's kernel.
  CUdeviceptr logits() const;
  /// Copies them to host (vocab uint16 bf16 bits); synchronizes.
  Status readLogitsHost(uint16_t *out);
  Status synchronize();
  /// Copies `bytes` of the kernel module's __device__ global `name` to host
  /// memory (e.g. mk_phase_ns of a -DMK_PHASE_TIMING build). Synchronizes.
  Status readModuleGlobal(const std::string &name, void *dst, size_t bytes);
  /// Times `iters` steps after `warmup`, each bracketed by events; the
  /// context length is restored before every step so all run at the same
  /// context. `msPerStep` gets each step's time.
  Status timeSteps(CUdeviceptr hiddenIn, CUdeviceptr hiddenOut, int warmup,
                   int iters, std::vector<float> &msPerStep);
  /// timeSteps for a whole model: every step from token `token`.
  Status timeTokenSteps(int32_t token, CUdeviceptr nextToken, int warmup, int iters,
                        std::vector<float> &msPerStep);

  //===--- Debug ----------------------------------------------------------===//
  /// A capture's bytes from the debug arena (debug_capture kernels only).
  Status readCapture(const std::string &name, std::vector<uint8_t> &out);

  const LaunchConfig &launchConfig() const { return launch_; }
  const Manifest &manifest() const { return kernel_->manifest(); }
  const std::shared_ptr<Device> &device() const { return dev_; }
  CUstream stream() const { return stream_; }
  void setStream(CUstream s) { stream_ = s; }
  /// Launches issued by this session (not a proof of anything: the tests
  /// count launches with CUPTI / torch.profiler).
  uint64_t launchCount() const { return launches_; }
  /// Device staging buffers for the hidden in/out (bf16 [hidden]).
  CUdeviceptr stagingIn() const { return stageIn_.ptr(); }
  CUdeviceptr stagingOut() const { return stageOut_.ptr(); }

private:
  Session() = default;
  /// The one cooperative launch of step() and stepToken().
  Status launch(CUdeviceptr hiddenIn, CUdeviceptr hiddenOut, int32_t token);
  Status timeLaunches(const std::function<Status()> &launchOne, int warmup, int iters,
                      std::vector<float> &msPerStep);
  Status allocateOwnedState(int64_t capacity, bool zero);
  Status checkReadyToLaunch(CUdeviceptr in, CUdeviceptr out) const;

  std::shared_ptr<Device> dev_;
  std::shared_ptr<const Kernel> kernel_;
  BindingLayout layout_;
  CUmodule module_ = nullptr;
  CUfunction func_ = nullptr;
  LaunchConfig launch_;
  CUstream stream_ = nullptr;

  std::vector<CUdeviceptr> weightPtr_; ///< by param index (0 = unbound)
  std::vector<DeviceBuffer> ownedWeights_; ///< by param index

  std::vector<DeviceBuffer> ownedState_; ///< by slot
  std::vector<CUdeviceptr> storage_;     ///< by slot
  std::vector<CUdeviceptr> pendingIn_;   ///< by slot, empty when none
  bool externalStorage_ = false;
  int64_t capacity_ = 0, ctxLen_ = 0;

  DeviceBuffer workspace_, sync_, debug_, stageIn_, stageOut_;
  uint64_t launches_ = 0;
};

} // namespace rt
} // namespace mk

#endif // MK_RUNTIME_SESSION_H
