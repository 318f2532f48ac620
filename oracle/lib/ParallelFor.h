//===- ParallelFor.h - Static work splitting over std::thread ----*- C++ -*-===//
//
// Internal to the oracle. Splits [0, n) into contiguous chunks run on up to
// oracleThreads() threads (parallelFor), or hands its indices out one at a
// time (parallelForEach). Callers only ever split independent outputs, so
// results never depend on the thread count.
//
//===----------------------------------------------------------------------===//

#ifndef MK_ORACLE_PARALLELFOR_H
#define MK_ORACLE_PARALLELFOR_H

#include "mk/Oracle.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace mk {
namespace detail {

/// Runs fn(begin, end) over chunks of [0, n), each at least `grain` long
/// (except possibly the last), on the calling thread plus helpers.
template <typename Fn>
void parallelFor(int64_t n, int64_t grain, const Fn &fn) {
  if (n <= 0)
    return;
  grain = std::max<int64_t>(grain, 1);
  int64_t maxChunks = (n + grain - 1) / grain;
  int64_t workers = std::min<int64_t>(oracleThreads(), maxChunks);
  if (workers <= 1) {
    fn(int64_t(0), n);
    return;
  }
  int64_t per = (n + workers - 1) / workers;
  std::vector<std::thread> threads;
  for (int64_t w = 1; w < workers; ++w) {
    int64_t b = w * per, e = std::min(n, b + per);
    if (b < e)
      threads.emplace_back([&fn, b, e] { fn(b, e); });
  }
  fn(int64_t(0), std::min(n, per));
  for (std::thread &t : threads)
    t.join();
}

/// Runs fn(i) for every i in [0, n), each index taken by the next free
/// thread (up to oracleThreads(), the calling one among them): for items of
/// very different sizes, where parallelFor's equal chunks would leave
/// threads idle behind the largest. An exception from fn stops the handing
/// out; the first one is rethrown after every thread has joined.
template <typename Fn> void parallelForEach(int64_t n, const Fn &fn) {
  if (n <= 0)
    return;
  const int64_t workers = std::min<int64_t>(oracleThreads(), n);
  std::atomic<int64_t> next{0};
  std::exception_ptr error;
  std::mutex errorLock;
  auto work = [&] {
    for (int64_t i; (i = next.fetch_add(1)) < n;) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> hold(errorLock);
        if (!error)
          error = std::current_exception();
        next.store(n);
      }
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(size_t(workers)); // before any thread starts
  for (int64_t w = 1; w < workers; ++w) {
    try {
      threads.emplace_back(work);
    } catch (const std::system_error &) {
      break; // no more threads to be had: the ones started and this one do it
    }
  }
  work();
  for (std::thread &t : threads)
    t.join();
  if (error)
    std::rethrow_exception(error);
}

} // namespace detail
} // namespace mk

#endif // MK_ORACLE_PARALLELFOR_H
