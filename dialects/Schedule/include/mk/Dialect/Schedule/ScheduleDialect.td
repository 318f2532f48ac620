//===- ScheduleDialect.td - The schedule dialect -----------*- tablegen -*-===//
//
// One decode step as the megakernel will run it: an ordered list of phases
// whose tasks are spread over the thread blocks of one cooperative launch,
// grid barriers between phases, dependency counters inside and across them,
// and the workspace buffers the tasks exchange data through.
//
//===----------------------------------------------------------------------===//

#ifndef MK_SCHEDULE_DIALECT_TD
#define MK_SCHEDULE_DIALECT_TD

include "mlir/IR/OpBase.td"

def Schedule_Dialect : Dialect {
  let name = "schedule";
  let cppNamespace = "::mk::schedule";
  let useDefaultAttributePrinterParser = 1;
  let summary = "Phases, tasks, barriers and counters of a cooperative megakernel";
  let extraClassDeclaration = [{
    /// Adds the dialect's attributes (ScheduleAttrs.cpp).
    void registerAttributes();
    /// An op name the dialect does not know is refused naming the task
    /// kinds there are (most such names are a mistyped task kind).
    std::optional<ParseOpHook> getParseOperationHook(::llvm::StringRef opName) const override;
  }];
  let description = [{
    A `schedule.kernel` is the whole step. Its body lists, in this order of
    meaning (not of position):

    * `schedule.buffer`: a workspace tensor (or a decode-state tensor, space
      `"state"`, declared so that hazards on it are checked), with its offset
      into the one workspace arena once planned;
    * `schedule.counter`: an array of dependency counters;
    * `schedule.phase` ops, executed in order by every block; each holds
      task ops, one op per task kind (`schedule.w4a16_gemv`, ...; the
      instances of all tasks of a phase are dealt to
      the blocks round-robin, in task order) and the `schedule.signal` /
      `schedule.wait` ops that tie task instances to counters;
    * `schedule.barrier` ops between phases: every block waits for all others.

    The kernel verifier checks that every read of a buffer is ordered after
    every earlier write of it, and every write after every earlier read, by a
    barrier or by a counter whose producer task comes first.
  }];
}

class Schedule_Op<string mnemonic, list<Trait> traits = []>
    : Op<Schedule_Dialect, mnemonic, traits>;

#endif // MK_SCHEDULE_DIALECT_TD
