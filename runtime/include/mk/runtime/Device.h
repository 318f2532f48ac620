//===- Device.h - A GPU and its primary context ------------------*- C++ -*-===//
//
// Uses the device's primary context, the one the CUDA runtime (and so
// PyTorch) uses, so device pointers pass freely between the runtime and
// PyTorch tensors. Everything the launch depends on (compute capability, SM
// count, shared memory limits) is read from the device, never assumed.
//
//===----------------------------------------------------------------------===//

#ifndef MK_RUNTIME_DEVICE_H
#define MK_RUNTIME_DEVICE_H

#include "mk/runtime/Driver.h"

#include <memory>
#include <string>

namespace mk {
namespace rt {

class Device {
public:
  /// Loads the driver if needed and retains device `ordinal`'s primary
  /// context. NoDriver when there is no driver or no such device.
  static Status open(int ordinal, std::shared_ptr<Device> &out);
  /// Number of CUDA devices; NoDriver without a driver.
  static Status count(int &n);

  ~Device();
  Device(const Device &) = delete;
  Device &operator=(const Device &) = delete;

  /// Makes the primary context current on the calling thread.
  Status makeCurrent() const;
  const DriverApi &driver() const { return *drv_; }

  int ordinal() const { return ordinal_; }
  CUdevice handle() const { return dev_; }
  CUcontext context() const { return ctx_; }
  const std::string &name() const { return name_; }
  int computeMajor() const { return ccMajor_; }
  int computeMinor() const { return ccMinor_; }
  /// "sm_90" on an H200, "sm_120" on a Blackwell RTX PRO 6000.
  std::string arch() const;
  int multiprocessors() const { return sms_; }
  int maxSharedPerBlockOptin() const { return maxSmemOptin_; }
  bool cooperativeLaunch() const { return coop_; }
  size_t totalMemory() const { return totalMem_; }
  /// The SM clock's peak rate in kHz (what clock64 counts at full speed).
  int clockKHz() const { return clockKHz_; }

private:
  Device() = default;
  const DriverApi *drv_ = nullptr;
  int ordinal_ = 0;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  std::string name_;
  int ccMajor_ = 0, ccMinor_ = 0, sms_ = 0, maxSmemOptin_ = 0, clockKHz_ = 0;
  bool coop_ = false;
  size_t totalMem_ = 0;
};

/// Device memory owned by one object (freed on destruction).
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer &&o) noexcept { *this = std::move(o); }
  DeviceBuffer &operator=(DeviceBuffer &&o) noexcept;
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;

  /// Allocates `bytes` (at least 1, so the pointer is never null).
  static Status allocate(const std::shared_ptr<Device> &dev, size_t bytes,
                         DeviceBuffer &out);
  void reset();
  CUdeviceptr ptr() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  explicit operator bool() const { return ptr_ != 0; }

private:
  std::shared_ptr<Device> dev_;
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

} // namespace rt
} // namespace mk

#endif // MK_RUNTIME_DEVICE_H
