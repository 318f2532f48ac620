//===- Session.cpp - Weights, decode state and the per-token launch -------===//

#include "mk/runtime/Session.h"
#include "mk/runtime/WeightLayout.h"

#include "mk/Safetensors.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <memory>
#include <new>

namespace mk {
namespace rt {

namespace {
int64_t tensorBytes(DType dtype, const std::vector<int64_t> &shape) {
  int64_t n = dtypeBytes(dtype);
  for (int64_t d : shape)
    n *= d;
  return n;
}
} // namespace

Status Session::create(std::shared_ptr<Device> dev,
                       std::shared_ptr<const Kernel> kernel,
                       const SessionOptions &opts,
                       std::unique_ptr<Session> &out) {
  if (!dev || !kernel)
    return makeError(ErrorCode::InvalidArgument, "null device or kernel");
  if (kernel->arch() != dev->arch())
    return makeError(ErrorCode::InvalidArgument,
                     "kernel compiled for " + kernel->arch() + " but " +
                         dev->name() + " is " + dev->arch());
  if (!dev->cooperativeLaunch())
    return makeError(ErrorCode::Cuda, dev->name() +
                                          " does not support cooperative launch");
  std::unique_ptr<Session> s(new Session());
  s->dev_ = dev;
  s->kernel_ = kernel;
  s->stream_ = opts.stream;
  const Manifest &m = kernel->manifest();
  MK_RETURN_IF_ERROR(BindingLayout::build(m, s->layout_));
  const DriverApi &drv = dev->driver();
  MK_RETURN_IF_ERROR(dev->makeCurrent());

  MK_RETURN_IF_ERROR(cuCheck(
      drv.cuModuleLoadData(&s->module_, kernel->cubin().data()),
      "cuModuleLoadData(" + m.kernel + " for " + kernel->arch() + ")"));
  MK_RETURN_IF_ERROR(
      cuCheck(drv.cuModuleGetFunction(&s->func_, s->module_, m.kernel.c_str()),
              "cuModuleGetFunction('" + m.kernel + "')"));

  // Launch configuration, from the device and the kernel, never assumed.
  LaunchConfig &lc = s->launch_;
  lc.threadsPerBlock = int(m.threadsPerBlock);
  lc.dynamicSharedBytes = int(m.dynamicSharedBytes);
  lc.multiprocessors = dev->multiprocessors();
  // The kernel's static shared memory (its templates' arrays) counts
  // against the same per-block limit as the manifest's dynamic bytes.
  int staticShared = 0;
  MK_RETURN_IF_ERROR(cuCheck(drv.cuFuncGetAttribute(&staticShared,
                                                    CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                                                    s->func_),
                             "cuFuncGetAttribute(SHARED_SIZE_BYTES)"));
  if (m.dynamicSharedBytes + int64_t(staticShared) > dev->maxSharedPerBlockOptin())
    return makeError(ErrorCode::Cuda,
                     "the kernel asks for " + std::to_string(m.dynamicSharedBytes) +
                         " bytes of dynamic and " + std::to_string(staticShared) +
                         " of static shared memory per block; " + dev->name() +
                         " allows " + std::to_string(dev->maxSharedPerBlockOptin()) +
                         " (compile it for this GPU: schedule-form-phases max-shared-bytes)");
  if (m.dynamicSharedBytes > 48 * 1024) {
    MK_RETURN_IF_ERROR(cuCheck(
        drv.cuFuncSetAttribute(s->func_,
                               CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                               lc.dynamicSharedBytes),
        "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)"));
  }
  MK_RETURN_IF_ERROR(cuCheck(drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                                 &lc.blocksPerSm, s->func_, lc.threadsPerBlock,
                                 size_t(lc.dynamicSharedBytes)),
                             "cuOccupancyMaxActiveBlocksPerMultiprocessor"));
  if (lc.blocksPerSm < 1)
    return makeError(ErrorCode::Cuda,
                     "the kernel cannot be resident on " + dev->name() +
                         " (too many registers or too much shared memory for " +
                         std::to_string(lc.threadsPerBlock) + " threads)");
  int coResident = lc.blocksPerSm * lc.multiprocessors;
  int grid = opts.grid;
  if (grid == 0) {
    if (const char *g = std::getenv("MK_GRID"); g && *g)
      grid = std::atoi(g);
  }
  if (grid == 0) {
    grid = coResident;
    if (m.maxBlocks > 0 && m.maxBlocks < grid)
      grid = int(m.maxBlocks);
  }
  if (grid < 1 || grid > coResident)
    return makeError(ErrorCode::InvalidArgument,
                     "grid " + std::to_string(grid) + " is not in [1, " +
                         std::to_string(coResident) +
                         "] (co-resident blocks on " + dev->name() + ")");
  lc.grid = grid;

