//===- Trace.cpp - Phase stamps as a Chrome/Perfetto trace ----------------===//

#include "mk/runtime/Trace.h"

#include "mk/Json.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace mk::rt {

namespace {

using json::Value;

constexpr int64_t kPid = 1;

/// ns -> us. Differences of stamps only: the raw global timer (~1e18 ns)
/// does not fit a double's 53 bits exactly.
Value micros(uint64_t ns) { return Value::fromNumber(double(ns) / 1000.0); }

Value metadata(const char *what, int64_t tid, const char *key, Value v) {
  Value e = Value::makeObject();
  e.set("ph", Value::fromString("M"));
  e.set("pid", Value::fromInt(kPid));
  if (tid >= 0)
    e.set("tid", Value::fromInt(tid));
  e.set("name", Value::fromString(what));
  Value args = Value::makeObject();
  args.set(key, std::move(v));
  e.set("args", std::move(args));
  return e;
}

Value slice(const char *cat, const std::string &name, int64_t tid, uint64_t ts,
            uint64_t dur, Value args) {
  Value e = Value::makeObject();
  e.set("ph", Value::fromString("X"));
  e.set("cat", Value::fromString(cat));
  e.set("name", Value::fromString(name));
  e.set("pid", Value::fromInt(kPid));
  e.set("tid", Value::fromInt(tid));
  e.set("ts", micros(ts));
  e.set("dur", micros(dur));
  e.set("args", std::move(args));
  return e;
}

} // namespace

Status phaseTraceJson(const PhaseTrace &t, std::string &out) {
  const size_t P = t.phaseNames.size();
  if (t.grid <= 0)
    return makeError(ErrorCode::InvalidArgument,
                     "trace: grid of " + std::to_string(t.grid) + " blocks");
  const size_t G = size_t(t.grid), need = P * G;
  if (t.entryNs.size() < need || t.waitNs.size() < need || t.doneNs.size() < need)
    return makeError(ErrorCode::InvalidArgument,
                     "trace: stamp tables smaller than " + std::to_string(P) +
                         " phases x " + std::to_string(G) + " blocks");
  if (!t.phaseBytes.empty() && t.phaseBytes.size() != P)
    return makeError(ErrorCode::InvalidArgument,
                     "trace: " + std::to_string(t.phaseBytes.size()) +
                         " phase byte counts for " + std::to_string(P) + " phases");
  auto at = [&](const std::vector<uint64_t> &v, size_t p, size_t b) {
    return v[p * G + b];
  };

  // The origin: the earliest phase-0 entry; without one, the earliest entry.
  uint64_t t0 = 0;
  for (size_t p = 0; p < P && t0 == 0; ++p)
    for (size_t b = 0; b < G; ++b) {
      uint64_t e = at(t.entryNs, p, b);
      if (e != 0 && (t0 == 0 || e < t0))
        t0 = e;
    }

  std::vector<Value> events;
  events.push_back(metadata("process_name", -1, "name",
                            Value::fromString(t.processName)));
  for (size_t b = 0; b < G; ++b) {
    events.push_back(metadata("thread_name", int64_t(b), "name",
                              Value::fromString("block " + std::to_string(b))));
    events.push_back(metadata("thread_sort_index", int64_t(b), "sort_index",
                              Value::fromInt(int64_t(b))));
  }
  for (size_t b = 0; b < G; ++b)
    for (size_t p = 0; p < P; ++p) {
      const uint64_t entry = at(t.entryNs, p, b), done = at(t.doneNs, p, b);
      if (entry == 0 || done == 0 || entry < t0 || done < entry)
        continue;
      const uint64_t dur = done - entry, wait = at(t.waitNs, p, b);
      const std::string &name = t.phaseNames[p];
      Value args = Value::makeObject();
      args.set("phase", Value::fromString(name));
      args.set("phase_index", Value::fromInt(int64_t(p)));
      args.set("block", Value::fromInt(int64_t(b)));
      args.set("wait_us", micros(wait));
      args.set("work_us", micros(dur - std::min(wait, dur)));
      if (!t.phaseBytes.empty())
        args.set("phase_bytes", Value::fromNumber(t.phaseBytes[p]));
      // Parent before child: viewers nest equal-ts slices in file order.
      events.push_back(slice("phase", name, int64_t(b), entry - t0, dur,
                             std::move(args)));
      if (wait != 0) {
        Value wargs = Value::makeObject();
        wargs.set("phase", Value::fromString(name));
        wargs.set("wait_us", micros(wait));
        events.push_back(slice("wait", "counter wait", int64_t(b), entry - t0,
                               std::min(wait, dur), std::move(wargs)));
      }
    }

  // One event per line: readable, and diffable, at 10^4-10^5 events.
  out = "{\"traceEvents\": [\n";
  for (size_t i = 0; i < events.size(); ++i) {
    out += json::write(events[i], -1);
    out += i + 1 < events.size() ? ",\n" : "\n";
  }
  out += "],\n\"displayTimeUnit\": \"ns\"";
  if (!t.otherData.empty()) {
    Value other = Value::makeObject();
    for (const auto &kv : t.otherData) {
      // A repeated key replaces the earlier value: JSON keys are unique.
      auto same = [&](const auto &m) { return m.first == kv.first; };
      auto it = std::find_if(other.object.begin(), other.object.end(), same);
      if (it != other.object.end())
        it->second = Value::fromString(kv.second);
      else
        other.set(kv.first, Value::fromString(kv.second));
    }
    out += ",\n\"otherData\": " + json::write(other, -1);
  }
  out += "}\n";
  return Status::ok();
}

Status writePhaseTrace(const PhaseTrace &t, const std::string &path) {
  std::string text;
  MK_RETURN_IF_ERROR(phaseTraceJson(t, text));
  return writeTextFile(path, text);
}

Status writeTextFile(const std::string &path, const std::string &text) {
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    return makeError(ErrorCode::Io, "cannot write " + path + ": " + std::strerror(errno));
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size() &&
            std::fflush(f) == 0;
  int e = errno;
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    e = errno;
  }
  if (!ok)
    return makeError(ErrorCode::Io, "cannot write " + path + ": " +
                                        (e ? std::strerror(e) : "write failed"));
  return Status::ok();
}

} // namespace mk::rt
