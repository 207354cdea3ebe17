//===- OmniRun.h - The omnirun tool as a library ----------------*- C++ -*-===//
//
// omnirun runs compiled step.bin programs (like iree-run-module): `--list`
// prints every function with its input and output types and the state
// slots; `--function f --input=... --output=...` runs one function on
// inputs given exactly as omni-eval takes them (`@a.npy` or
// `2x3xf32=1,2,...`), writing results to .npy files or printing them with 9
// (f32) or 17 (f64) significant digits. `--steps N` (or any training
// option, or `--train`) trains a program that follows the convention of
// runtime/train/driver/Trainer.h instead: `--out DIR` for checkpoints,
// metrics.jsonl and sample grids, `--resume [DIR]`, `--prompts`, `--init`,
// `--reward`, ... (see --help); `--ranks N` trains a program with a mesh
// on N in-process ranks (runtime/train/driver/Ranks.h). The main in
// omnirun.cpp only forwards argv
// here, so tests run the tool in-process.
//
// Every user-facing error (bad arguments, a bad step.bin, inputs of the
// wrong count or type, a failing run) is one line "omnirun: ..." on `err`
// and exit code 1. Training handles SIGINT and SIGTERM while it runs
// (runtime/train/driver/Interrupt.h): the current iteration finishes, a
// checkpoint is saved, the line says where, and the exit code is 130 or
// 143. MLIR- and LLVM-free.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_OMNIRUN_OMNIRUN_H
#define OMNI_RUNTIME_OMNIRUN_OMNIRUN_H

#include <ostream>
#include <string>
#include <vector>

namespace omni::omnirun {

/// Runs omnirun with `args` (argv without the program name). Returns the
/// exit code: 0 on success, 1 on any error, 128 + the signal when training
/// was interrupted.
int run(const std::vector<std::string> &args, std::ostream &out,
        std::ostream &err);

} // namespace omni::omnirun

#endif // OMNI_RUNTIME_OMNIRUN_OMNIRUN_H