  // Arenas. The sync words are zeroed once, here; the kernel leaves them
  // ready for the next launch.
  MK_RETURN_IF_ERROR(
      DeviceBuffer::allocate(dev, size_t(m.workspaceBytes), s->workspace_));
  MK_RETURN_IF_ERROR(DeviceBuffer::allocate(dev, size_t(m.syncBytes), s->sync_));
  MK_RETURN_IF_ERROR(cuCheck(
      drv.cuMemsetD8(s->sync_.ptr(), 0, std::max<size_t>(1, m.syncBytes)),
      "zeroing the sync buffer"));
  if (m.debugCapture) {
    MK_RETURN_IF_ERROR(
        DeviceBuffer::allocate(dev, size_t(m.debugBytes), s->debug_));
    MK_RETURN_IF_ERROR(cuCheck(
        drv.cuMemsetD8(s->debug_.ptr(), 0, std::max<size_t>(1, m.debugBytes)),
        "zeroing the debug arena"));
  }
  size_t hiddenBytes = size_t(m.config.hidden) * 2;
  MK_RETURN_IF_ERROR(DeviceBuffer::allocate(dev, hiddenBytes, s->stageIn_));
  MK_RETURN_IF_ERROR(DeviceBuffer::allocate(dev, hiddenBytes, s->stageOut_));

