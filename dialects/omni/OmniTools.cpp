//===- OmniTools.cpp - What omnic, omni-opt and omni-eval share -----------===//

#include "dialects/omni/OmniTools.h"

#include "llvm/Support/CommandLine.h"

#include <pthread.h>

using namespace mlir;

void omni::setOmniVersionPrinter(llvm::StringRef tool) {
  static std::string name;
  name = tool.str();
  llvm::cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << name << " (omni " << kOmniVersion << ")\n";
  });
}

void omni::hideLlvmOptions(const llvm::cl::OptionCategory *keep) {
  for (auto &entry : llvm::cl::getRegisteredOptions()) {
    llvm::cl::Option *option = entry.second;
    bool shown = llvm::any_of(
        option->Categories, [&](const llvm::cl::OptionCategory *c) {
          return c == keep || c->getName() == "Generic Options";
        });
    if (!shown && option->getOptionHiddenFlag() == llvm::cl::NotHidden)
      option->setHiddenFlag(llvm::cl::Hidden);
  }
}

LogicalResult omni::checkSourceNesting(llvm::MemoryBufferRef source,
                                       llvm::raw_ostream &errs,
                                       unsigned maxDepth) {
  llvm::StringRef text = source.getBuffer();
  unsigned depth = 0, line = 1;
  size_t lineStart = 0;
  for (size_t i = 0, n = text.size(); i < n; ++i) {
    char c = text[i];
    char next = i + 1 < n ? text[i + 1] : '\0';
    switch (c) {
    case '\n':
      ++line;
      lineStart = i + 1;
      break;
    case '/': // a comment runs to the end of the line
      if (next == '/')
        while (i + 1 < n && text[i + 1] != '\n')
          ++i;
      break;
    case '"': // a string literal: brackets inside are text
      for (++i; i < n && text[i] != '"' && text[i] != '\n'; ++i)
        if (text[i] == '\\')
          ++i;
      if (i < n && text[i] == '\n')
        --i; // let the newline count its line
      break;
    case '<':
      if (next == '=')
        break;
      [[fallthrough]];
    case '(':
    case '[':
    case '{':
      if (++depth > maxDepth) {
        errs << source.getBufferIdentifier() << ":" << line << ":"
             << (i - lineStart + 1) << ": error: brackets nest deeper than "
             << maxDepth
             << " levels here; omni programs may nest at most that deep\n";
        return failure();
      }
      break;
    case '>':
      if (next == '=' || (i > 0 && text[i - 1] == '-'))
        break;
      [[fallthrough]];
    case ')':
    case ']':
    case '}':
      if (depth > 0)
        --depth;
      break;
    default:
      break;
    }
  }
  return success();
}

namespace {
struct StackJob {
  llvm::function_ref<int()> body;
  int result = 1;
};
} // namespace

static void *runStackJob(void *arg) {
  auto *job = static_cast<StackJob *>(arg);
  job->result = job->body();
  return nullptr;
}

int omni::runOnLargeStack(llvm::function_ref<int()> body) {
  StackJob job{body};
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0)
    return body();
  pthread_t thread;
  bool started = pthread_attr_setstacksize(&attr, kToolStackBytes) == 0 &&
                 pthread_create(&thread, &attr, runStackJob, &job) == 0;
  pthread_attr_destroy(&attr);
  if (!started)
    return body();
  pthread_join(thread, nullptr);
  return job.result;
}
