//===- OmniRunTest.cpp - omnirun, run in-process ----------------*- C++ -*-===//

#include "runtime/omnirun/OmniRun.h"

#include "runtime/base/ConfigFile.h"
#include "runtime/io/Npy.h"
#include "runtime/omnirun/testing/SamplePrograms.h"
#include "runtime/train/driver/Interrupt.h"
#include "runtime/train/driver/testing/RankPrograms.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace omni::omnirun {
namespace {

struct Result {
  int code;
  std::string out, err;
};

Result omnirun(std::vector<std::string> args) {
  std::ostringstream out, err;
  int code = run(args, out, err);
  return {code, out.str(), err.str()};
}

std::string writeTemp(const std::string &name, const std::string &bytes) {
  std::string path =
      ::testing::TempDir() + "/" + std::to_string(::getpid()) + "." + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

class OmniRunTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    addBin = new std::string(
        writeTemp("omnirun_add.bin", samples::add(OMNI_TEST_KERNELS_SO)));
    matmulBin = new std::string(writeTemp("omnirun_mm.bin", samples::matmul()));
    badBin =
        new std::string(writeTemp("omnirun_bad.bin", samples::badOperand()));
  }
  static std::string *addBin, *matmulBin, *badBin;
};
std::string *OmniRunTest::addBin, *OmniRunTest::matmulBin, *OmniRunTest::badBin;

