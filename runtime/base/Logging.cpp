//===- Logging.cpp - Leveled logging and tracing hooks ----------*- C++ -*-===//

#include "runtime/base/Logging.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace omni {
namespace {

int levelFromEnvironment() {
  const char *env = std::getenv("OMNI_LOG");
  if (!env)
    return static_cast<int>(LogLevel::Warning);
  if (!std::strcmp(env, "error"))
    return static_cast<int>(LogLevel::Error);
  if (!std::strcmp(env, "info"))
    return static_cast<int>(LogLevel::Info);
  if (!std::strcmp(env, "debug"))
    return static_cast<int>(LogLevel::Debug);
  return static_cast<int>(LogLevel::Warning);
}

std::atomic<int> &levelStorage() {
  static std::atomic<int> level(levelFromEnvironment());
  return level;
}

std::atomic<TraceSink> &sinkStorage() {
  static std::atomic<TraceSink> sink(nullptr);
  return sink;
}

const char *levelName(LogLevel level) {
  switch (level) {
  case LogLevel::Error:
    return "error";
  case LogLevel::Warning:
    return "warning";
  case LogLevel::Info:
    return "info";
  case LogLevel::Debug:
    return "debug";
  }
  return "?";
}

} // namespace

LogLevel logLevel() {
  return static_cast<LogLevel>(levelStorage().load(std::memory_order_relaxed));
}

void setLogLevel(LogLevel level) {
  levelStorage().store(static_cast<int>(level), std::memory_order_relaxed);
}

void logMessage(LogLevel level, absl::string_view message) {
  if (!logEnabled(level))
    return;
  // One fprintf per line keeps concurrent messages from interleaving.
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  std::fprintf(stderr, "omni: %s: %.*s\n", levelName(level),
               static_cast<int>(message.size()), message.data());
}

void setTraceSink(TraceSink sink) {
  sinkStorage().store(sink, std::memory_order_release);
}

TraceSink traceSink() { return sinkStorage().load(std::memory_order_relaxed); }

} // namespace omni
