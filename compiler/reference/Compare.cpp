//===- Compare.cpp - a sharded program checked against the unsharded one -===//
//
// compareSharded (Evaluator.h): evaluates the unsharded program on one rank
// and the sharded one on N, with a TraceLog per rank, then walks the
// sharded program's traced values in evaluation order and checks each
// against the unsharded value with the same omni.trace id, reassembled per
// its omni.result_shardings entry (a split dimension: each rank's block
// against the matching rows; partial: the group's reduction; replicated:
// every rank's whole value).
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Interpreter.h"

#include "dialects/omni/OmniOps.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <limits>

using namespace mlir;
namespace om = mlir::omni;

namespace omni::reference {

std::string ShardedComparison::summary() const {
  if (!mismatch)
    return absl::StrCat(valuesCompared, " traced value",
                        valuesCompared == 1 ? "" : "s", " agree");
  const ShardedMismatch &m = *mismatch;
  return absl::StrCat("trace ", m.traceId, " '", m.opName, "' at ", m.location,
                      " result #", m.result, ": ", m.detail);
}

namespace detail {
namespace {

/// How one result of the sharded program relates to the unsharded value.
struct ResultSharding {
  enum Kind { Replicated, Split, Partial } kind = Replicated;
  int64_t dim = -1;              // Split
  om::ReduceKind reduce{};       // Partial
  std::vector<std::string> axes; // Split, Partial
  std::string text;              // for messages
};

absl::StatusOr<ResultSharding>
parseResultSharding(Operation *op, Attribute attr, const MeshGroups &mesh) {
  ResultSharding rs;
  auto checkAxes = [&](const std::vector<std::string> &axes) -> absl::Status {
    for (const std::string &axis : axes)
      if (llvm::find(mesh.axes, axis) == mesh.axes.end())
        return opError(op, llvm::Twine(kResultShardingsAttr) + " names axis '" +
                               axis + "', which the mesh does not have");
    return absl::OkStatus();
  };
  if (auto s = dyn_cast<om::ShardingAttr>(attr)) {
    std::string text;
    llvm::raw_string_ostream os(text);
    static_cast<Attribute>(s).print(os);
    rs.text = text;
    for (unsigned d = 0; d < s.getDims().size(); ++d) {
      llvm::SmallVector<llvm::StringRef> axes = s.getAxes(d);
      if (axes.empty())
        continue;
      if (rs.kind == ResultSharding::Split)
        return opError(op, llvm::Twine(kResultShardingsAttr) + " entry " +
                               text + " splits more than one dimension");
      rs.kind = ResultSharding::Split;
      rs.dim = d;
      for (llvm::StringRef a : axes)
        rs.axes.push_back(a.str());
    }
    if (absl::Status st = checkAxes(rs.axes); !st.ok())
      return st;
    return rs;
  }
  auto str = dyn_cast<StringAttr>(attr);
  std::vector<std::string> parts;
  if (str)
    parts = std::vector<std::string>(absl::StrSplit(str.getValue().str(), ':'));
  if (parts.size() != 3 || parts[0] != "partial" || parts[2].empty())
    return opError(op, llvm::Twine(kResultShardingsAttr) +
                           " entries must be #omni.sharding or "
                           "\"partial:<sum|mean|max|min>:<axis>,...\"");
  rs.kind = ResultSharding::Partial;
  rs.text = str.getValue().str();
  if (parts[1] == "sum")
    rs.reduce = om::ReduceKind::sum;
  else if (parts[1] == "mean")
    rs.reduce = om::ReduceKind::mean;
  else if (parts[1] == "max")
    rs.reduce = om::ReduceKind::max;
  else if (parts[1] == "min")
    rs.reduce = om::ReduceKind::min;
  else
    return opError(op, llvm::Twine("has partial kind '") + parts[1] + "' in " +
                           kResultShardingsAttr +
                           " (expected sum, mean, max or min)");
  rs.axes = std::vector<std::string>(absl::StrSplit(parts[2], ','));
  if (absl::Status st = checkAxes(rs.axes); !st.ok())
    return st;
  return rs;
}

/// The worst element of `got` against `want` (same shape).
struct ElementError {
  double error = 0;
  int64_t position = -1;
};

ElementError worstError(const HostTensor &got, const HostTensor &want) {
  ElementError worst;
  for (int64_t i = 0; i < want.numElements(); ++i) {
    double e;
    if (want.isFloat()) {
      double a = got.floats()[i], b = want.floats()[i];
      if (std::isnan(a) || std::isnan(b))
        e = std::isnan(a) && std::isnan(b)
                ? 0
                : std::numeric_limits<double>::infinity();
      else if (a == b)
        e = 0; // also equal infinities
      else
        e = std::fabs(a - b) / std::max(std::fabs(b), 1.0);
    } else {
      int64_t a = got.ints()[i], b = want.ints()[i];
      // Integers must be equal: any difference is an infinite error.
      e = a == b ? 0 : std::numeric_limits<double>::infinity();
    }
    if (worst.position < 0 || e > worst.error)
      worst = {e, i};
  }
  return worst;
}

std::string elementString(const HostTensor &t, int64_t position) {
  if (position < 0 || position >= t.numElements())
    return "-";
  return t.isFloat() ? absl::StrCat(t.floats()[position])
                     : absl::StrCat(t.ints()[position]);
}

std::string indexString(llvm::ArrayRef<int64_t> shape, int64_t position) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = shape[d] ? position % shape[d] : 0;
    position = shape[d] ? position / shape[d] : 0;
  }
  return absl::StrCat("[", absl::StrJoin(index, ", "), "]");
}

/// Rows [k*c, k*c + c) of dimension `dim` of `global`, cut to its size: the
/// part of rank block `k` (size c) that holds data.
HostTensor rowsOf(const HostTensor &t, int64_t dim, int64_t first,
                  int64_t count) {
  std::vector<int64_t> shape = t.shape();
  shape[dim] = count;
  HostTensor out(t.dtype(), shape);
  std::vector<int64_t> strides = stridesOf(t.shape());
  forEachIndex(shape, [&](llvm::ArrayRef<int64_t> index, int64_t position) {
    int64_t from = 0;
    for (size_t d = 0; d < index.size(); ++d)
      from += (static_cast<int64_t>(d) == dim ? index[d] + first : index[d]) *
              strides[d];
    copyElement(t, from, out, position);
  });
  return out;
}

/// The elementwise reduction of `values` in double (the unsharded value a
/// partial result stands for).
HostTensor reduceInDouble(const std::vector<const HostTensor *> &values,
                          om::ReduceKind kind) {
  HostTensor out = *values[0];
  for (size_t r = 1; r < values.size(); ++r)
    for (int64_t i = 0; i < out.numElements(); ++i) {
      if (out.isFloat()) {
        double &acc = out.floats()[i];
        double v = values[r]->floats()[i];
        if (kind == om::ReduceKind::sum || kind == om::ReduceKind::mean)
          acc += v;
        else if (std::isnan(acc) || std::isnan(v))
          acc = std::numeric_limits<double>::quiet_NaN();
        else
          acc =
              kind == om::ReduceKind::max ? std::max(acc, v) : std::min(acc, v);
      } else {
        int64_t &acc = out.ints()[i];
        int64_t v = values[r]->ints()[i];
        acc = kind == om::ReduceKind::sum || kind == om::ReduceKind::mean
                  ? acc + v
              : kind == om::ReduceKind::max ? std::max(acc, v)
                                            : std::min(acc, v);
      }
    }
  // mean: the group's blocks are equal (the pass splits evenly), so the
  // whole value's mean is the mean of the ranks' means.
  if (kind == om::ReduceKind::mean)
    for (int64_t i = 0; i < out.numElements(); ++i) {
      if (out.isFloat())
        out.floats()[i] /= static_cast<double>(values.size());
      else
        out.ints()[i] /= static_cast<int64_t>(values.size());
    }
  return out;
}

/// Compares result `result` of one traced occurrence; returns the first
/// rank's mismatch, if any.
std::optional<ShardedMismatch>
compareResult(Operation *op, unsigned result, const ResultSharding &rs,
              const MeshGroups &mesh,
              const std::vector<const HostTensor *> &got,
              const HostTensor &want, double tolerance) {
  const int64_t numRanks = static_cast<int64_t>(got.size());
  auto mismatch = [&](int64_t rank, double error, std::string detail) {
    ShardedMismatch m;
    m.opName = op->getName().getStringRef().str();
    m.location = locationString(op->getLoc());
    m.result = result;
    m.rank = rank;
    m.maxError = error;
    m.detail = std::move(detail);
    return m;
  };
  auto check = [&](int64_t rank, const HostTensor &value,
                   const HostTensor &expected,
                   const std::string &what) -> std::optional<ShardedMismatch> {
    if (value.shape() != expected.shape() ||
        value.isFloat() != expected.isFloat())
      return mismatch(rank, std::numeric_limits<double>::infinity(),
                      absl::StrCat(what, " is ", value.typeString(),
                                   " but the unsharded value gives ",
                                   expected.typeString(), " (sharding ",
                                   rs.text, ")"));
    ElementError worst = worstError(value, expected);
    if (worst.error <= tolerance)
      return std::nullopt;
    return mismatch(
        rank, worst.error,
        absl::StrCat(what, " differs from the unsharded value by ", worst.error,
                     " (tolerance ", tolerance, ") at ",
                     indexString(expected.shape(), worst.position),
                     ": sharded ", elementString(value, worst.position),
                     ", unsharded ", elementString(expected, worst.position),
                     " (sharding ", rs.text, ")"));
  };
  for (int64_t r = 0; r < numRanks; ++r) {
    const HostTensor &value = *got[r];
    switch (rs.kind) {
    case ResultSharding::Replicated:
      if (auto m = check(r, value, want, absl::StrCat("rank ", r, "'s value")))
        return m;
      break;
    case ResultSharding::Split: {
      int64_t k = 0;
      std::vector<int64_t> members = mesh.groupOf(rs.axes, r, &k);
      int64_t total = want.rank() > rs.dim ? want.shape()[rs.dim] : -1;
      if (value.rank() != want.rank() || total < 0) {
        if (auto m =
                check(r, value, want, absl::StrCat("rank ", r, "'s block")))
          return m;
        break;
      }
      int64_t block = value.shape()[rs.dim];
      if (block * static_cast<int64_t>(members.size()) < total)
        return mismatch(r, std::numeric_limits<double>::infinity(),
                        absl::StrCat(members.size(), " blocks of ", block,
                                     " cannot hold dimension ", rs.dim,
                                     " of size ", total, " (sharding ", rs.text,
                                     ")"));
      int64_t first = std::min(k * block, total);
      int64_t count = std::min(block, total - first);
      // The rows past the global size are padding: not compared.
      HostTensor mine = rowsOf(value, rs.dim, 0, count);
      HostTensor theirs = rowsOf(want, rs.dim, first, count);
      if (auto m = check(r, mine, theirs,
                         absl::StrCat("rank ", r, "'s block ", k, " (rows ",
                                      first, "..", first + count,
                                      " of dimension ", rs.dim, ")")))
        return m;
      break;
    }
    case ResultSharding::Partial: {
      int64_t k = 0;
      std::vector<int64_t> members = mesh.groupOf(rs.axes, r, &k);
      if (k != 0)
        break; // the group's first rank checks the group
      std::vector<const HostTensor *> parts;
      for (int64_t m : members) {
        if (got[m]->shape() != value.shape())
          return mismatch(m, std::numeric_limits<double>::infinity(),
                          absl::StrCat("rank ", m, "'s partial value is ",
                                       got[m]->typeString(), " but rank ", r,
                                       "'s is ", value.typeString()));
        parts.push_back(got[m]);
      }
      HostTensor reduced = reduceInDouble(parts, rs.reduce);
      if (auto m = check(r, reduced, want,
                         absl::StrCat("the reduction over ranks ",
                                      absl::StrJoin(members, ", "))))
        return m;
      break;
    }
    }
  }
  return std::nullopt;
}

} // namespace
} // namespace detail