TEST_F(OmniRunTest, Lists) {
  Result r = omnirun({*matmulBin, "--list"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "@matmul(tensor<2x3xf32>, tensor<3x2xf32>) -> "
                   "(tensor<2x2xf32>)\n"
                   "@both(tensor<2x3xf64>) -> (tensor<2x3xf64>, tensor<i64>)\n"
                   "state 'w': tensor<2xf32> (Parameter)\n");
}

TEST_F(OmniRunTest, RunsAndPrints) {
  Result r = omnirun({*addBin, "--function=add", "--input=4xf32=1,2,3,4",
                      "--input", "4xf32=10,20,30,40.5", "--threads=2"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "result[0]: tensor<4xf32>=[11 22 33 44.5]\n");
  r = omnirun(
      {*matmulBin, "--function", "both", "--input=2x3xf64=0.1,2,3,4,5,6"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "result[0]: tensor<2x3xf64>=[[0.10000000000000001 2 3][4 5 "
                   "6]]\nresult[1]: tensor<i64>=7\n");
}

TEST_F(OmniRunTest, ReadsAndWritesNpy) {
  std::string a = ::testing::TempDir() + "/" + std::to_string(::getpid()) +
                  ".omnirun_a.npy";
  ASSERT_TRUE(writeNpyFile(a, HostTensor::fromDoubles(DType::F32, {2, 3},
                                                      {1, 2, 3, 4, 5, 6}))
                  .ok());
  std::string c = ::testing::TempDir() + "/" + std::to_string(::getpid()) +
                  ".omnirun_c.npy";
  Result r = omnirun({*matmulBin, "--function=matmul", "--input=@" + a,
                      "--input=3x2xf32=1,0,0,1,1,1", "--output=@" + c});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  auto result = readNpyFile(c);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(*result,
            HostTensor::fromDoubles(DType::F32, {2, 2}, {4, 5, 10, 11}));
  // "-" prints that result.
  r = omnirun({*matmulBin, "--function=both", "--input=@" + a});
  EXPECT_EQ(r.code, 1);
  r = omnirun({*matmulBin, "--function=both", "--input=2x3xf64=1,2,3,4,5,6",
               "--output=-", "--output=@" + c});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "result[0]: tensor<2x3xf64>=[[1 2 3][4 5 6]]\n");
}

TEST_F(OmniRunTest, OneLineErrors) {
  struct Case {
    std::vector<std::string> args;
    std::string err;
  };
  const std::string add = *addBin, mm = *matmulBin;
  const Case cases[] = {
      {{add, "--function=add", "--input=4xf32=1,2,3,4"},
       "omnirun: @add takes 2 inputs but 1 were given\n"},
      {{add, "--function=add", "--input=4xf32=1,2,3,4",
        "--input=2x2xf32=1,2,3,4"},
       "omnirun: input 1 of @add is tensor<4xf32> but the argument is "
       "tensor<2x2xf32>\n"},
      {{add, "--function=add", "--input=4xf32=1,2,3,4",
        "--input=4xi32=1,2,3,4"},
       "omnirun: input 1 of @add is tensor<4xf32> but the argument is "
       "tensor<4xi32>\n"},
      {{add, "--function=add", "--input=4xf32=1,2,3"}, "omnirun: --input #0: "},
      {{add, "--function=add", "--input=@/nonexistent.npy"},
       "omnirun: --input #0: "},
      {{add, "--function=sub"},
       "omnirun: " + add + " has no function 'sub' (functions: add)\n"},
      {{add},
       "omnirun: give --function=<name> to run a function, --steps=<n> to "
       "train, --export=<dir> to export a checkpoint, or --list to list "
       "them\n"},
      // --export (docs/export.md; test/train/export.test has the rest).
      {{add, "--merge-lora"},
       "omnirun: --merge-lora goes with --export DIR (write a checkpoint as "
       "a diffusers folder)\n"},
      {{add, "--export=/nonexistent/out", "--list"},
       "omnirun: --export writes a checkpoint as a diffusers folder and "
       "cannot be combined with --list\n"},
      {{add, "--export=/nonexistent/out", "--checkpoint=/nonexistent/c"},
       "omnirun: " + add +
           " has no metadata (it was compiled by an omnic before the "
           "metadata table, or not from omnigen's recipe): regenerate it "
           "with omnigen and omnic to export\n"},
      // Training options (the programs here have no @train_step).
      {{add, "--steps=2"},
       "omnirun: " + add +
           ": no function @train_step (the training step; "
           "see omnirun --list)\n"},
      {{add, "--train"},
       "omnirun: " + add +
           ": no function @train_step (the training step; "
           "see omnirun --list)\n"},
      {{add, "--function=add", "--seed=3"},
       "omnirun: --seed is a training option and cannot be combined with "
       "--function\n"},
      {{add, "--resume"},
       "omnirun: --resume needs a folder: --resume DIR, --out DIR or "
       "--checkpoint-dir DIR\n"},
      {{add, "--resume="}, "omnirun: --resume= needs a folder\n"},
      {{add, "--save-every=x"},
       "omnirun: --save-every expects a non-negative integer, found 'x'\n"},
      {{add, "--sample-every", "-1"},
       "omnirun: --sample-every expects a non-negative integer, found '-1'\n"},
      {{add, "--init=transformer="},
       "omnirun: --init expects <file> or <prefix>=<file>, found "
       "'transformer='\n"},
      {{add, "--init", "=w.safetensors"},
       "omnirun: --init expects <file> or <prefix>=<file>, found "
       "'=w.safetensors'\n"},
      {{add, "--reward"}, "omnirun: --reward needs a value\n"},
      {{"--list"}, "omnirun: no step.bin given (see --help)\n"},
      {{add, "--bogus"}, "omnirun: unknown option '--bogus' (see --help)\n"},
      {{add, "--function"}, "omnirun: --function needs a value\n"},
      {{add, "--function=add", "--input"}, "omnirun: --input needs a value\n"},
      // A flag without a value takes no `=value`; a prefix is no flag.
      {{add, "--list=yes"},
       "omnirun: unknown option '--list=yes' (see --help)\n"},
      {{add, "--train=1"},
       "omnirun: unknown option '--train=1' (see --help)\n"},
      {{add, "--resumes"},
       "omnirun: unknown option '--resumes' (see --help)\n"},
      {{add, "--init-skipx=a"},
       "omnirun: unknown option '--init-skipx=a' (see --help)\n"},
      // The exclusion is found before the missing folder.
      {{add, "--resume", "--resume-if-present="},
       "omnirun: --resume and --resume-if-present exclude each other, "
       "expected one of them\n"},
      {{add, "--checkpoint-every=-2"},
       "omnirun: --checkpoint-every expects a non-negative integer, found "
       "'-2'\n"},
      {{add, "--function=add", "--checkpoint-dir", "d"},
       "omnirun: --checkpoint-dir is a training option and cannot be "
       "combined with --function\n"},
      {{add, "--list", "--threads=x"},
       "omnirun: --threads expects an integer from 0 to 1024, found 'x'\n"},
      // Beyond the bound the workers' stacks alone need gigabytes.
      {{add, "--function=add", "--threads=4096"},
       "omnirun: --threads expects an integer from 0 to 1024, found "
       "'4096'\n"},
      {{add, "--resume-if-present="},
       "omnirun: --resume-if-present= needs a folder\n"},
      {{add, "--resume", "--resume-if-present"},
       "omnirun: --resume and --resume-if-present exclude each other, "
       "expected one of them\n"},
      {{add, "--keep-last=x"},
       "omnirun: --keep-last expects a non-negative integer, found 'x'\n"},
      {{add, "--function=add", "--allow-program-change"},
       "omnirun: --allow-program-change is a training option and cannot be "
       "combined with --function\n"},
      {{add, mm, "--list"},
       "omnirun: expected one step.bin but found '" + add + "' and '" + mm +
           "'\n"},
      {{add, "--list", "--device=tpu"}, ""},
      {{add, "--function=add", "--input=4xf32=1,2,3,4", "--input=4xf32=1,2,3,4",
        "--device=tpu"},
       "omnirun: no driver named 'tpu' (available: cpu, cuda)\n"},
      {{mm, "--function=both", "--input=2x3xf64=1,2,3,4,5,6", "--output=x.npy",
        "--output=-"},
       "omnirun: --output #0 must be @file.npy or -, found 'x.npy'\n"},
      {{mm, "--function=both", "--input=2x3xf64=1,2,3,4,5,6", "--output=-"},
       "omnirun: @both returns 2 results but 1 --output were given\n"},
      {{"/nonexistent/x.bin", "--list"},
       "omnirun: /nonexistent/x.bin: cannot open: No such file or directory\n"},
      {{*badBin, "--list"},
       "omnirun: " + *badBin +
           ": functions[0].commands[0] (Copy): dest = 57 "
           "but there are 1 tensors\n"},
  };
  for (const Case &c : cases) {
    Result r = omnirun(c.args);
    std::string joined;
    for (const std::string &a : c.args)
      joined += a + " ";
    if (c.err.empty()) {
      EXPECT_EQ(r.code, 0) << joined << r.err;
      continue;
    }
    EXPECT_EQ(r.code, 1) << joined;
    // One line, starting as expected (whole when the case gives a newline).
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    if (c.err.back() == '\n')
      EXPECT_EQ(r.err, c.err) << joined;
    else
      EXPECT_EQ(r.err.substr(0, c.err.size()), c.err) << joined;
  }
}

/// omnirun --ranks on the programs of train/driver/testing/RankPrograms.h:
/// the one-line errors of the flags and of a world that is not the mesh,
/// then a failing and a hanging rank 1 (OMNI_TEST_FAULT): one line naming
/// rank 1 and exit code 1. The hang ends by the 5 s collective timeout.
class OmniRunRanksTest : public ::testing::Test {
protected:
  void SetUp() override {
    meshBin =
        writeTemp("omnirun_mesh2.bin",
                  train::testing::rankProgramBytes(OMNI_TEST_KERNELS_SO, 2));
    plainBin =
        writeTemp("omnirun_mesh0.bin",
                  train::testing::rankProgramBytes(OMNI_TEST_KERNELS_SO, 0));
    out = ::testing::TempDir() + "/" + std::to_string(::getpid()) + ".ranks-" +
          ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  void TearDown() override { ::unsetenv("OMNI_TEST_FAULT"); }
  std::string meshBin, plainBin, out;
};

TEST_F(OmniRunRanksTest, OneLineErrors) {
  struct Case {
    std::vector<std::string> args;
    std::string err;
  } cases[] = {
      {{meshBin, "--ranks", "3", "--steps", "1"},
       "omnirun: " + meshBin +
           "'s mesh 'mesh' (fsdp=2) has 2 ranks but omnirun runs 3 "
           "(--ranks 3)\n"},
      {{meshBin, "--steps", "1"},
       "omnirun: " + meshBin +
           "'s mesh 'mesh' (fsdp=2) has 2 ranks but omnirun runs 1 "
           "(--ranks 1)\n"},
      {{plainBin, "--ranks=2"},
       "omnirun: " + plainBin +
           " has no mesh, so it runs on 1 rank, but omnirun runs 2 (--ranks "
           "2)\n"},
      {{meshBin, "--ranks", "0"},
       "omnirun: --ranks expects an integer from 1 to 1024, found '0'\n"},
      {{meshBin, "--ranks=2", "--collective-timeout=-1"},
       "omnirun: --collective-timeout expects seconds from 0 to 1000000, "
       "found '-1'\n"},
      {{meshBin, "--function=train_step", "--ranks=2"},
       "omnirun: --ranks is a training option and cannot be combined with "
       "--function\n"},
  };
  for (const Case &c : cases) {
    Result r = omnirun(c.args);
    EXPECT_EQ(r.code, 1) << c.err;
    EXPECT_EQ(r.err, c.err);
  }
  ::setenv("OMNI_TEST_FAULT", "rank=1", 1);
  Result r = omnirun({meshBin, "--ranks=2"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "omnirun: OMNI_TEST_FAULT='rank=1': missing a field, "
                   "expected rank=R,iteration=I,mode=fail|hang|die\n");
}

TEST_F(OmniRunRanksTest, TwoRanksTrainAndOnlyRankZeroPrints) {
  Result r = omnirun({meshBin, "--ranks=2", "--steps=3", "--out", out});
  EXPECT_EQ(r.code, 0) << r.err;
  // One progress line per iteration: rank 1 prints nothing.
  int lines = 0;
  for (size_t at = r.out.find("iter "); at != std::string::npos;
       at = r.out.find("iter ", at + 1))
    ++lines;
  EXPECT_EQ(lines, 3) << r.out;
  EXPECT_NE(r.out.find("iter 3/3"), std::string::npos) << r.out;
  // The run continues on one rank with the program that has no mesh.
  r = omnirun(
      {plainBin, "--steps=4", "--resume", out, "--allow-program-change"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("resumed from " + out + " at iteration 3"),
            std::string::npos)
      << r.out;
}

TEST_F(OmniRunRanksTest, AFailingRankIsNamed) {
  ::setenv("OMNI_TEST_FAULT", "rank=1,iteration=1,mode=fail", 1);
  Result r = omnirun({meshBin, "--ranks=2", "--steps=3", "--collective-timeout",
                      "5", "--out", out});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "omnirun: rank 1: iteration 1: failed on purpose "
                   "(OMNI_TEST_FAULT, mode=fail) (the state during iteration "
                   "1 is not saved: the failed step may have updated part of "
                   "it; this run has no checkpoint yet)\n");
}

TEST_F(OmniRunRanksTest, AHangingRankIsCaughtByTheTimeout) {
  ::setenv("OMNI_TEST_FAULT", "rank=1,iteration=1,mode=hang", 1);
  Result r = omnirun({meshBin, "--ranks=2", "--steps=3", "--collective-timeout",
                      "5", "--out", out});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("rank 0 waited 5000 ms in all_reduce for rank 1 of 2"),
            std::string::npos)
      << r.err;
}

TEST_F(OmniRunTest, RejectsGarbageFiles) {
  std::string garbage =
      writeTemp("omnirun_garbage.bin", "not a step.bin at all");
  Result r = omnirun({garbage, "--list"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "omnirun: " + garbage +
                       ": file identifier is 'a st' but a step.bin has "
                       "'OMN1'\n");
}

TEST_F(OmniRunTest, Help) {
  Result r = omnirun({"--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("usage: omnirun <step.bin>"), std::string::npos);
  for (const char *flag :
       {"--steps=<n>", "--out=<dir>", "--save-every=<k>", "--resume[=<dir>]",
        "--sample-every=<k>", "--prompts=<file>", "--init=[<prefix>=]<file>",
        "--reward=<spec>", "--metrics=<file>", "--checkpoint-dir",
        "--keep-last=<n>", "--resume-if-present[=<dir>]",
        "--allow-program-change", "--set=<name>=<value>",
        "--lr-schedule=<kind>", "--warmup=<n>", "--lr-min=<lr>",
        "--allow-hparam-change"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
  // Generated from the flag table: every line fits 76 columns, each flag
  // starts one line (its help beside or below it), -h is --help.
  std::istringstream lines(r.out);
  std::string line;
  while (std::getline(lines, line))
    EXPECT_LE(line.size(), 76u) << line;
  for (const char *row :
       {"\n  --list                 print the functions",
        "\n  --resume-if-present[=<dir>]\n                         --resume "
        "when",
        "\n  --train                train with the defaults above\n",
        "\n  --checkpoint-dir=<dir>, --checkpoint-every=<k>: old names of "
        "--out "
        "and\n                         --save-every\n"})
    EXPECT_NE(r.out.find(row), std::string::npos) << row;
  EXPECT_EQ(r.out.find("-h "), std::string::npos);
  Result h = omnirun({"-h"});
  EXPECT_EQ(h.code, 0);
  EXPECT_EQ(h.out, r.out);
  // What running a step.bin means.
  EXPECT_NE(r.out.find("A step.bin\ncontains native code that omnirun loads "
                       "and executes: run only step.bin\nfiles you would run "
                       "as programs."),
            std::string::npos)
      << r.out;
}

// The config file's [run] keys (runtime/base/ConfigFile.cpp) are omnirun's
// flags: each key is a flag, and each training flag has a key (a new flag
// in kFlags needs its row in ConfigFile.cpp's [run] section, docs/config.md).
TEST(OmniRunConfig, RunKeysAreTheFlags) {
  std::vector<std::string> flags = flagNames();
  for (const std::string &key : config::runKeys())
    EXPECT_NE(std::find(flags.begin(), flags.end(), "--" + key), flags.end())
        << "[run] key '" << key << "' is no omnirun flag";
  std::vector<std::string> keys = config::runKeys();
  // --train is what any [run] key does; old names are not keys.
  for (const std::string &flag : flags) {
    if (isTrainingFlag(flag) && flag != "--train" &&
        flag != "--checkpoint-dir" && flag != "--checkpoint-every") {
      EXPECT_NE(std::find(keys.begin(), keys.end(), flag.substr(2)), keys.end())
          << "training flag " << flag
          << " has no [run] key (runtime/base/ConfigFile.cpp)";
    }
  }
}

TEST_F(OmniRunTest, ConfigFile) {
  std::string good = writeTemp("good.toml", "[model]\nname = \"sd3\"\n"
                                            "[run]\nthreads = 2\n");
  Result r = omnirun({*addBin, "--config", good, "--function=add", "--input",
                      "4xf32=1,2,3,4", "--input", "4xf32=10,20,30,40"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "result[0]: tensor<4xf32>=[11 22 33 44]\n");
  // A flag's error from the file names the file's line and key ...
  std::string bad = writeTemp("bad.toml", "[run]\n\nthreads = 5000\n");
  r = omnirun({*addBin, "--config=" + bad, "--function=add"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "omnirun: " + bad +
                       ":3:1: run.threads: --threads expects an integer "
                       "from 0 to 1024, found '5000'\n");
  // ... even when the command line sets the flag too (the file is read
  // first, and a bad file is an error).
  Result again =
      omnirun({*addBin, "--config=" + bad, "--threads=1", "--function=add"});
  EXPECT_EQ(again.code, 1);
  EXPECT_EQ(again.err, r.err);
  // A training key makes the run a training run, as its flag does.
  std::string train = writeTemp("train.toml", "[run]\nsteps = 3\n");
  r = omnirun({*addBin, "--config", train, "--function=add"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "omnirun: --steps is a training option and cannot be "
                   "combined with --function\n");
  r = omnirun({*addBin, "--function=add", "--config"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "omnirun: --config needs a file\n");
  r = omnirun({*addBin, "--config", good, "--config=" + bad});
  EXPECT_EQ(r.err, "omnirun: --config is given two config files, " + good +
                       " and " + bad + ": expected one\n");
  r = omnirun({*addBin, "--function=add", "--config=/nonexistent.toml"});
  EXPECT_EQ(r.err, "omnirun: cannot read config file /nonexistent.toml: No "
                   "such file or directory\n");
}

TEST(InterruptDeathTest, TheFirstSignalIsRecordedTheSecondExitsAtOnce) {
  EXPECT_EXIT(
      {
        train::InterruptHandler handler;
        std::raise(SIGINT);
        if (train::InterruptHandler::pending() != SIGINT)
          std::_Exit(1);
        std::raise(SIGINT);
        std::_Exit(2);
      },
      ::testing::ExitedWithCode(130),
      "SIGINT: finishing this iteration, then saving a checkpoint");
  EXPECT_EXIT(
      {
        train::InterruptHandler handler;
        std::raise(SIGTERM);
        if (train::InterruptHandler::pending() != SIGTERM)
          std::_Exit(1);
        std::raise(SIGTERM);
        std::_Exit(2);
      },
      ::testing::ExitedWithCode(143), "second signal: exiting at once");
}

// Under mpirun (watchPeers): a SIGTERM after a peer's process ended, be it a
// zombie its parent has not reaped or gone, exits at once naming the rank;
// with every peer alive it is an ordinary stop request.
TEST(InterruptDeathTest, ASigtermAfterAPeerDiedNamesItAndExits) {
  for (bool reap : {false, true})
    EXPECT_EXIT(
        {
          train::InterruptHandler handler;
          pid_t child = ::fork();
          if (child == 0)
            ::_exit(0);
          siginfo_t info;
          ::waitid(P_PID, child, &info, WEXITED | (reap ? 0 : WNOWAIT));
          train::InterruptHandler::watchPeers(
              0, {{1, static_cast<int>(::getppid())},
                  {3, static_cast<int>(child)}});
          std::raise(SIGTERM);
          std::_Exit(2);
        },
        ::testing::ExitedWithCode(143),
        "^omnirun: rank 0: SIGTERM from mpirun after rank 3 \\(pid [0-9]+\\) "
        "died: exiting without a checkpoint \\(the last one stays valid\\)");
  EXPECT_EXIT(
      {
        train::InterruptHandler handler;
        train::InterruptHandler::watchPeers(
            2, {{0, static_cast<int>(::getppid())}});
        std::raise(SIGTERM);
        std::_Exit(train::InterruptHandler::pending() == SIGTERM ? 0 : 1);
      },
      ::testing::ExitedWithCode(0),
      "SIGTERM: finishing this iteration, then saving a checkpoint");
}

TEST(Interrupt, HandlersAreRestoredAndThePendingSignalReset) {
  struct sigaction before, during, after;
  ::sigaction(SIGTERM, nullptr, &before);
  {
    train::InterruptHandler handler;
    EXPECT_EQ(train::InterruptHandler::pending(), 0);
    ::sigaction(SIGTERM, nullptr, &during);
    EXPECT_NE(during.sa_handler, before.sa_handler);
  }
  ::sigaction(SIGTERM, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
}

} // namespace
} // namespace omni::omnirun
