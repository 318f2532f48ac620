//===- SessionGpuTest.cpp - Runtime mechanics on a GPU, with a stub kernel -===//
//
// These need a GPU but no generated kernel: the stub of
// tests/runtime/TestKernels.h has the ABI's exact signature and easily checked
// behaviour, so binding, state adoption, capacity, errors and the one-launch
// guarantee are tested apart from the compiler.
//
//===----------------------------------------------------------------------===//

#include "CuptiLaunchCounter.h"
#include "GpuTestSupport.h"
#include "TestKernels.h"

#include <cstring>

using namespace mk;
using namespace mk::rt;
using namespace mk::testing;

namespace {

struct StubSession {
  BlockConfig cfg = tinyConfig();
  std::shared_ptr<Kernel> kernel;
  std::unique_ptr<Session> session;
  TensorMap weights;
};

Status makeStub(const std::shared_ptr<Device> &dev, StubSession &s,
                int64_t capacity, TestManifestOptions o = {},
                int64_t maxBlocks = 0) {
  KernelSource src;
  json::Value m = makeManifestValue(s.cfg, o);
  if (maxBlocks)
    m.set("max_blocks", json::Value::fromInt(maxBlocks));
  src.manifestText = json::write(m);
  src.source = makeStubKernelSource(s.cfg, o);
  src.sourceName = "stub.cu";
  KernelBuildOptions bo;
  bo.compile.arch = dev->arch();
  bo.useCache = false;
  MK_RETURN_IF_ERROR(Kernel::build(src, bo, s.kernel));
  SessionOptions so;
  so.cacheCapacity = capacity;
  MK_RETURN_IF_ERROR(Session::create(dev, s.kernel, so, s.session));
  for (const TensorDesc &d : parameterTensors(s.cfg))
    s.weights[d.name] = HostTensor(d);
  return bindAllWeights(*s.session, s.weights);
}

std::vector<uint8_t> readBytes(Session &s, const std::string &name) {
  const StateSlot &slot =
      s.stateSlots()[size_t(std::find_if(s.stateSlots().begin(),
                                         s.stateSlots().end(),
                                         [&](const StateSlot &x) {
                                           return x.desc.name == name;
                                         }) -
                            s.stateSlots().begin())];
  std::vector<uint8_t> out(size_t(slot.bytesFor(s.contextLength())));
  Status st = s.readStateHost(name, out.data(), out.size());
  EXPECT_TRUE(st.isOk()) << st.toString();
  return out;
}

} // namespace

TEST(SessionGpu, InPlaceStepAppendsOneRow) {
  MK_REQUIRE_GPU(dev);
  StubSession s;
  MK_ASSERT_OK(makeStub(dev, s, 16));
  Session &ses = *s.session;
  EXPECT_EQ(ses.launchConfig().grid,
            ses.launchConfig().blocksPerSm * dev->multiprocessors());
  MK_ASSERT_OK(ses.setContextLength(5));
  std::vector<uint16_t> in(size_t(s.cfg.hidden)), out(in.size(), 0);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = uint16_t(i * 3 + 1);
  MK_ASSERT_OK(ses.stepHost(in.data(), out.data()));
  EXPECT_EQ(in, out);
  EXPECT_EQ(ses.contextLength(), 6);
  std::vector<uint8_t> ckv = readBytes(ses, "state.3.c_kv");
  size_t row = size_t(s.cfg.kvLora) * 2;
  for (size_t i = 0; i < row; ++i)
    ASSERT_EQ(ckv[5 * row + i], 5) << i;
  for (size_t i = 0; i < 5 * row; ++i)
    ASSERT_EQ(ckv[i], 0) << i; // zeroed at allocation, untouched
}

