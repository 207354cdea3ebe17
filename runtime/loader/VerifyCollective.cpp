//===- VerifyCollective.cpp - The loader's rules for meshes -----*- C++ -*-===//
//
// The part of ProgramVerifier (VerifyImpl.h) that checks the root's meshes,
// the state slots' sharding (step.fbs StateSharding: the slot is the
// ceil(global / G) block of one dimension), every AxisIndex (a 0-D i64
// result) and every Collective command: the mesh and its axes exist, the
// operand and result types agree with the kind and the group size (the product
// of the named axes' sizes), the root is a rank of the group, and reductions
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

absl::Status ProgramVerifier::checkMeshAxes(const std::string &where,
                                            uint32_t meshIndex,
                                            const Vector<uint32_t> *list,
                                            std::vector<uint32_t> &axes,
                                            int64_t &groupSize) const {
  const uint32_t numMeshes = sizeOf(step_.meshes());
  if (meshIndex >= numMeshes)
    return fail(where, absl::StrCat("mesh = ", meshIndex, " but there are ",
                                    numMeshes, " meshes"));
  const MeshInfo &mesh = program_.meshes_[meshIndex];
  const uint32_t numAxes = sizeOf(list);
  if (numAxes == 0)
    return fail(where, absl::StrCat("axes is empty but expected axes of mesh ",
                                    mesh.describe()));
  axes.clear();
  groupSize = 1;
  for (uint32_t i = 0; i < numAxes; ++i) {
    uint32_t a = list->Get(i);
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
  return absl::OkStatus();
}

absl::Status ProgramVerifier::checkAxisIndex(const FunctionContext &ctx,
                                             const std::string &where,
                                             const step::AxisIndex &a) const {
  std::vector<uint32_t> axes;
  int64_t groupSize = 1;
  OMNI_RETURN_IF_ERROR(
      checkMeshAxes(where, a.mesh(), a.axes(), axes, groupSize));
  OMNI_RETURN_IF_ERROR(
      checkTensorRef(ctx, where, "result", a.result(), Access::Write));
  const TensorInfo &result = program_.tensors_[a.result()];
  if (result.dtype != DType::I64 || !result.shape.empty())
    return fail(where, absl::StrCat("result is ", describe(a.result()),
                                    " but expected a tensor<i64> (0-D)"));
  return absl::OkStatus();
}

absl::Status ProgramVerifier::checkStateSharding() {
  for (uint32_t s = 0; s < sizeOf(step_.state()); ++s) {
    const step::StateSharding *sharding = step_.state()->Get(s)->sharding();
    if (!sharding)
      continue;
    StateInfo &slot = program_.state_[s];
    const std::string path = absl::StrCat("state[", s, "].sharding");
    StateInfo::Sharding info;
    OMNI_RETURN_IF_ERROR(checkMeshAxes(path, sharding->mesh(), sharding->axes(),
                                       info.axes, info.groupSize));
    info.mesh = sharding->mesh();
    const int64_t rank = static_cast<int64_t>(slot.shape.size());
    if (sharding->dim() < 0 || sharding->dim() >= rank)
      return fail(path + ".dim",
                  absl::StrCat("= ", sharding->dim(), " but state '", slot.name,
                               "' is ",
                               tensorTypeString(slot.dtype, slot.shape),
                               " of rank ", rank));
    info.dim = sharding->dim();
    if (sizeOf(sharding->global_shape()) != slot.shape.size())
      return fail(path + ".global_shape",
                  absl::StrCat("has ", sizeOf(sharding->global_shape()),
                               " dimensions but state '", slot.name, "' is ",
                               tensorTypeString(slot.dtype, slot.shape),
                               " of rank ", rank));
    info.globalShape.assign(sharding->global_shape()->begin(),
                            sharding->global_shape()->end());
    const std::string group =
        absl::StrCat("over ", program_.meshes_[info.mesh].axisNames(info.axes),
                     " (", info.groupSize, " ranks)");
    for (int64_t d = 0; d < rank; ++d) {
      const int64_t global = info.globalShape[d];
      if (global < 0)
        return fail(path + ".global_shape",
                    absl::StrCat("[", d, "] = ", global,
                                 " but dimensions must be >= 0"));
      // The block of each group rank: ceil(global / G) rows.
      const int64_t want =
          d == info.dim
              ? global / info.groupSize + (global % info.groupSize != 0 ? 1 : 0)
              : global;
      if (slot.shape[d] != want)
        return fail(
            path + ".global_shape",
            absl::StrCat("= ", tensorTypeString(slot.dtype, info.globalShape),
                         " but state '", slot.name, "' is ",
                         tensorTypeString(slot.dtype, slot.shape),
                         d == info.dim
                             ? absl::StrCat(" and splitting dim ", d, " ",
                                            group, " gives ", want, " rows")
                             : absl::StrCat(" (dim ", d, " differs; only dim ",
                                            info.dim, " is split)")));
    }
    slot.sharding = std::move(info);
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
  std::vector<uint32_t> axes;
  int64_t groupSize = 1;
  OMNI_RETURN_IF_ERROR(
      checkMeshAxes(where, c.mesh(), c.axes(), axes, groupSize));
  const MeshInfo &mesh = program_.meshes_[c.mesh()];
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
