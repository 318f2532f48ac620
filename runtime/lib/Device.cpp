//===- Device.cpp - A GPU and its primary context -------------------------===//

#include "mk/runtime/Device.h"

#include "mk/runtime/Nvrtc.h"

namespace mk {
namespace rt {

Status Device::count(int &n) {
  Status st;
  const DriverApi *drv = loadDriver(&st);
  if (!drv)
    return st;
  return cuCheck(drv->cuDeviceGetCount(&n), "cuDeviceGetCount");
}

Status Device::open(int ordinal, std::shared_ptr<Device> &out) {
  Status st;
  const DriverApi *drv = loadDriver(&st);
  if (!drv)
    return st;
  int n = 0;
  MK_RETURN_IF_ERROR(cuCheck(drv->cuDeviceGetCount(&n), "cuDeviceGetCount"));
  if (ordinal < 0 || ordinal >= n)
    return makeError(ErrorCode::NoDriver,
                     "no CUDA device " + std::to_string(ordinal) + " (" +
                         std::to_string(n) + " present)");
  std::shared_ptr<Device> d(new Device());
  d->drv_ = drv;
  d->ordinal_ = ordinal;
  MK_RETURN_IF_ERROR(cuCheck(drv->cuDeviceGet(&d->dev_, ordinal), "cuDeviceGet"));
  char name[256] = {0};
  MK_RETURN_IF_ERROR(
      cuCheck(drv->cuDeviceGetName(name, sizeof name - 1, d->dev_),
              "cuDeviceGetName"));
  d->name_ = name;
  auto attr = [&](CUdevice_attribute a, int &v, const char *what) {
    return cuCheck(drv->cuDeviceGetAttribute(&v, a, d->dev_), what);
  };
  int coop = 0;
  MK_RETURN_IF_ERROR(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                          d->ccMajor_, "compute capability"));
  MK_RETURN_IF_ERROR(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                          d->ccMinor_, "compute capability"));
  MK_RETURN_IF_ERROR(
      attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d->sms_, "SM count"));
  MK_RETURN_IF_ERROR(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                          d->maxSmemOptin_, "shared memory limit"));
  MK_RETURN_IF_ERROR(
      attr(CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, coop, "cooperative launch"));
  MK_RETURN_IF_ERROR(attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE, d->clockKHz_, "clock rate"));
  d->coop_ = coop != 0;
  MK_RETURN_IF_ERROR(
      cuCheck(drv->cuDeviceTotalMem(&d->totalMem_, d->dev_), "cuDeviceTotalMem"));
  MK_RETURN_IF_ERROR(cuCheck(drv->cuDevicePrimaryCtxRetain(&d->ctx_, d->dev_),
                             "cuDevicePrimaryCtxRetain"));
  MK_RETURN_IF_ERROR(d->makeCurrent());
  out = std::move(d);
  return Status::ok();
}

Device::~Device() {
  if (ctx_ && drv_)
    drv_->cuDevicePrimaryCtxRelease(dev_);
}

Status Device::makeCurrent() const {
  return cuCheck(drv_->cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
}

std::string Device::arch() const {
  return archForComputeCapability(ccMajor_, ccMinor_);
}

DeviceBuffer &DeviceBuffer::operator=(DeviceBuffer &&o) noexcept {
  if (this != &o) {
    reset();
    dev_ = std::move(o.dev_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = 0;
    o.bytes_ = 0;
  }
  return *this;
}

Status DeviceBuffer::allocate(const std::shared_ptr<Device> &dev, size_t bytes,
                              DeviceBuffer &out) {
  MK_RETURN_IF_ERROR(dev->makeCurrent());
  CUdeviceptr p = 0;
  size_t n = bytes ? bytes : 1;
  MK_RETURN_IF_ERROR(cuCheck(dev->driver().cuMemAlloc(&p, n),
                             "cuMemAlloc(" + std::to_string(n) + " bytes)"));
  out.reset();
  out.dev_ = dev;
  out.ptr_ = p;
  out.bytes_ = bytes;
  return Status::ok();
}

void DeviceBuffer::reset() {
  if (ptr_ && dev_) {
    dev_->makeCurrent();
    dev_->driver().cuMemFree(ptr_);
  }
  ptr_ = 0;
  bytes_ = 0;
  dev_.reset();
}

} // namespace rt
} // namespace mk