TEST(SessionGpu, AdoptionCopiesTheForeignStateInTheSameLaunch) {
  MK_REQUIRE_GPU(dev);
  StubSession s;
  MK_ASSERT_OK(makeStub(dev, s, 4));
  Session &ses = *s.session;
  const int64_t ctx = 10; // larger than the capacity: adoption grows it
  std::vector<DeviceTensor> foreign;
  std::vector<DeviceBuffer> bufs;
  for (const TensorDesc &d : stateTensors(s.cfg, ctx)) {
    DeviceBuffer b;
    MK_ASSERT_OK(DeviceBuffer::allocate(dev, size_t(d.bytes()), b));
    MK_ASSERT_OK(cuCheck(dev->driver().cuMemsetD8(b.ptr(), 0x42, size_t(d.bytes())),
                         "fill"));
    foreign.push_back({d.name, b.ptr(), d.dtype, d.shape});
    bufs.push_back(std::move(b));
  }
  MK_ASSERT_OK(ses.adoptState(foreign, ctx));
  EXPECT_GE(ses.capacity(), ctx + 1);
  std::vector<uint16_t> in(size_t(s.cfg.hidden), 7), out(in.size());
  MK_ASSERT_OK(ses.stepHost(in.data(), out.data()));
  EXPECT_EQ(ses.contextLength(), ctx + 1);
  for (const TensorDesc &d : stateTensors(s.cfg, ctx + 1)) {
    std::vector<uint8_t> b = readBytes(ses, d.name);
    bool cache = d.name.find("c_kv") != std::string::npos ||
                 d.name.find("k_rope") != std::string::npos;
    size_t rowBytes = cache ? size_t(d.bytes() / (ctx + 1)) : b.size();
    size_t copied = cache ? size_t(ctx) * rowBytes : b.size();
    for (size_t i = 0; i < copied; ++i)
      ASSERT_EQ(b[i], 0x42) << d.name << " byte " << i;
    for (size_t i = copied; i < b.size(); ++i)
      ASSERT_EQ(b[i], uint8_t(ctx)) << d.name << " byte " << i;
  }
  // The next step is in place again.
  MK_ASSERT_OK(ses.stepHost(in.data(), out.data()));
  std::vector<uint8_t> ckv = readBytes(ses, "state.3.c_kv");
  EXPECT_EQ(ckv[size_t(ctx + 1) * size_t(s.cfg.kvLora) * 2], uint8_t(ctx + 1));
  EXPECT_EQ(ckv[0], 0x42);
}

TEST(SessionGpu, ReserveKeepsValidRows) {
  MK_REQUIRE_GPU(dev);
  StubSession s;
  MK_ASSERT_OK(makeStub(dev, s, 3));
  Session &ses = *s.session;
  std::vector<uint16_t> in(size_t(s.cfg.hidden), 1), out(in.size());
  for (int i = 0; i < 3; ++i)
    MK_ASSERT_OK(ses.stepHost(in.data(), out.data()));
  Status full = ses.stepHost(in.data(), out.data());
  EXPECT_EQ(full.code(), ErrorCode::CacheFull);
  EXPECT_EQ(full.message(), "cache full: ctx_len 3, capacity 3");
  MK_ASSERT_OK(ses.reserve(100));
  EXPECT_EQ(ses.capacity(), 100);
  MK_ASSERT_OK(ses.stepHost(in.data(), out.data()));
  std::vector<uint8_t> kr = readBytes(ses, "state.3.k_rope");
  size_t row = size_t(s.cfg.qkRope) * 2;
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(kr[size_t(r) * row], uint8_t(r)) << "row " << r;
}

