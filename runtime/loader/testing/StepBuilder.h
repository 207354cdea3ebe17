//===- StepBuilder.h - Build step.bin files in tests ------------*- C++ -*-===//
//
// Until omnic writes step.bin, the runtime's tests (loader, executor,
// omnirun, the fuzzer) build their programs with this thin layer over the
// FlatBuffers builder. It never validates anything: tests set any field to
// any value (an out-of-range index, an invalid enum) to exercise the
// loader's checks. By default finish() derives every kernel's signature
// from its first Dispatch and seals the file with its checksums
// (runtime/schema/Integrity.h), as omnic does; tests that corrupt a file on
// purpose can give signatures explicitly, leave the checksums out, or seal
// after corrupting. Test-only; header-only (links OmniStepIntegrity).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_LOADER_TESTING_STEPBUILDER_H
#define OMNI_RUNTIME_LOADER_TESTING_STEPBUILDER_H

#include "runtime/schema/Integrity.h"
#include "runtime/schema/step_generated.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

namespace omni::testing {

using CommandRef = flatbuffers::Offset<step::Command>;

inline int64_t stepDTypeSize(step::DType dtype) {
  switch (dtype) {
  case step::DType::F64:
  case step::DType::I64:
    return 8;
  case step::DType::F32:
  case step::DType::I32:
    return 4;
  case step::DType::F16:
  case step::DType::BF16:
    return 2;
  default:
    return 1;
  }
}

inline std::vector<uint8_t> readBinaryFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

/// Little-endian bytes of `values`.
template <typename T>
std::vector<uint8_t> bytesOf(const std::vector<T> &values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  if (!values.empty())
    std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

class StepBuilder {
public:
  struct TensorSpec {
    std::string name;
    step::DType dtype = step::DType::F32;
    std::vector<int64_t> shape;
    step::Storage storage = step::Storage::Arena;
    int64_t index = 0;
    step::Role role = step::Role::Transient;
  };
  /// A runtime hyper-parameter (step.fbs HyperParam).
  struct HyperParamSpec {
    std::string name;
    double defaultValue = 0;
    std::string range = "[0, inf)";
  };
  /// A mesh (step.fbs Mesh).
  struct MeshSpec {
    std::string name;
    std::vector<std::string> axes;
    std::vector<int64_t> shape;
  };
  /// A state slot's sharding (step.fbs StateSharding).
  struct ShardingSpec {
    uint32_t mesh = 0;
    std::vector<uint32_t> axes = {0};
    int64_t dim = 0;
    std::vector<int64_t> globalShape;
  };
  struct StateSpec {
    std::string name;
    step::DType dtype = step::DType::F32;
    std::vector<int64_t> shape;
    step::Role role = step::Role::Parameter;
    std::optional<ShardingSpec> sharding;
  };
  /// A kernel's signature (step.fbs KernelSignature).
  struct SignatureSpec {
    std::vector<std::pair<step::DType, int64_t>> operands, results;
    int64_t grid = -1;
    uint32_t numScalars = 0;
    /// KernelSignature.item_bytes, written when set.
    std::optional<std::vector<int64_t>> itemBytes;
  };
  /// One GPU launch (step.fbs GpuLaunch) and kernel (GpuKernel).
  struct GpuLaunchSpec {
    std::string entry;
    std::vector<uint32_t> grid = {1, 1, 1}, block = {1, 1, 1};
    uint32_t sharedBytes = 0;
    std::vector<uint32_t> args;
  };
  struct GpuKernelSpec {
    std::vector<GpuLaunchSpec> launches;
    std::vector<int64_t> scratch;
    /// GpuKernel.in_place (absent when unset).
    std::optional<std::vector<uint32_t>> inPlace;
  };
  struct ExecutableSpec {
    std::string name;
    step::ExecutableFormat format = step::ExecutableFormat::ElfSharedObject;
    std::string target;
    std::vector<uint8_t> data;
    std::vector<std::string> kernels;
    /// Empty: one per kernel, derived from the kernel's first Dispatch (or
    /// grid -1 when none runs it), unless deriveSignatures is false.
    std::vector<SignatureSpec> signatures;
    bool deriveSignatures = true;
    /// Executable.gpu_kernels and .ptx, written when set.
    std::optional<std::vector<GpuKernelSpec>> gpuKernels;
    std::optional<std::vector<uint8_t>> ptx;
  };
  /// What dispatch() saw, for deriving signatures.
  struct DispatchRecord {
    uint32_t exe, kernel;
    int64_t grid;
    std::vector<uint32_t> operands, results;
    uint32_t numScalars;
  };

  // Everything below is public so tests can corrupt any field.
  flatbuffers::FlatBufferBuilder fbb;
  uint32_t version = 1;
  std::string targetKind = "cpu";
  int64_t arenaSize = 0;
  std::vector<TensorSpec> tensors;
  std::vector<std::string> scalars;
  std::vector<std::vector<uint8_t>> constants;
  /// Repeat count of each constant (step.fbs Constant.repeat).
  std::vector<int64_t> constantRepeats;
  std::vector<StateSpec> state;
  std::vector<MeshSpec> meshes;
  /// Written in this order (the loader wants them sorted by name).
  std::vector<HyperParamSpec> hparams;
  /// The metadata table, written in this order (the loader wants the keys
  /// sorted and unique); empty: the field stays absent.
  std::vector<std::pair<std::string, std::string>> metadata;
  std::vector<ExecutableSpec> executables;
  std::vector<flatbuffers::Offset<step::Function>> functions;
  std::vector<DispatchRecord> dispatches;
  /// Write the Integrity table (step.fbs) and, when `seal`, fill in its
  /// checksums.
  bool writeIntegrity = true;
  bool seal = true;
  /// Entries of integrity.executables / .constants; -1: one per section.
  int integrityExecutableCount = -1, integrityConstantCount = -1;

  static int64_t bytesOfShape(step::DType dtype,
                              const std::vector<int64_t> &shape) {
    int64_t n = stepDTypeSize(dtype);
    for (int64_t d : shape)
      n *= d;
    return n;
  }

  uint32_t tensor(TensorSpec spec) {
    tensors.push_back(std::move(spec));
    return static_cast<uint32_t>(tensors.size() - 1);
  }
  /// A transient at the next 64-byte aligned arena offset.
  uint32_t arena(step::DType dtype, std::vector<int64_t> shape,
                 std::string name = "") {
    int64_t offset = (arenaSize + 63) / 64 * 64;
    arenaSize = offset + bytesOfShape(dtype, shape);
    return tensor({std::move(name), dtype, std::move(shape),
                   step::Storage::Arena, offset, step::Role::Transient});
  }
  uint32_t argument(step::DType dtype, std::vector<int64_t> shape,
                    int64_t index, std::string name = "") {
    return tensor({std::move(name), dtype, std::move(shape),
                   step::Storage::Argument, index, step::Role::Input});
  }
  uint32_t constant(step::DType dtype, std::vector<int64_t> shape,
                    std::vector<uint8_t> data, std::string name = "",
                    int64_t repeat = 1) {
    constants.push_back(std::move(data));
    constantRepeats.push_back(repeat);
    return tensor(
        {std::move(name), dtype, std::move(shape), step::Storage::Constant,
         static_cast<int64_t>(constants.size() - 1), step::Role::Constant});
  }
  /// A state slot and a tensor that is it.
  uint32_t stateTensor(std::string name, step::DType dtype,
                       std::vector<int64_t> shape) {
    state.push_back({name, dtype, shape, step::Role::Parameter});
    return tensor({std::move(name), dtype, std::move(shape),
                   step::Storage::State, static_cast<int64_t>(state.size() - 1),
                   step::Role::Parameter});
  }
  uint32_t scalar(std::string name = "") {
    scalars.push_back(std::move(name));
    return static_cast<uint32_t>(scalars.size() - 1);
  }
  uint32_t mesh(MeshSpec spec) {
    meshes.push_back(std::move(spec));
    return static_cast<uint32_t>(meshes.size() - 1);
  }
  uint32_t executable(ExecutableSpec spec) {
    executables.push_back(std::move(spec));
    return static_cast<uint32_t>(executables.size() - 1);
  }

  //===--- Commands -------------------------------------------------------===//

  /// The phase (Command.phase) of the commands built from now on; empty:
  /// none.
  std::string phase;
  CommandRef command(step::CommandKind kind, flatbuffers::Offset<void> value,
                     const std::string &location = "") {
    auto loc = location.empty() ? 0 : fbb.CreateString(location);
    auto ph = phase.empty() ? 0 : fbb.CreateString(phase);
    return step::CreateCommand(fbb, kind, value, loc, ph);
  }
  CommandRef dispatch(uint32_t exe, uint32_t kernel, int64_t grid,
                      std::vector<uint32_t> operands,
                      std::vector<uint32_t> results,
                      std::vector<uint32_t> scalarRegs = {}) {
    dispatches.push_back({exe, kernel, grid, operands, results,
                          static_cast<uint32_t>(scalarRegs.size())});
    auto d = step::CreateDispatchDirect(fbb, exe, kernel, grid, &operands,
                                        &results, &scalarRegs);
    return command(step::CommandKind::Dispatch, d.Union());
  }
  CommandRef library(step::Library library, std::vector<uint32_t> operands,
                     std::vector<uint32_t> results, std::vector<int64_t> ints,
                     std::vector<double> floats = {}, bool epilogue = false) {
    auto c = step::CreateLibraryCallDirect(fbb, library, &operands, &results,
                                           &ints, &floats, epilogue);
    return command(step::CommandKind::LibraryCall, c.Union());
  }
  struct CopySpec {
    uint32_t source = 0, dest = 0;
    int64_t bytes = 0;
    int64_t sourceOffset = 0;
    int32_t sourceScalar = -1;
    int64_t sourceStride = 0;
    int64_t destOffset = 0;
    int32_t destScalar = -1;
    int64_t destStride = 0;
  };
  CommandRef copy(const CopySpec &s) {
    auto c = step::CreateCopy(fbb, s.source, s.dest, s.bytes, s.sourceOffset,
                              s.sourceScalar, s.sourceStride, s.destOffset,
                              s.destScalar, s.destStride);
    return command(step::CommandKind::Copy, c.Union());
  }
  CommandRef copy(uint32_t source, uint32_t dest) {
    CopySpec s;
    s.source = source;
    s.dest = dest;
    return copy(s);
  }
  CommandRef fill(uint32_t dest, std::vector<uint8_t> pattern) {
    auto f = step::CreateFillDirect(fbb, dest, &pattern);
    return command(step::CommandKind::Fill, f.Union());
  }
  CommandRef random(step::Distribution distribution, uint32_t key,
                    uint32_t counter, uint32_t offset, uint32_t result) {
    auto r =
        step::CreateRandom(fbb, distribution, key, counter, offset, result);
    return command(step::CommandKind::Random, r.Union());
  }
  CommandRef hostCall(const std::string &name, std::vector<uint32_t> operands,
                      std::vector<uint32_t> results) {
    auto h = step::CreateHostCallDirect(fbb, name.c_str(), &operands, &results);
    return command(step::CommandKind::HostCall, h.Union());
  }
  CommandRef scalarOp(step::ScalarOpKind kind, uint32_t dest, uint32_t a = 0,
                      uint32_t b = 0, int64_t value = 0) {
    auto s = step::CreateScalarOp(fbb, kind, dest, a, b, value);
    return command(step::CommandKind::ScalarOp, s.Union());
  }
  CommandRef loop(uint32_t iv, int64_t lower, int64_t upper, int64_t stepSize,
                  std::vector<CommandRef> body) {
    auto l = step::CreateLoopDirect(fbb, iv, lower, upper, stepSize, &body);
    return command(step::CommandKind::Loop, l.Union());
  }
  CommandRef call(uint32_t function, std::vector<uint32_t> operands,
                  std::vector<uint32_t> results) {
    auto c = step::CreateCallDirect(fbb, function, &operands, &results);
    return command(step::CommandKind::Call, c.Union());
  }

  /// A Collective command (step.fbs): `dim` for AllGather/ReduceScatter,
  /// `root` for Broadcast.
  struct CollectiveSpec {
    step::CollectiveKind kind = step::CollectiveKind::AllReduce;
    step::ReduceOp op = step::ReduceOp::Sum;
    uint32_t mesh = 0;
    std::vector<uint32_t> axes = {0};
    int64_t dim = 0, root = 0;
    uint32_t operand = 0, result = 0;
  };
  CommandRef collective(const CollectiveSpec &c) {
    auto t = step::CreateCollectiveDirect(fbb, c.kind, c.op, c.mesh, &c.axes,
                                          c.dim, c.root, c.operand, c.result);
    return command(step::CommandKind::Collective, t.Union());
  }
  /// An AxisIndex command (step.fbs).
  CommandRef axisIndex(uint32_t mesh, std::vector<uint32_t> axes,
                       uint32_t result) {
    auto t = step::CreateAxisIndexDirect(fbb, mesh, &axes, result);
    return command(step::CommandKind::AxisIndex, t.Union());
  }

  /// Adds a function; returns its index.
  uint32_t function(const std::string &name, std::vector<uint32_t> inputs,
                    std::vector<uint32_t> outputs,
                    std::vector<CommandRef> commands, uint32_t numScalars = 0) {
    functions.push_back(step::CreateFunctionDirect(
        fbb, name.c_str(), &inputs, &outputs, &commands, numScalars));
    return static_cast<uint32_t>(functions.size() - 1);
  }

  /// The signature of kernel `kernel` of executable `exe` that its first
  /// Dispatch implies (tensor indices out of range count as empty f32).
  SignatureSpec deriveSignature(uint32_t exe, uint32_t kernel) const {
    SignatureSpec sig;
    for (const DispatchRecord &d : dispatches) {
      if (d.exe != exe || d.kernel != kernel)
        continue;
      auto buffers = [&](const std::vector<uint32_t> &ids) {
        std::vector<std::pair<step::DType, int64_t>> out;
        for (uint32_t t : ids)
          out.push_back(
              t < tensors.size()
                  ? std::pair{tensors[t].dtype,
                              bytesOfShape(tensors[t].dtype, tensors[t].shape)}
                  : std::pair{step::DType::F32, int64_t(0)});
        return out;
      };
      sig.operands = buffers(d.operands);
      sig.results = buffers(d.results);
      sig.grid = d.grid;
      sig.numScalars = d.numScalars;
      break;
    }
    return sig;
  }

  /// The finished file. The builder cannot be reused afterwards.
  std::string finish() {
    std::vector<flatbuffers::Offset<step::Tensor>> tensorTables;
    for (const TensorSpec &t : tensors)
      tensorTables.push_back(step::CreateTensorDirect(
          fbb, t.name.c_str(), t.dtype, &t.shape, t.storage, t.index, t.role));
    std::vector<flatbuffers::Offset<step::Scalar>> scalarTables;
    for (const std::string &s : scalars)
      scalarTables.push_back(step::CreateScalarDirect(fbb, s.c_str()));
    std::vector<flatbuffers::Offset<step::Constant>> constantTables;
    for (size_t c = 0; c < constants.size(); ++c)
      constantTables.push_back(step::CreateConstantDirect(
          fbb, &constants[c],
          c < constantRepeats.size() ? constantRepeats[c] : 1));
    std::vector<flatbuffers::Offset<step::StateSlot>> stateTables;
    for (const StateSpec &s : state) {
      flatbuffers::Offset<step::StateSharding> sharding;
      if (s.sharding)
        sharding = step::CreateStateShardingDirect(
            fbb, s.sharding->mesh, &s.sharding->axes, s.sharding->dim,
            &s.sharding->globalShape);
      stateTables.push_back(step::CreateStateSlotDirect(
          fbb, s.name.c_str(), s.dtype, &s.shape, s.role, sharding));
    }
    std::vector<flatbuffers::Offset<step::Executable>> exeTables;
    for (uint32_t x = 0; x < executables.size(); ++x) {
      const ExecutableSpec &e = executables[x];
      std::vector<flatbuffers::Offset<flatbuffers::String>> kernels;
      for (const std::string &k : e.kernels)
        kernels.push_back(fbb.CreateString(k));
      std::vector<SignatureSpec> signatures = e.signatures;
      if (signatures.empty() && e.deriveSignatures)
        for (uint32_t k = 0; k < e.kernels.size(); ++k)
          signatures.push_back(deriveSignature(x, k));
      std::vector<flatbuffers::Offset<step::KernelSignature>> sigTables;
      for (const SignatureSpec &sig : signatures) {
        auto buffers =
            [](const std::vector<std::pair<step::DType, int64_t>> &list) {
              std::vector<step::KernelBuffer> out;
              for (auto [dtype, bytes] : list)
                out.emplace_back(bytes, dtype);
              return out;
            };
        std::vector<step::KernelBuffer> ops = buffers(sig.operands),
                                        res = buffers(sig.results);
        sigTables.push_back(step::CreateKernelSignatureDirect(
            fbb, &ops, &res, sig.grid, sig.numScalars,
            sig.itemBytes ? &*sig.itemBytes : nullptr));
      }
      std::vector<flatbuffers::Offset<step::GpuKernel>> gpuTables;
      for (const GpuKernelSpec &k :
           e.gpuKernels.value_or(std::vector<GpuKernelSpec>{})) {
        std::vector<flatbuffers::Offset<step::GpuLaunch>> launches;
        for (const GpuLaunchSpec &l : k.launches)
          launches.push_back(step::CreateGpuLaunchDirect(
              fbb, l.entry.c_str(), &l.grid, &l.block, l.sharedBytes, &l.args));
        gpuTables.push_back(step::CreateGpuKernelDirect(
            fbb, &launches, &k.scratch, k.inPlace ? &*k.inPlace : nullptr));
      }
      exeTables.push_back(step::CreateExecutableDirect(
          fbb, e.name.c_str(), e.format, e.target.c_str(), &e.data, &kernels,
          &sigTables, e.gpuKernels ? &gpuTables : nullptr,
          e.ptx ? &*e.ptx : nullptr));
    }
    std::vector<flatbuffers::Offset<step::Mesh>> meshTables;
    for (const MeshSpec &m : meshes) {
      std::vector<flatbuffers::Offset<flatbuffers::String>> axes;
      for (const std::string &a : m.axes)
        axes.push_back(fbb.CreateString(a));
      meshTables.push_back(
          step::CreateMeshDirect(fbb, m.name.c_str(), &axes, &m.shape));
    }
    std::vector<flatbuffers::Offset<step::HyperParam>> hparamTables;
    for (const HyperParamSpec &h : hparams)
      hparamTables.push_back(step::CreateHyperParamDirect(
          fbb, h.name.c_str(), h.defaultValue, h.range.c_str()));
    std::vector<flatbuffers::Offset<step::MetadataEntry>> metadataTables;
    for (const auto &[key, value] : metadata)
      metadataTables.push_back(
          step::CreateMetadataEntryDirect(fbb, key.c_str(), value.c_str()));
    auto target =
        step::CreateTargetDirect(fbb, targetKind.c_str(), "x86-64", "+sse2");
    flatbuffers::Offset<step::Integrity> integrity;
    if (writeIntegrity) {
      std::vector<uint32_t> exeSums(integrityExecutableCount < 0
                                        ? executables.size()
                                        : integrityExecutableCount),
          constSums(integrityConstantCount < 0 ? constants.size()
                                               : integrityConstantCount);
      step::Crc32c zero(0);
      integrity = step::CreateIntegrityDirect(fbb, &zero, &exeSums, &constSums);
    }
    auto root = step::CreateStepDirect(
        fbb, version, "StepBuilder", target, &tensorTables, &scalarTables,
        arenaSize, &exeTables, &constantTables, &stateTables, &functions,
        integrity, meshes.empty() ? nullptr : &meshTables,
        hparams.empty() ? nullptr : &hparamTables,
        metadata.empty() ? nullptr : &metadataTables);
    step::FinishStepBuffer(fbb, root);
    if (writeIntegrity && seal)
      step::sealStepBin(fbb.GetBufferPointer(), fbb.GetSize());
    return std::string(reinterpret_cast<const char *>(fbb.GetBufferPointer()),
                       fbb.GetSize());
  }
};

} // namespace omni::testing

#endif // OMNI_RUNTIME_LOADER_TESTING_STEPBUILDER_H
