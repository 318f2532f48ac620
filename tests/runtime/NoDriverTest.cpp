//===- NoDriverTest.cpp - A missing CUDA driver is an error, not a crash ---===//
//
// Points MK_CUDA_DRIVER_LIB at a library that does not exist before anything
// loads the driver, so these tests see the no-driver paths on any machine,
// GPU or not.
//
//===----------------------------------------------------------------------===//

#include "mk/runtime/Device.h"
#include "mk/runtime/mk.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace {
struct PointAtMissingDriver {
  PointAtMissingDriver() {
    setenv("MK_CUDA_DRIVER_LIB", "/nonexistent/libcuda-missing.so.1", 1);
  }
} pointAtMissingDriver;
} // namespace

TEST(NoDriver, LoadDriverReportsWhy) {
  mk::rt::Status st;
  EXPECT_EQ(mk::rt::loadDriver(&st), nullptr);
  EXPECT_EQ(st.code(), mk::rt::ErrorCode::NoDriver);
  EXPECT_NE(st.message().find("libcuda-missing.so.1"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("NVIDIA driver"), std::string::npos);
  // Remembered, same answer again.
  mk::rt::Status again;
  EXPECT_EQ(mk::rt::loadDriver(&again), nullptr);
  EXPECT_EQ(again.message(), st.message());
}

TEST(NoDriver, DeviceOpenFails) {
  std::shared_ptr<mk::rt::Device> dev;
  mk::rt::Status st = mk::rt::Device::open(0, dev);
  EXPECT_EQ(st.code(), mk::rt::ErrorCode::NoDriver);
  EXPECT_EQ(dev, nullptr);
  int n = -1;
  EXPECT_EQ(mk::rt::Device::count(n).code(), mk::rt::ErrorCode::NoDriver);
}

TEST(NoDriver, CApiReportsNoDriver) {
  mk_device *dev = nullptr;
  EXPECT_EQ(mk_device_open(0, &dev), MK_ERR_NO_DRIVER);
  EXPECT_EQ(dev, nullptr);
  EXPECT_NE(std::string(mk_last_error()).find("cannot load the CUDA driver"),
            std::string::npos);
  int n = 0;
  EXPECT_EQ(mk_device_count(&n), MK_ERR_NO_DRIVER);
  // Null handles are argument errors, not crashes.
  EXPECT_EQ(mk_session_step(nullptr, 0, 0), MK_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(mk_session_create(nullptr, nullptr, 0, nullptr),
            MK_ERR_INVALID_ARGUMENT);
  mk_session_destroy(nullptr);
  mk_kernel_destroy(nullptr);
  mk_device_destroy(nullptr);
}

TEST(NoDriver, CApiCompilesWithoutADevice) {
  // Compiling needs only NVRTC: an explicit architecture, no device.
  mk_kernel *k = nullptr;
  EXPECT_EQ(mk_kernel_from_strings(nullptr, "", "{}", "sm_90", nullptr, 0, &k),
            MK_ERR_MANIFEST);
  EXPECT_EQ(mk_kernel_from_strings(nullptr, "", "{}", nullptr, nullptr, 0, &k),
            MK_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(mk_last_error()).find("architecture"), std::string::npos);
  EXPECT_EQ(k, nullptr);
}