TEST(SessionGpu, ErrorsComeBeforeTheLaunchAndLeaveStateUntouched) {
  MK_REQUIRE_GPU(dev);
  StubSession s;
  MK_ASSERT_OK(makeStub(dev, s, 8));
  Session &ses = *s.session;
  CUdeviceptr in = ses.stagingIn(), out = ses.stagingOut();

  // Binding errors name the tensor.
  HostTensor bad(TensorDesc{"blocks.0.attn_norm", DType::BF16, {s.cfg.hidden + 1}});
  Status st = ses.bindWeightHost(bad.desc.name, bad.data.data(), DType::BF16,
                                 bad.desc.shape);
  EXPECT_EQ(st.code(), ErrorCode::Binding);
  EXPECT_NE(st.message().find("blocks.0.attn_norm"), std::string::npos);
  st = ses.bindWeightDevice({"blocks.0.nope", in, DType::BF16, {1}});
  EXPECT_EQ(st.code(), ErrorCode::Binding);
  st = ses.bindWeightDevice({"blocks.0.attn_norm", 0, DType::BF16, {s.cfg.hidden}});
  EXPECT_EQ(st.code(), ErrorCode::InvalidArgument);

  // A missing weight names it; nothing launches, nothing changes.
  MK_ASSERT_OK(ses.setContextLength(7));
  std::vector<uint8_t> before = readBytes(ses, "state.3.c_kv");
  StubSession fresh;
  fresh.cfg = s.cfg;
  {
    KernelSource src;
    src.manifestText = makeManifest(fresh.cfg);
    src.source = makeStubKernelSource(fresh.cfg);
    KernelBuildOptions bo;
    bo.compile.arch = dev->arch();
    bo.useCache = false;
    MK_ASSERT_OK(Kernel::build(src, bo, fresh.kernel));
    MK_ASSERT_OK(Session::create(dev, fresh.kernel, {}, fresh.session));
  }
  st = fresh.session->step(fresh.session->stagingIn(), fresh.session->stagingOut());
  EXPECT_EQ(st.code(), ErrorCode::NotBound);
  EXPECT_NE(st.message().find("is not bound"), std::string::npos) << st.message();
  EXPECT_EQ(fresh.session->launchCount(), 0u);
  EXPECT_EQ(fresh.session->unboundWeights().size(),
            parameterTensors(fresh.cfg).size());

  // Capacity: ctx 7 of 8 runs once, then "cache full" with state untouched.
  MK_ASSERT_OK(ses.step(in, out));
  std::vector<uint8_t> after1 = readBytes(ses, "state.3.c_kv");
  st = ses.step(in, out);
  EXPECT_EQ(st.code(), ErrorCode::CacheFull);
  EXPECT_EQ(st.message(), "cache full: ctx_len 8, capacity 8");
  EXPECT_EQ(ses.contextLength(), 8);
  EXPECT_EQ(readBytes(ses, "state.3.c_kv"), after1);
  EXPECT_EQ(std::vector<uint8_t>(after1.begin(), after1.begin() + before.size()),
            before);

  // Null pointers, bad adoption.
  MK_ASSERT_OK(ses.setContextLength(2));
  EXPECT_EQ(ses.step(0, out).code(), ErrorCode::InvalidArgument);
  st = ses.adoptState({{"state.0.S", in, DType::F32, {2, 32, 32}}}, 2);
  EXPECT_EQ(st.code(), ErrorCode::NotBound);
  EXPECT_NE(st.message().find("is missing"), std::string::npos);
  st = ses.adoptState({{"state.0.S", in, DType::F32, {2, 32, 31}}}, 2);
  EXPECT_EQ(st.code(), ErrorCode::Binding);
  st = ses.writeStateHost("state.3.c_kv", before.data(), DType::BF16, {3, 128});
  EXPECT_EQ(st.code(), ErrorCode::Binding); // ctx is 2, not 3
}

TEST(SessionGpu, OneLaunchPerStepCountedByCupti) {
  MK_REQUIRE_GPU(dev);
  StubSession s;
  MK_ASSERT_OK(makeStub(dev, s, 64));
  Session &ses = *s.session;
  std::string why;
  if (!CuptiLaunchCounter::start(why))
    GTEST_SKIP() << "CUPTI unavailable: " << why;
  CUdeviceptr in = ses.stagingIn(), out = ses.stagingOut();
  MK_ASSERT_OK(ses.synchronize());
  CuptiLaunchCounter::reset();
  const int steps = 10;
  for (int i = 0; i < steps; ++i)
    MK_ASSERT_OK(ses.step(in, out));
  MK_ASSERT_OK(ses.synchronize());
  CuptiLaunchCounter::Counts c = CuptiLaunchCounter::read();
  EXPECT_EQ(c.kernels, steps);
  EXPECT_EQ(c.memcpys, 0);
  EXPECT_EQ(c.memsets, 0);

  // An adopting step is still one launch.
  std::vector<DeviceTensor> foreign;
  std::vector<DeviceBuffer> bufs;
  for (const TensorDesc &d : stateTensors(s.cfg, 3)) {
    DeviceBuffer b;
    MK_ASSERT_OK(DeviceBuffer::allocate(dev, size_t(d.bytes()), b));
    foreign.push_back({d.name, b.ptr(), d.dtype, d.shape});
    bufs.push_back(std::move(b));
  }
  MK_ASSERT_OK(ses.adoptState(foreign, 3));
  MK_ASSERT_OK(ses.synchronize());
  CuptiLaunchCounter::reset();
  MK_ASSERT_OK(ses.step(in, out));
  MK_ASSERT_OK(ses.synchronize());
  c = CuptiLaunchCounter::read();
  EXPECT_EQ(c.kernels, 1);
  EXPECT_EQ(c.memcpys + c.memsets, 0);
}

