//===- SchedulePrintSummary.cpp - Human-readable schedule summary ---------===//

#include "Transforms/Passes.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"

namespace mk::schedule {
#define GEN_PASS_DEF_SCHEDULEPRINTSUMMARY
#include "Transforms/Passes.h.inc"
} // namespace mk::schedule

using namespace mlir;
using namespace mk;
using namespace mk::schedule;

void mk::schedule::printScheduleSummary(ModuleOp module, raw_ostream &os) {
  for (KernelOp k : module.getOps<KernelOp>()) {
    int64_t counters = 0, waits = 0, tasks = 0, total = 0;
    for (CounterOp c : k.getBodyBlock().getOps<CounterOp>())
      counters += c.getSize();
    os << "schedule @" << k.getSymName() << ": " << k.getNumPhases()
       << " phases, " << k.getNumBarriers() << " grid barriers, " << counters
       << " counters ("
       << llvm::range_size(k.getBodyBlock().getOps<CounterOp>())
       << " arrays), threads " << k.getThreads() << ", target "
       << k.getTargetSms() << " SMs, workspace " << (int64_t)k.getWorkspaceBytes()
       << " B\n";
    int idx = 0;
    for (Operation &op : k.getBodyBlock()) {
      if (isa<BarrierOp>(op)) {
        os << "  ---- grid barrier ----\n";
        continue;
      }
      auto p = dyn_cast<PhaseOp>(op);
      if (!p)
        continue;
      const int64_t bytes = p.getTaskBytes();
      int64_t n = 0;
      for (TaskOpInterface t : p.getBodyBlock().getOps<TaskOpInterface>())
        n += t.getCount();
      total += bytes;
      os << llvm::format("  phase %2d  %6lld tasks  %10.3f MB  ", idx++,
                         (long long)n, bytes / 1e6)
         << p.getName() << "\n";
      for (TaskOpInterface t : p.getBodyBlock().getOps<TaskOpInterface>()) {
        ++tasks;
        // Counts are at most 2^20 (the task verifier): 7 digits.
        os << llvm::format("      %-22s x%-7lld %9.3f MB  ",
                           taskKindName(t.getKind()).str().c_str(), (long long)t.getCount(),
                           t.getBytes() / 1e6)
           << t.getName();
        if (std::optional<schedule::Partition> p = t.getPartition())
          os << " [" << schedule::stringifyPartition(*p) << "]";
        os << "\n";
      }
      for (WaitOp w : p.getBodyBlock().getOps<WaitOp>()) {
        ++waits;
        os << "      wait   @" << w.getCounter() << " >= " << w.getTarget()
           << " by " << w.getTask() << "\n";
      }
      for (SignalOp s : p.getBodyBlock().getOps<SignalOp>())
        os << "      signal @" << s.getCounter() << " by " << s.getTask()
           << "\n";
    }
    os << "  total: " << tasks << " tasks, " << waits << " waits, "
       << llvm::format("%.3f", total / 1e6) << " MB streamed\n";
  }
}

namespace {
struct SchedulePrintSummaryPass
    : schedule::impl::SchedulePrintSummaryBase<SchedulePrintSummaryPass> {
  using Base::Base;
  void runOnOperation() override {
    if (output.empty()) {
      mlir::emitError(getOperation().getLoc(), "schedule-print-summary: o "
                                               "must be a file or '-', got ''");
      return signalPassFailure();
    }
    if (output == "-") {
      printScheduleSummary(getOperation(), llvm::errs());
      return;
    }
    std::error_code ec;
    llvm::raw_fd_ostream os(output, ec, llvm::sys::fs::OF_Text);
    if (ec) {
      getOperation().emitError("cannot write ") << output << ": "
                                                << ec.message();
      return signalPassFailure();
    }
    printScheduleSummary(getOperation(), os);
  }
};
} // namespace

std::string mk::schedule::scheduleSummary(mlir::ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  printScheduleSummary(module, os);
  return text;
}
