//===- VerifyCollective.cpp - The loader's rules for meshes -----*- C++ -*-===//
//
// The part of ProgramVerifier (VerifyImpl.h) that checks the root's meshes
// and every Collective command: the mesh and its axes exist, the operand
// and result types agree with the kind and the group size (the product of
// the named axes' sizes), the root is a rank of the group, and reductions
// have a dtype they can reduce. What it cannot know is the channel the
// program will run on: the executor compares the mesh's rank count with it.
//
//===----------------------------------------------------------------------===//

#include "runtime/loader/VerifyImpl.h"

#include <limits>
#include <set>

namespace omni::loader {

using namespace detail;

absl::Status ProgramVerifier::checkMeshes() {
  for (uint32_t m = 0; m < sizeOf(step_.meshes()); ++m) {
    const step::Mesh *mesh = step_.meshes()->Get(m);
    std::string path = absl::StrCat("meshes[", m, "]");
    MeshInfo info;
    info.name = str(mesh->name());
    uint32_t numAxes = sizeOf(mesh->axes());
    if (numAxes == 0)
      return fail(path + ".axes", "is empty but a mesh has at least one axis");
    if (sizeOf(mesh->shape()) != numAxes)
      return fail(path + ".shape", absl::StrCat("has ", sizeOf(mesh->shape()),
                                                " entries but expected ",
                                                numAxes, " (one per axis)"));
    std::set<std::string> seen;
    for (uint32_t a = 0; a < numAxes; ++a) {
      std::string name = mesh->axes()->Get(a)->str();
      std::string at = absl::StrCat(path, ".axes[", a, "]");
      if (name.empty())
        return fail(at, "is empty but collectives name axes");
      if (!seen.insert(name).second)
        return fail(at, absl::StrCat("'", name, "' repeats an earlier axis"));
      int64_t size = mesh->shape()->Get(a);
      if (size < 1)
        return fail(absl::StrCat(path, ".shape[", a, "]"),
                    absl::StrCat("= ", size, " but axis sizes must be >= 1"));
      if (info.numRanks > std::numeric_limits<int32_t>::max() / size)
        return fail(path + ".shape",
                    absl::StrCat("has more than ",
                                 std::numeric_limits<int32_t>::max(),
                                 " ranks in all"));
      info.numRanks *= size;
      info.axes.push_back(std::move(name));
      info.shape.push_back(size);
    }
    program_.meshes_.push_back(std::move(info));
  }
  return absl::OkStatus();
}

absl::Status ProgramVerifier::checkCollective(const FunctionContext &ctx,
                                              const std::string &at,
                                              const step::Collective &c) const {
  const step::CollectiveKind kind = c.kind();
  if (kind < step::CollectiveKind::MIN || kind > step::CollectiveKind::MAX)
    return fail(at + " (Collective)",
                absl::StrCat("kind = ", static_cast<int>(kind),
                             " but valid kinds are 0..3 (AllReduce, "
                             "AllGather, ReduceScatter, Broadcast)"));
  const std::string where = absl::StrCat(
      at, " (Collective ", step::EnumNameCollectiveKind(kind), ")");
  const uint32_t numMeshes = sizeOf(step_.meshes());
  if (c.mesh() >= numMeshes)
    return fail(where, absl::StrCat("mesh = ", c.mesh(), " but there are ",
                                    numMeshes, " meshes"));
  const MeshInfo &mesh = program_.meshes_[c.mesh()];
  const uint32_t numAxes = sizeOf(c.axes());
  if (numAxes == 0)
    return fail(where, absl::StrCat("axes is empty but expected axes of mesh ",
                                    mesh.describe()));
  std::vector<uint32_t> axes;
  int64_t groupSize = 1;
  for (uint32_t i = 0; i < numAxes; ++i) {
    uint32_t a = c.axes()->Get(i);
    if (a >= mesh.axes.size())
      return fail(where, absl::StrCat("axes[", i, "] = ", a, " but mesh ",
                                      mesh.describe(), " has ",
                                      mesh.axes.size(), " axes"));
    for (uint32_t j = 0; j < i; ++j)
      if (axes[j] == a)
        return fail(where,
                    absl::StrCat("axes[", i, "] = ", a, " ('", mesh.axes[a],
                                 "') repeats axes[", j, "]"));
    axes.push_back(a);
    groupSize *= mesh.shape[a];
  }
  OMNI_RETURN_IF_ERROR(
      checkTensorRef(ctx, where, "operand", c.operand(), Access::Read));
  OMNI_RETURN_IF_ERROR(
      checkTensorRef(ctx, where, "result", c.result(), Access::Write));
  const TensorInfo &operand = program_.tensors_[c.operand()];
  const TensorInfo &result = program_.tensors_[c.result()];
  if (operand.dtype != result.dtype)
    return fail(where, absl::StrCat("result is ", describe(c.result()),
                                    " but operand is ", describe(c.operand()),
                                    " (the dtypes must match)"));
  const bool reduces = kind == step::CollectiveKind::AllReduce ||
                       kind == step::CollectiveKind::ReduceScatter;
  if (reduces) {
    const step::ReduceOp op = c.reduce_op();
    if (op < step::ReduceOp::MIN || op > step::ReduceOp::MAX)
      return fail(where, absl::StrCat("reduce_op = ", static_cast<int>(op),
                                      " but valid ops are 0..4 (Sum, Prod, "
                                      "Min, Max, Mean)"));
    if (operand.dtype == DType::I1)
      return fail(where, absl::StrCat("operand is ", describe(c.operand()),
                                      " but i1 tensors cannot be reduced"));
    if (op == step::ReduceOp::Mean && !isFloatDType(operand.dtype))
      return fail(where, absl::StrCat("reduce_op = Mean but operand is ",
                                      describe(c.operand()),
                                      " (Mean needs a float dtype)"));
  }
  const std::string group =
      absl::StrCat("over ", mesh.axisNames(axes), " (", groupSize, " ranks)");
  if (kind == step::CollectiveKind::AllReduce ||
      kind == step::CollectiveKind::Broadcast) {
    if (result.shape != operand.shape)
      return fail(where, absl::StrCat("result is ", describe(c.result()),
                                      " but operand is ", describe(c.operand()),
                                      " (the shapes must match)"));
    if (kind == step::CollectiveKind::Broadcast &&
        (c.root() < 0 || c.root() >= groupSize))
      return fail(where, absl::StrCat("root = ", c.root(), " but the group ",
                                      group, " has ranks 0..", groupSize - 1));
    return absl::OkStatus();
  }
  // AllGather and ReduceScatter: one dimension grows (shrinks) by G.
  const int64_t rank = static_cast<int64_t>(operand.shape.size());
  if (c.dim() < 0 || c.dim() >= rank)
    return fail(where, absl::StrCat("dim = ", c.dim(), " but operand ",
                                    describe(c.operand()), " has rank ", rank));
  const bool gather = kind == step::CollectiveKind::AllGather;
  const TensorInfo &small = gather ? operand : result;
  std::vector<int64_t> want = small.shape;
  bool ok = result.shape.size() == operand.shape.size();
  if (ok) {
    const TensorInfo &large = gather ? result : operand;
    // large[dim] == G x small[dim], other dims equal.
    ok = !__builtin_mul_overflow(small.shape[c.dim()], groupSize,
                                 &want[c.dim()]) &&
         large.shape == want;
  }
  if (!ok) {
    if (gather)
      return fail(where,
                  absl::StrCat("result is ", describe(c.result()),
                               " but gathering operand ", describe(c.operand()),
                               " along dim ", c.dim(), " ", group, " gives ",
                               tensorTypeString(operand.dtype, want)));
    return fail(where,
                absl::StrCat("operand is ", describe(c.operand()),
                             " but scattering along dim ", c.dim(), " ", group,
                             " needs dim ", c.dim(), " = ", groupSize,
                             " x that of result ", describe(c.result()),
                             " and the other dims equal"));
  }
  return absl::OkStatus();
}

} // namespace omni::loader