TEST(SessionGpu, LargeDynamicSharedMemoryAndMaxBlocks) {
  MK_REQUIRE_GPU(dev);
  if (dev->maxSharedPerBlockOptin() < 100 * 1024)
    GTEST_SKIP() << "device allows only " << dev->maxSharedPerBlockOptin();
  StubSession s;
  TestManifestOptions o;
  o.dynamicShared = 100 * 1024; // > 48 KB: needs cuFuncSetAttribute
  MK_ASSERT_OK(makeStub(dev, s, 8, o, /*maxBlocks=*/7));
  EXPECT_EQ(s.session->launchConfig().grid, 7);
  std::vector<uint16_t> in(size_t(s.cfg.hidden), 3), out(in.size());
  MK_ASSERT_OK(s.session->stepHost(in.data(), out.data()));
  EXPECT_EQ(in, out);
}

// A manifest asking for more shared memory per block than the device
// allows (dynamic + the kernel's static) is refused at load, naming both
// and the limit, instead of a failing driver call.
TEST(SessionGpu, TooMuchSharedMemoryIsRefusedByName) {
  MK_REQUIRE_GPU(dev);
  StubSession s;
  TestManifestOptions o;
  o.dynamicShared = dev->maxSharedPerBlockOptin() + 16;
  Status st = makeStub(dev, s, 8, o);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("bytes of dynamic and"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("allows " + std::to_string(dev->maxSharedPerBlockOptin())),
            std::string::npos)
      << st.message();
}

TEST(SessionGpu, TimingHelperKeepsTheContext) {
  MK_REQUIRE_GPU(dev);
  StubSession s;
  MK_ASSERT_OK(makeStub(dev, s, 8));
  MK_ASSERT_OK(s.session->setContextLength(4));
  std::vector<float> ms;
  MK_ASSERT_OK(s.session->timeSteps(s.session->stagingIn(),
                                    s.session->stagingOut(), 2, 5, ms));
  EXPECT_EQ(ms.size(), 5u);
  EXPECT_EQ(s.session->contextLength(), 4);
  for (float m : ms)
    EXPECT_GT(m, 0.f);
}

TEST(SessionGpu, ExternalStateStorage) {
  MK_REQUIRE_GPU(dev);
  StubSession s;
  MK_ASSERT_OK(makeStub(dev, s, 8));
  Session &ses = *s.session;
  const int64_t cap = 6;
  std::vector<DeviceTensor> storage;
  std::vector<DeviceBuffer> bufs;
  for (const TensorDesc &d : stateTensors(s.cfg, cap)) {
    DeviceBuffer b;
    MK_ASSERT_OK(DeviceBuffer::allocate(dev, size_t(d.bytes()), b));
    MK_ASSERT_OK(cuCheck(dev->driver().cuMemsetD8(b.ptr(), 0, size_t(d.bytes())), "z"));
    storage.push_back({d.name, b.ptr(), d.dtype, d.shape});
    bufs.push_back(std::move(b));
  }
  MK_ASSERT_OK(ses.setStateStorage(storage, cap));
  MK_ASSERT_OK(ses.setContextLength(2));
  MK_ASSERT_OK(ses.step(ses.stagingIn(), ses.stagingOut()));
  MK_ASSERT_OK(ses.synchronize());
  // Row 2 of the caller's c_kv buffer holds the new row.
  size_t row = size_t(s.cfg.kvLora) * 2;
  size_t ckvIndex = 0;
  for (size_t i = 0; i < storage.size(); ++i)
    if (storage[i].name == "state.3.c_kv")
      ckvIndex = i;
  std::vector<uint8_t> host(size_t(cap) * row);
  MK_ASSERT_OK(cuCheck(dev->driver().cuMemcpyDtoH(host.data(), storage[ckvIndex].ptr,
                                                  host.size()),
                       "read"));
  EXPECT_EQ(host[2 * row], 2);
  EXPECT_EQ(host[3 * row], 0);
  EXPECT_EQ(ses.reserve(100).code(), ErrorCode::InvalidArgument);
}