  s->weightPtr_.assign(m.params.size(), 0);
  s->ownedWeights_.resize(m.params.size());
  if (opts.cacheCapacity < 1 || opts.cacheCapacity > INT_MAX)
    return makeError(ErrorCode::InvalidArgument,
                     "cache capacity must be in [1, 2^31)");
  MK_RETURN_IF_ERROR(s->allocateOwnedState(opts.cacheCapacity, true));
  out = std::move(s);
  return Status::ok();
}

Session::~Session() {
  if (module_ && dev_) {
    dev_->makeCurrent();
    dev_->driver().cuModuleUnload(module_);
  }
}

Status Session::allocateOwnedState(int64_t capacity, bool zero) {
  std::vector<DeviceBuffer> fresh(layout_.state.size());
  for (size_t i = 0; i < layout_.state.size(); ++i) {
    const StateSlot &s = layout_.state[i];
    size_t bytes = size_t(s.bytesFor(capacity));
    MK_RETURN_IF_ERROR(DeviceBuffer::allocate(dev_, bytes, fresh[i]));
    if (zero && bytes)
      MK_RETURN_IF_ERROR(
          cuCheck(dev_->driver().cuMemsetD8(fresh[i].ptr(), 0, bytes),
                  "zeroing state '" + s.desc.name + "'"));
  }
  ownedState_ = std::move(fresh);
  storage_.resize(ownedState_.size());
  for (size_t i = 0; i < ownedState_.size(); ++i)
    storage_[i] = ownedState_[i].ptr();
  capacity_ = capacity;
  externalStorage_ = false;
  return Status::ok();
}

//===--- Weights ----------------------------------------------------------===//

Status Session::bindWeightHost(const std::string &name, const void *data,
                               DType dtype, const std::vector<int64_t> &shape) {
  int param = -1;
  MK_RETURN_IF_ERROR(layout_.checkWeight(name, dtype, shape, param));
  if (!data)
    return makeError(ErrorCode::InvalidArgument,
                     "weight '" + name + "': null host pointer");
  MK_RETURN_IF_ERROR(dev_->makeCurrent());
  size_t bytes = size_t(tensorBytes(dtype, shape));
  // A tile-contiguous weight of this kernel is repacked on the way (on all
  // cores: a whole model's weights are tens of GB).
  std::unique_ptr<uint8_t[]> laidOut;
  const ManifestParam &mp = manifest().params[size_t(param)];
  if (mp.tile) {
    laidOut.reset(new (std::nothrow) uint8_t[bytes]);
    if (!laidOut)
      return makeError(ErrorCode::InvalidArgument, // as the C API reports bad_alloc
                       "weight '" + name + "': no host memory (" + std::to_string(bytes) +
                           " bytes) to repack it in");
    layoutTiledWeight(data, laidOut.get(), shape, mp.tile, size_t(dtypeBytes(dtype)), mp.order);
    data = laidOut.get();
  }
  DeviceBuffer &buf = ownedWeights_[size_t(param)];
  if (!buf || buf.bytes() != bytes)
    MK_RETURN_IF_ERROR(DeviceBuffer::allocate(dev_, bytes, buf));
  if (bytes)
    MK_RETURN_IF_ERROR(
        cuCheck(dev_->driver().cuMemcpyHtoD(buf.ptr(), data, bytes),
                "copying weight '" + name + "' to the device"));
  weightPtr_[size_t(param)] = buf.ptr();
  return Status::ok();
}

Status Session::bindWeightDevice(const DeviceTensor &t) {
  int param = -1;
  MK_RETURN_IF_ERROR(layout_.checkWeight(t.name, t.dtype, t.shape, param));
  if (!t.ptr)
    return makeError(ErrorCode::InvalidArgument,
                     "weight '" + t.name + "': null device pointer");
  if (manifest().params[size_t(param)].tile) {
    // The kernel reads it tile-contiguous: no zero copy; a repacked copy
    // (through the host, once).
    std::vector<uint8_t> host(size_t(tensorBytes(t.dtype, t.shape)));
    MK_RETURN_IF_ERROR(dev_->makeCurrent());
    if (!host.empty())
      MK_RETURN_IF_ERROR(
          cuCheck(dev_->driver().cuMemcpyDtoH(host.data(), t.ptr, host.size()),
                  "reading weight '" + t.name + "' to repack it"));
    return bindWeightHost(t.name, host.data(), t.dtype, t.shape);
  }
  ownedWeights_[size_t(param)].reset();
  weightPtr_[size_t(param)] = t.ptr;
  return Status::ok();
}

Status Session::bindSafetensors(const std::string &path, int *boundCount) {
  TensorMap tensors;
  std::vector<std::string> problems;
  if (!readSafetensors(path, tensors, problems)) {
    std::string msg = "cannot read " + path;
    for (const std::string &p : problems)
      msg += "; " + p;
    return makeError(ErrorCode::Io, msg);
  }
  // Check everything first: a bad file binds nothing.
  int n = 0;
  for (const auto &kv : tensors) {
    if (!layout_.weightByName.count(kv.first))
      continue;
    int param;
    Status st = layout_.checkWeight(kv.first, kv.second.desc.dtype,
                                    kv.second.desc.shape, param);
    if (!st.isOk())
      return makeError(st.code(), path + ": " + st.message());
    ++n;
  }
  if (n == 0)
    return makeError(ErrorCode::Binding,
                     path + " holds none of the kernel's weights");
  TensorMap mine;
  for (auto &kv : tensors)
    if (layout_.weightByName.count(kv.first))
      mine.emplace(kv.first, std::move(kv.second));
  MK_RETURN_IF_ERROR(bindWeightsHost(mine));
  if (boundCount)
    *boundCount = n;
  return Status::ok();
}

Status Session::bindWeightsHost(const TensorMap &weights) {
  for (const auto &kv : weights)
    MK_RETURN_IF_ERROR(bindWeightHost(kv.first, kv.second.data.data(),
                                      kv.second.desc.dtype, kv.second.desc.shape));
  return Status::ok();
}

std::vector<std::string> Session::unboundWeights() const {
  std::vector<std::string> out;
  for (int p : layout_.weightParams)
    if (!weightPtr_[size_t(p)])
      out.push_back(manifest().params[size_t(p)].name);
  return out;
}

//===--- State ------------------------------------------------------------===//

Status Session::setContextLength(int64_t rows) {
  if (rows < 0 || rows > capacity_)
    return makeError(ErrorCode::InvalidArgument,
                     "context length " + std::to_string(rows) +
                         " is not in [0, capacity " +
                         std::to_string(capacity_) + "]");
  ctxLen_ = rows;
  pendingIn_.clear();
  return Status::ok();
}

Status Session::reserve(int64_t rows) {
  if (rows <= capacity_)
    return Status::ok();
  if (externalStorage_)
    return makeError(ErrorCode::InvalidArgument,
                     "reserve(" + std::to_string(rows) +
                         ") on caller-owned state storage: hand in larger "
                         "buffers with setStateStorage instead");
  if (rows > INT_MAX)
    return makeError(ErrorCode::InvalidArgument, "capacity must be < 2^31");
  MK_RETURN_IF_ERROR(dev_->makeCurrent());
  const DriverApi &drv = dev_->driver();
  std::vector<DeviceBuffer> old = std::move(ownedState_);
  std::vector<CUdeviceptr> oldStorage = storage_;
  int64_t oldCap = capacity_;
  Status st = allocateOwnedState(rows, false);
  if (!st.isOk()) {
    ownedState_ = std::move(old);
    storage_ = oldStorage;
    capacity_ = oldCap;
    return st;
  }
  // Valid rows move over; S and the conv windows move whole.
  MK_RETURN_IF_ERROR(cuCheck(drv.cuStreamSynchronize(stream_), "sync"));
  for (size_t i = 0; i < layout_.state.size(); ++i) {
    const StateSlot &s = layout_.state[i];
    size_t bytes = size_t(s.isCache ? s.bytesFor(ctxLen_) : s.rowBytes);
    if (bytes)
      MK_RETURN_IF_ERROR(
          cuCheck(drv.cuMemcpyDtoD(storage_[i], oldStorage[i], bytes),
                  "copying state '" + s.desc.name + "' into the larger cache"));
    if (s.isCache) {
      size_t rest = size_t(s.bytesFor(rows - ctxLen_));
      MK_RETURN_IF_ERROR(cuCheck(
          drv.cuMemsetD8(storage_[i] + s.bytesFor(ctxLen_), 0, rest),
          "zeroing new cache rows"));
    }
  }
  return Status::ok();
}

Status Session::writeStateHost(const std::string &name, const void *data,
                               DType dtype, const std::vector<int64_t> &shape) {
  int slot = -1;
  MK_RETURN_IF_ERROR(layout_.checkState(name, dtype, shape, ctxLen_, slot));
  const StateSlot &s = layout_.state[size_t(slot)];
  size_t bytes = size_t(s.bytesFor(ctxLen_));
  // A cache at context 0 has no rows: an empty host tensor (null data) is
  // fine there.
  if (!data && bytes)
    return makeError(ErrorCode::InvalidArgument,
                     "state '" + name + "': null host pointer");
  MK_RETURN_IF_ERROR(dev_->makeCurrent());
  pendingIn_.clear();
  if (bytes == 0)
    return Status::ok();
  const DriverApi &drv = dev_->driver();
  MK_RETURN_IF_ERROR(cuCheck(drv.cuStreamSynchronize(stream_), "sync"));
  return cuCheck(drv.cuMemcpyHtoD(storage_[size_t(slot)], data, bytes),
                 "copying state '" + name + "' to the device");
}

Status Session::loadStateHost(const TensorMap &tensors, int64_t ctxLen) {
  if (!externalStorage_)
    MK_RETURN_IF_ERROR(reserve(ctxLen + 1));
  MK_RETURN_IF_ERROR(setContextLength(ctxLen));
  for (const auto &kv : tensors)
    MK_RETURN_IF_ERROR(writeStateHost(kv.first, kv.second.data.data(),
                                      kv.second.desc.dtype, kv.second.desc.shape));
  return Status::ok();
}

Status Session::readStateHost(const std::string &name, void *data,
                              size_t bytes) {
  auto it = layout_.stateByName.find(name);
  if (it == layout_.stateByName.end())
    return makeError(ErrorCode::Binding,
                     "unknown state tensor '" + name + "'");
  const StateSlot &s = layout_.state[size_t(it->second)];
  size_t want = size_t(s.bytesFor(ctxLen_));
  if (bytes != want)
    return makeError(ErrorCode::InvalidArgument,
                     "state '" + name + "': " + std::to_string(want) +
                         " bytes to read at context " +
                         std::to_string(ctxLen_) + ", buffer has " +
                         std::to_string(bytes));
  if (!want)
    return Status::ok();
  MK_RETURN_IF_ERROR(dev_->makeCurrent());
  const DriverApi &drv = dev_->driver();
  MK_RETURN_IF_ERROR(cuCheck(drv.cuStreamSynchronize(stream_), "sync"));
  return cuCheck(drv.cuMemcpyDtoH(data, storage_[size_t(it->second)], want),
                 "reading state '" + name + "'");
}

Status Session::zeroState() {
  MK_RETURN_IF_ERROR(dev_->makeCurrent());
  const DriverApi &drv = dev_->driver();
  MK_RETURN_IF_ERROR(cuCheck(drv.cuStreamSynchronize(stream_), "sync"));
  for (size_t i = 0; i < layout_.state.size(); ++i) {
    size_t bytes = size_t(layout_.state[i].bytesFor(capacity_));
    if (bytes)
      MK_RETURN_IF_ERROR(cuCheck(drv.cuMemsetD8(storage_[i], 0, bytes),
                                 "zeroing the state"));
  }
  pendingIn_.clear();
  return Status::ok();
}

namespace {
/// Maps every state tensor of `tensors` to its slot, checking names, dtypes
/// and shapes (caches with `rows` rows) and that none is missing.
Status collectState(const BindingLayout &layout,
                    const std::vector<DeviceTensor> &tensors, int64_t rows,
                    const char *what, std::vector<CUdeviceptr> &bySlot) {
  bySlot.assign(layout.state.size(), 0);
  std::vector<bool> seen(layout.state.size(), false);
  for (const DeviceTensor &t : tensors) {
    int slot = -1;
    MK_RETURN_IF_ERROR(layout.checkState(t.name, t.dtype, t.shape, rows, slot));
    int64_t numel = 1;
    for (int64_t d : t.shape)
      numel *= d;
    // An empty tensor (a cache of a fresh state, 0 rows) may have no storage.
    if (!t.ptr && numel != 0)
      return makeError(ErrorCode::InvalidArgument,
                       std::string(what) + ": state '" + t.name +
                           "' has a null device pointer");
    if (seen[size_t(slot)])
      return makeError(ErrorCode::InvalidArgument,
                       std::string(what) + ": state '" + t.name +
                           "' given twice");
    seen[size_t(slot)] = true;
    bySlot[size_t(slot)] = t.ptr;
  }
  for (size_t i = 0; i < bySlot.size(); ++i)
    if (!seen[i])
      return makeError(ErrorCode::NotBound,
                       std::string(what) + ": state '" +
                           layout.state[i].desc.name + "' is missing");
  return Status::ok();
}
} // namespace

Status Session::setStateStorage(const std::vector<DeviceTensor> &tensors,
                                int64_t capacity) {
  if (capacity < 1 || capacity > INT_MAX)
    return makeError(ErrorCode::InvalidArgument,
                     "state storage capacity must be in [1, 2^31)");
  std::vector<CUdeviceptr> bySlot;
  MK_RETURN_IF_ERROR(
      collectState(layout_, tensors, capacity, "setStateStorage", bySlot));
  ownedState_.clear();
  storage_ = bySlot;
  capacity_ = capacity;
  externalStorage_ = true;
  ctxLen_ = std::min(ctxLen_, capacity_);
  return Status::ok();
}

Status Session::useOwnedStorage() {
  pendingIn_.clear();
  return allocateOwnedState(capacity_, true);
}

Status Session::adoptState(const std::vector<DeviceTensor> &tensors,
                           int64_t ctxLen) {
  if (ctxLen < 0 || ctxLen >= INT_MAX)
    return makeError(ErrorCode::InvalidArgument,
                     "adoptState: context length " + std::to_string(ctxLen) +
                         " out of range");
  std::vector<CUdeviceptr> bySlot;
  MK_RETURN_IF_ERROR(collectState(layout_, tensors, ctxLen, "adoptState", bySlot));
  if (ctxLen + 1 > capacity_) {
    if (externalStorage_)
      return makeError(ErrorCode::CacheFull,
                       "cache full: ctx_len " + std::to_string(ctxLen) +
                           ", capacity " + std::to_string(capacity_) +
                           " (adopted state does not fit the caller's storage)");
    // The old contents are being replaced, so no copy: the kernel writes the
    // adopted rows into the new storage.
    // Geometric growth with room for the steps that follow the adoption.
    int64_t cap = std::min<int64_t>(std::max<int64_t>(2 * (ctxLen + 1), 2 * capacity_),
                                    INT_MAX - 1);
    MK_RETURN_IF_ERROR(allocateOwnedState(cap, false));
  }
  pendingIn_ = bySlot;
  ctxLen_ = ctxLen;
  return Status::ok();
}

Status Session::statePointer(const std::string &name, CUdeviceptr &ptr) const {
  auto it = layout_.stateByName.find(name);
  if (it == layout_.stateByName.end())
    return makeError(ErrorCode::Binding,
                     "unknown state tensor '" + name + "'");
  ptr = storage_[size_t(it->second)];
  return Status::ok();
}

//===--- Steps ------------------------------------------------------------===//

Status Session::checkReadyToLaunch(CUdeviceptr in, CUdeviceptr out) const {
  const bool model = manifest().config.vocab > 0;
  if ((!in && !model) || !out)
    return makeError(ErrorCode::InvalidArgument,
                     model ? "stepToken: null next_token pointer"
                           : "step: null hidden_in or hidden_out pointer");
  for (int p : layout_.weightParams)
    if (!weightPtr_[size_t(p)])
      return makeError(ErrorCode::NotBound,
                       "weight '" + manifest().params[size_t(p)].name +
                           "' is not bound");
  if (ctxLen_ >= capacity_)
    return makeError(ErrorCode::CacheFull,
                     "cache full: ctx_len " + std::to_string(ctxLen_) +
                         ", capacity " + std::to_string(capacity_));
  return Status::ok();
}

Status Session::step(CUdeviceptr hiddenIn, CUdeviceptr hiddenOut) {
  if (manifest().config.vocab > 0)
    return makeError(ErrorCode::InvalidArgument,
                     "step: kernel '" + manifest().kernel +
                         "' is a whole model: it takes a token id (stepToken), not a hidden "
                         "vector");
  return launch(hiddenIn, hiddenOut, 0);
}

Status Session::stepToken(int32_t token, CUdeviceptr nextToken) {
  const int64_t vocab = manifest().config.vocab;
  if (vocab <= 0)
    return makeError(ErrorCode::InvalidArgument,
                     "stepToken: kernel '" + manifest().kernel +
                         "' is a block: it takes a hidden vector (step), not a token id");
  if (token < 0 || token >= vocab)
    return makeError(ErrorCode::InvalidArgument,
                     "stepToken: token " + std::to_string(token) + " is outside the vocabulary "
                     "(0.." + std::to_string(vocab - 1) + ")");
  return launch(0, nextToken, token);
}

Status Session::stepTokenHost(int32_t token, int32_t *next) {
  if (!next)
    return makeError(ErrorCode::InvalidArgument, "stepTokenHost: null next pointer");
  MK_RETURN_IF_ERROR(stepToken(token, stageOut_.ptr()));
  MK_RETURN_IF_ERROR(cuCheck(dev_->driver().cuMemcpyDtoHAsync(next, stageOut_.ptr(), 4, stream_),
                             "copying the next token out"));
  return synchronize();
}

CUdeviceptr Session::logits() const {
  const int64_t off = manifest().logitsOffset;
  return off < 0 ? 0 : workspace_.ptr() + CUdeviceptr(off);
}

Status Session::readLogitsHost(uint16_t *out) {
  if (logits() == 0)
    return makeError(ErrorCode::InvalidArgument,
                     "readLogitsHost: kernel '" + manifest().kernel + "' has no logits (a block)");
  if (!out)
    return makeError(ErrorCode::InvalidArgument, "readLogitsHost: null pointer");
  MK_RETURN_IF_ERROR(synchronize());
  return cuCheck(dev_->driver().cuMemcpyDtoH(out, logits(), size_t(manifest().config.vocab) * 2),
                 "copying the logits out");
}

Status Session::launch(CUdeviceptr hiddenIn, CUdeviceptr hiddenOut, int32_t token) {
  MK_RETURN_IF_ERROR(checkReadyToLaunch(hiddenIn, hiddenOut));
  const Manifest &m = manifest();
  // One value per kernel parameter, in manifest order; args[i] points at it.
  std::vector<CUdeviceptr> ptrs(m.params.size(), 0);
  std::vector<int32_t> scalars(m.params.size(), 0);
  std::vector<void *> args(m.params.size(), nullptr);
  for (int p : layout_.weightParams)
    ptrs[size_t(p)] = weightPtr_[size_t(p)];
  if (layout_.input >= 0)
    ptrs[size_t(layout_.input)] = hiddenIn;
  ptrs[size_t(layout_.output)] = hiddenOut;
  ptrs[size_t(layout_.workspace)] = workspace_.ptr();
  ptrs[size_t(layout_.sync)] = sync_.ptr();
  if (layout_.debug >= 0)
    ptrs[size_t(layout_.debug)] = debug_.ptr();
  for (size_t i = 0; i < layout_.state.size(); ++i) {
    const StateSlot &s = layout_.state[i];
    ptrs[size_t(s.outParam)] = storage_[i];
    ptrs[size_t(s.inParam)] = pendingIn_.empty() ? storage_[i] : pendingIn_[i];
  }
  scalars[size_t(layout_.ctxLen)] = int32_t(ctxLen_);
  scalars[size_t(layout_.capacity)] = int32_t(capacity_);
  if (layout_.token >= 0)
    scalars[size_t(layout_.token)] = token;
  for (size_t i = 0; i < m.params.size(); ++i)
    args[i] = m.params[i].isScalar() ? static_cast<void *>(&scalars[i])
                                     : static_cast<void *>(&ptrs[i]);
  MK_RETURN_IF_ERROR(dev_->makeCurrent());
  MK_RETURN_IF_ERROR(cuCheck(
      dev_->driver().cuLaunchCooperativeKernel(
          func_, unsigned(launch_.grid), 1, 1, unsigned(launch_.threadsPerBlock),
          1, 1, unsigned(launch_.dynamicSharedBytes), stream_, args.data()),
      "cuLaunchCooperativeKernel(" + m.kernel + ", grid " +
          std::to_string(launch_.grid) + ")"));
  ++launches_;
  ++ctxLen_;
  pendingIn_.clear();
  return Status::ok();
}

Status Session::stepHost(const uint16_t *in, uint16_t *out) {
  if (manifest().config.vocab > 0)
    return makeError(ErrorCode::InvalidArgument,
                     "stepHost: kernel '" + manifest().kernel +
                         "' is a whole model: it takes a token id (stepTokenHost), not a hidden "
                         "vector");
  if (!in || !out)
    return makeError(ErrorCode::InvalidArgument, "stepHost: null pointer");
  MK_RETURN_IF_ERROR(checkReadyToLaunch(stageIn_.ptr(), stageOut_.ptr()));
  MK_RETURN_IF_ERROR(dev_->makeCurrent());
  const DriverApi &drv = dev_->driver();
  size_t bytes = size_t(manifest().config.hidden) * 2;
  MK_RETURN_IF_ERROR(
      cuCheck(drv.cuMemcpyHtoDAsync(stageIn_.ptr(), in, bytes, stream_),
              "copying the hidden in"));
  MK_RETURN_IF_ERROR(step(stageIn_.ptr(), stageOut_.ptr()));
  MK_RETURN_IF_ERROR(
      cuCheck(drv.cuMemcpyDtoHAsync(out, stageOut_.ptr(), bytes, stream_),
              "copying the hidden out"));
  return synchronize();
}

Status Session::readModuleGlobal(const std::string &name, void *dst,
                                 size_t bytes) {
  MK_RETURN_IF_ERROR(synchronize());
  const DriverApi &drv = dev_->driver();
  CUdeviceptr p = 0;
  size_t size = 0;
  MK_RETURN_IF_ERROR(cuCheck(drv.cuModuleGetGlobal(&p, &size, module_, name.c_str()),
                             "the kernel has no global '" + name + "'"));
  if (size < bytes)
    return makeError(ErrorCode::InvalidArgument,
                     "global '" + name + "' holds " + std::to_string(size) +
                         " bytes, " + std::to_string(bytes) + " asked");
  return cuCheck(drv.cuMemcpyDtoH(dst, p, bytes), "reading global '" + name + "'");
}

Status Session::synchronize() {
  MK_RETURN_IF_ERROR(dev_->makeCurrent());
  return cuCheck(dev_->driver().cuStreamSynchronize(stream_),
                 "synchronizing after " + manifest().kernel);
}

Status Session::timeSteps(CUdeviceptr hiddenIn, CUdeviceptr hiddenOut,
                          int warmup, int iters,
                          std::vector<float> &msPerStep) {
  return timeLaunches([&] { return step(hiddenIn, hiddenOut); }, warmup, iters, msPerStep);
}

Status Session::timeTokenSteps(int32_t token, CUdeviceptr nextToken, int warmup, int iters,
                               std::vector<float> &msPerStep) {
  return timeLaunches([&] { return stepToken(token, nextToken); }, warmup, iters, msPerStep);
}

Status Session::timeLaunches(const std::function<Status()> &launchOne, int warmup, int iters,
                             std::vector<float> &msPerStep) {
  if (iters < 1 || warmup < 0)
    return makeError(ErrorCode::InvalidArgument,
                     "timing steps: bad counts (warmup " + std::to_string(warmup) + ", iters " +
                         std::to_string(iters) + ")");
  MK_RETURN_IF_ERROR(dev_->makeCurrent());
  const DriverApi &drv = dev_->driver();
  int64_t ctx0 = ctxLen_;
  std::vector<CUevent> events(2 * size_t(iters), nullptr);
  Status st;
  for (CUevent &e : events)
    if (st.isOk())
      st = cuCheck(drv.cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
  for (int i = 0; st.isOk() && i < warmup; ++i) {
    ctxLen_ = ctx0;
    st = launchOne();
  }
  for (int i = 0; st.isOk() && i < iters; ++i) {
    ctxLen_ = ctx0;
    st = cuCheck(drv.cuEventRecord(events[2 * i], stream_), "cuEventRecord");
    if (st.isOk())
      st = launchOne();
    if (st.isOk())
      st = cuCheck(drv.cuEventRecord(events[2 * i + 1], stream_),
                   "cuEventRecord");
  }
  if (st.isOk())
    st = synchronize();
  msPerStep.clear();
  for (int i = 0; st.isOk() && i < iters; ++i) {
    float ms = 0;
    st = cuCheck(drv.cuEventElapsedTime(&ms, events[2 * i], events[2 * i + 1]),
                 "cuEventElapsedTime");
    msPerStep.push_back(ms);
  }
  for (CUevent e : events)
    if (e)
      drv.cuEventDestroy(e);
  ctxLen_ = ctx0;
  return st;
}

Status Session::readCapture(const std::string &name,
                            std::vector<uint8_t> &out) {
  if (!debug_)
    return makeError(ErrorCode::InvalidArgument,
                     "the kernel was not compiled with debug_capture");
  for (const Capture &c : manifest().captures) {
    if (c.name != name)
      continue;
    out.resize(size_t(c.bytes()));
    MK_RETURN_IF_ERROR(synchronize());
    if (out.empty())
      return Status::ok();
    return cuCheck(dev_->driver().cuMemcpyDtoH(out.data(),
                                               debug_.ptr() + c.offset,
                                               out.size()),
                   "reading capture '" + name + "'");
  }
  return makeError(ErrorCode::InvalidArgument,
                   "no capture named '" + name + "'");
}

} // namespace rt
} // namespace mk