absl::StatusOr<ShardedComparison>
compareSharded(ModuleOp unsharded, ModuleOp sharded, llvm::StringRef function,
               int64_t numRanks, llvm::ArrayRef<HostTensor> inputs,
               double tolerance, const EvalOptions &options) {
  using namespace detail;
  if (!(tolerance >= 0))
    return absl::InvalidArgumentError(
        absl::StrCat("the tolerance must be >= 0, found ", tolerance));
  std::vector<TraceLog> reference, ranks;
  absl::StatusOr<std::vector<Results>> unshardedResults = evaluateSpmdTraced(
      unsharded, function, 1, {Results(inputs.begin(), inputs.end())}, options,
      &reference);
  if (!unshardedResults.ok())
    return absl::Status(unshardedResults.status().code(),
                        absl::StrCat("the unsharded program: ",
                                     unshardedResults.status().message()));
  absl::StatusOr<std::vector<Results>> perRank =
      shardArguments(sharded, function, numRanks, inputs);
  if (!perRank.ok())
    return absl::Status(
        perRank.status().code(),
        absl::StrCat("the sharded program: ", perRank.status().message()));
  absl::StatusOr<std::vector<Results>> shardedResults = evaluateSpmdTraced(
      sharded, function, numRanks, *perRank, options, &ranks);
  if (!shardedResults.ok())
    return absl::Status(shardedResults.status().code(),
                        absl::StrCat("the sharded program: ",
                                     shardedResults.status().message()));

  // The unsharded occurrences of each trace id, in evaluation order.
  std::map<int64_t, std::vector<const TraceLog::Entry *>> byId;
  for (const TraceLog::Entry &e : reference[0].entries)
    byId[e.id].push_back(&e);

  ShardedComparison comparison;
  std::map<int64_t, size_t> seen; // occurrences of each id so far
  const std::vector<TraceLog::Entry> &order = ranks[0].entries;
  for (size_t i = 0; i < order.size(); ++i) {
    Operation *op = order[i].op;
    int64_t id = order[i].id;
    size_t occurrence = seen[id]++;
    auto shardings = op->getAttrOfType<ArrayAttr>(kResultShardingsAttr);
    if (!shardings)
      continue; // inserted by the pass, nothing to compare with
    // SPMD ranks evaluate the same ops in the same order.
    for (int64_t r = 1; r < numRanks; ++r)
      if (ranks[r].entries.size() != order.size() ||
          ranks[r].entries[i].op != op)
        return absl::InvalidArgumentError(absl::StrCat(
            "the sharded program: rank ", r,
            " evaluated other traced ops than rank 0 (first at trace ", id,
            ")"));
    if (shardings.size() != op->getNumResults())
      return opError(op, llvm::Twine(kResultShardingsAttr) + " has " +
                             llvm::Twine(shardings.size()) +
                             " entries but the op has " +
                             llvm::Twine(op->getNumResults()) + " results");
    auto it = byId.find(id);
    if (it == byId.end())
      return opError(op, "has trace id " + llvm::Twine(id) +
                             ", which no op of the unsharded program has");
    if (occurrence >= it->second.size())
      return opError(op, "with trace id " + llvm::Twine(id) + " ran " +
                             llvm::Twine(occurrence + 1) +
                             " times, the unsharded op only " +
                             llvm::Twine(it->second.size()));
    const TraceLog::Entry &want = *it->second[occurrence];
    if (want.values.size() != op->getNumResults())
      return opError(op, "has " + llvm::Twine(op->getNumResults()) +
                             " results but the unsharded op with trace id " +
                             llvm::Twine(id) + " has " +
                             llvm::Twine(want.values.size()));
    MeshGroups mesh;
    mesh.shape = {numRanks};
    mesh.axes = {""};
    if (auto meshes = sharded.getOps<om::MeshOp>(); !meshes.empty()) {
      om::MeshOp m = *meshes.begin();
      mesh.axes = axisList(m.getAxes());
      mesh.shape.assign(m.getShape().begin(), m.getShape().end());
    }
    for (unsigned res = 0; res < op->getNumResults(); ++res) {
      absl::StatusOr<ResultSharding> rs =
          parseResultSharding(op, shardings[res], mesh);
      if (!rs.ok())
        return rs.status();
      std::vector<const HostTensor *> got;
      for (int64_t r = 0; r < numRanks; ++r)
        got.push_back(&ranks[r].entries[i].values[res]);
      std::optional<ShardedMismatch> m =
          compareResult(op, res, *rs, mesh, got, want.values[res], tolerance);
      ++comparison.valuesCompared;
      if (m) {
        m->traceId = id;
        comparison.mismatch = std::move(*m);
        return comparison;
      }
    }
  }
  return comparison;
}

} // namespace omni::reference
