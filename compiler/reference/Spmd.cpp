//===- Spmd.cpp - N simulated ranks of an SPMD program ----------*- C++ -*-===//
//
// evaluateSpmd and shardArguments (Evaluator.h) and the World (Interpreter.h):
// each rank is an Interpreter on its own thread; collectives meet on one
// channel per group (the list of its world ranks), where every member posts
// its operand for round k of that channel and reads everyone's once all
// have posted. One mutex guards the world; waits never time out because a
// wait that cannot complete is detected (a member returned, or every live
// rank waits) and aborts the world with a message naming the ranks.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Interpreter.h"

#include "dialects/omni/OmniOps.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/thread.h"

using namespace mlir;
namespace om = mlir::omni;

namespace omni::reference {
namespace detail {

int64_t MeshGroups::numRanks() const {
  int64_t n = 1;
  for (int64_t s : shape)
    n *= s;
  return n;
}

std::vector<int64_t> MeshGroups::groupOf(llvm::ArrayRef<std::string> groupAxes,
                                         int64_t rank,
                                         int64_t *groupRank) const {
  // The loader's MeshInfo::groupOf: coordinates row-major over the mesh,
  // group rank row-major over `groupAxes` in the listed order, color from
  // the other axes.
  auto coordinates = [&](int64_t r) {
    std::vector<int64_t> c(shape.size());
    for (size_t a = shape.size(); a-- > 0;) {
      c[a] = r % shape[a];
      r /= shape[a];
    }
    return c;
  };
  auto place = [&](int64_t r, int64_t *color) {
    std::vector<int64_t> c = coordinates(r);
    std::vector<bool> inGroup(shape.size());
    int64_t position = 0;
    for (const std::string &axis : groupAxes) {
      size_t a = llvm::find(axes, axis) - axes.begin();
      inGroup[a] = true;
      position = position * shape[a] + c[a];
    }
    *color = 0;
    for (size_t a = 0; a < shape.size(); ++a)
      if (!inGroup[a])
        *color = *color * shape[a] + c[a];
    return position;
  };
  int64_t myColor = 0;
  *groupRank = place(rank, &myColor);
  std::vector<std::pair<int64_t, int64_t>> members; // (group rank, rank)
  for (int64_t r = 0; r < numRanks(); ++r) {
    int64_t color = 0;
    int64_t position = place(r, &color);
    if (color == myColor)
      members.push_back({position, r});
  }
  llvm::sort(members);
  std::vector<int64_t> out;
  for (auto [position, r] : members)
    out.push_back(r);
  return out;
}

absl::StatusOr<MeshGroups> meshOf(Operation *op, FlatSymbolRefAttr meshRef) {
  auto mesh = SymbolTable::lookupNearestSymbolFrom<om::MeshOp>(op, meshRef);
  if (!mesh)
    return opError(op, "refers to unknown mesh " + meshRef.getValue());
  MeshGroups groups;
  groups.axes = axisList(mesh.getAxes());
  groups.shape.assign(mesh.getShape().begin(), mesh.getShape().end());
  return groups;
}

std::vector<std::string> axisList(ArrayAttr axes) {
  std::vector<std::string> names;
  for (Attribute a : axes)
    if (auto s = dyn_cast<StringAttr>(a))
      names.push_back(s.getValue().str());
  return names;
}

//===----------------------------------------------------------------------===//
// World
//===----------------------------------------------------------------------===//

namespace {
std::string describeOp(Operation *op) {
  return absl::StrCat("'", op->getName().getStringRef().str(), "' at ",
                      locationString(op->getLoc()));
}
std::string rankList(const std::vector<int64_t> &ranks) {
  return absl::StrCat("[", absl::StrJoin(ranks, ", "), "]");
}
} // namespace

World::World(int64_t numRanks)
    : numRanks(numRanks), finished(numRanks, false),
      waitingOn(numRanks, nullptr) {}

void World::abortLocked(std::string message) {
  if (aborted)
    return;
  aborted = true;
  abortMessage = std::move(message);
  changed.notify_all();
}

void World::checkStuckLocked() {
  if (aborted)
    return;
  // A member that returned never posts: its group's round cannot complete.
  for (auto &[members, channel] : channels)
    for (auto &[index, round] : channel.rounds) {
      if (round.posted == static_cast<int64_t>(members.size()))
        continue;
      std::vector<int64_t> waiting;
      Operation *op = nullptr;
      for (size_t g = 0; g < members.size(); ++g)
        if (round.posts[g]) {
          waiting.push_back(members[g]);
          op = round.ops[g];
        }
      for (size_t g = 0; g < members.size(); ++g)
        if (!round.posts[g] && finished[members[g]])
          return abortLocked(absl::StrCat(
              "rank ", members[g], " returned without reaching ",
              describeOp(op), ", which rank", waiting.size() == 1 ? " " : "s ",
              absl::StrJoin(waiting, ", "), " of group ", rankList(members),
              " wait", waiting.size() == 1 ? "s" : "", " on"));
    }
  // Every rank still running waits: nobody can complete a round.
  if (numBlocked > 0 && numBlocked + numFinished == numRanks) {
    std::vector<std::string> waits;
    for (int64_t r = 0; r < numRanks; ++r)
      if (waitingOn[r])
        waits.push_back(
            absl::StrCat("rank ", r, " on ", describeOp(waitingOn[r])));
    abortLocked(absl::StrCat("the ranks wait on collectives that cannot "
                             "complete (a collective reached by only part "
                             "of its group): ",
                             absl::StrJoin(waits, "; ")));
  }
}

absl::StatusOr<std::vector<HostTensor>>
World::exchange(Operation *op, int64_t rank,
                const std::vector<int64_t> &members, int64_t groupRank,
                const HostTensor &value) {
  const int64_t size = static_cast<int64_t>(members.size());
  auto post = std::make_shared<const HostTensor>(value);
  std::unique_lock<std::mutex> lock(mutex);
  if (aborted)
    return absl::AbortedError(abortMessage);
  Channel &channel = channels[members];
  if (channel.nextRound.empty())
    channel.nextRound.assign(size, 0);
  int64_t index = channel.nextRound[groupRank]++;
  Round &round = channel.rounds[index];
  if (round.posts.empty()) {
    round.posts.resize(size);
    round.ops.resize(size, nullptr);
  }
  round.posts[groupRank] = std::move(post);
  round.ops[groupRank] = op;
  if (++round.posted == size) {
    // The waiters are running again as of now (see checkStuckLocked).
    numBlocked -= round.blocked;
    round.blocked = 0;
    changed.notify_all();
  } else {
    ++round.blocked;
    ++numBlocked;
    waitingOn[rank] = op;
    checkStuckLocked();
    changed.wait(lock, [&] { return aborted || round.posted == size; });
    waitingOn[rank] = nullptr;
    if (round.posted != size)
      return absl::AbortedError(abortMessage);
  }
  // Every member posted; they must have reached the same collective.
  for (int64_t g = 0; g < size; ++g)
    if (round.ops[g] != round.ops[0]) {
      abortLocked(absl::StrCat("the ranks of group ", rankList(members),
                               " reached different collectives: rank ",
                               members[0], " ", describeOp(round.ops[0]),
                               ", rank ", members[g], " ",
                               describeOp(round.ops[g])));
      return absl::AbortedError(abortMessage);
    }
  std::vector<HostTensor> values;
  values.reserve(size);
  for (const auto &p : round.posts)
    values.push_back(*p);
  if (++round.read == size)
    channel.rounds.erase(index);
  return values;
}

void World::fail(int64_t rank, const absl::Status &status) {
  std::lock_guard<std::mutex> lock(mutex);
  if (!finished[rank]) {
    finished[rank] = true;
    ++numFinished;
  }
  std::string message = absl::StrCat("rank ", rank, ": ", status.message());
  // Aborted: the rank saw the world's abort; not a failure of its own.
  if (status.code() != absl::StatusCode::kAborted &&
      (rootRank < 0 || rank < rootRank)) {
    rootRank = rank;
    rootMessage = message;
  }
  abortLocked(std::move(message));
}

void World::finish(int64_t rank) {
  std::lock_guard<std::mutex> lock(mutex);
  finished[rank] = true;
  ++numFinished;
  checkStuckLocked();
}

absl::Status World::failure() const {
  std::lock_guard<std::mutex> lock(mutex);
  if (rootRank >= 0)
    return absl::InvalidArgumentError(rootMessage);
  return aborted ? absl::InvalidArgumentError(abortMessage) : absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// evaluateSpmd
//===----------------------------------------------------------------------===//

namespace {
/// Each rank is a thread with its own stack: a bound that keeps the
/// reservation reasonable.
constexpr int64_t kMaxRanks = 256;

/// Every mesh of the module must have the world's ranks (one rank runs
/// any program: its groups of more than one rank are errors at the op).
absl::Status checkMeshes(ModuleOp module, int64_t numRanks) {
  if (numRanks == 1)
    return absl::OkStatus();
  for (om::MeshOp mesh : module.getOps<om::MeshOp>()) {
    int64_t size = 1;
    for (int64_t s : mesh.getShape())
      size *= s;
    if (size != numRanks)
      return absl::InvalidArgumentError(absl::StrCat(
          locationString(mesh.getLoc()), ": mesh @", mesh.getSymName().str(),
          " has ", size, " ranks but the evaluation runs ", numRanks));
  }
  return absl::OkStatus();
}
} // namespace

absl::StatusOr<std::vector<Results>>
evaluateSpmdTraced(ModuleOp module, llvm::StringRef name, int64_t numRanks,
                   llvm::ArrayRef<Results> perRankArgs,
                   const EvalOptions &options, std::vector<TraceLog> *logs) {
  if (numRanks < 1 || numRanks > kMaxRanks)
    return absl::InvalidArgumentError(
        absl::StrCat("the number of ranks must be in [1, ", kMaxRanks,
                     "], found ", numRanks));
  if (static_cast<int64_t>(perRankArgs.size()) != numRanks)
    return absl::InvalidArgumentError(
        absl::StrCat("evaluating ", numRanks, " ranks needs ", numRanks,
                     " argument lists, found ", perRankArgs.size()));
  if (absl::Status status = checkMeshes(module, numRanks); !status.ok())
    return status;
  func::FuncOp fn;
  for (int64_t r = 0; r < numRanks; ++r) {
    absl::StatusOr<func::FuncOp> f =
        checkedFunction(module, name, perRankArgs[r]);
    if (!f.ok())
      return numRanks == 1 ? f.status()
                           : absl::Status(f.status().code(),
                                          absl::StrCat("rank ", r, ": ",
                                                       f.status().message()));
    fn = *f;
  }
  if (logs) {
    logs->clear();
    logs->resize(numRanks);
  }
  std::vector<Results> results(numRanks);
  // One rank is the single-process evaluation (1-rank groups only).
  if (numRanks == 1) {
    Interpreter interpreter(module, options);
    if (logs)
      interpreter.setTraceLog(&(*logs)[0]);
    absl::StatusOr<Results> r =
        interpreter.callFunction(fn, perRankArgs[0], nullptr);
    if (!r.ok())
      return r.status();
    results[0] = std::move(*r);
    return results;
  }
  World world(numRanks);
  auto runRank = [&](int64_t r) {
    Interpreter interpreter(module, options);
    interpreter.setRank(&world, r);
    if (logs)
      interpreter.setTraceLog(&(*logs)[r]);
    absl::StatusOr<Results> out =
        interpreter.callFunction(fn, perRankArgs[r], nullptr);
    if (!out.ok()) {
      world.fail(r, out.status());
      return;
    }
    results[r] = std::move(*out);
    world.finish(r);
  };
  {
    // The interpreter recurses per nesting level: give each rank the stack
    // the tools run on (reserved, committed as used).
    constexpr unsigned kRankStackBytes = 256u << 20;
    std::vector<llvm::thread> threads;
    threads.reserve(numRanks);
    for (int64_t r = 0; r < numRanks; ++r)
      threads.emplace_back(std::optional<unsigned>(kRankStackBytes), runRank,
                           r);
    for (llvm::thread &t : threads)
      t.join();
  }
  if (absl::Status status = world.failure(); !status.ok())
    return status;
  return results;
}

} // namespace detail

absl::StatusOr<std::vector<std::vector<HostTensor>>>
evaluateSpmd(ModuleOp module, llvm::StringRef name, int64_t numRanks,
             llvm::ArrayRef<std::vector<HostTensor>> perRankArgs,
             const EvalOptions &options) {
  return detail::evaluateSpmdTraced(module, name, numRanks, perRankArgs,
                                    options, nullptr);
}

absl::StatusOr<std::vector<std::vector<HostTensor>>>
shardArguments(ModuleOp module, llvm::StringRef name, int64_t numRanks,
               llvm::ArrayRef<HostTensor> globalArgs) {
  using namespace detail;
  if (numRanks < 1 || numRanks > kMaxRanks)
    return absl::InvalidArgumentError(
        absl::StrCat("the number of ranks must be in [1, ", kMaxRanks,
                     "], found ", numRanks));
  if (absl::Status status = checkMeshes(module, numRanks); !status.ok())
    return status;
  auto fn = module.lookupSymbol<func::FuncOp>(name);
  if (!fn)
    // checkedFunction names the functions the module has.
    return checkedFunction(module, name, globalArgs).status();
  FunctionType type = fn.getFunctionType();
  if (globalArgs.size() != type.getNumInputs())
    return absl::InvalidArgumentError(absl::StrCat(
        "function @", name.str(), " takes ", type.getNumInputs(), " argument",
        type.getNumInputs() == 1 ? "" : "s", ", found ", globalArgs.size()));
  std::vector<std::vector<HostTensor>> perRank(
      numRanks, std::vector<HostTensor>(globalArgs.begin(), globalArgs.end()));
  for (unsigned i = 0; i < type.getNumInputs(); ++i) {
    auto sharding = fn.getArgAttrOfType<om::ShardingAttr>(i, "omni.sharding");
    if (!sharding)
      continue;
    std::string where = absl::StrCat("argument #", i, " of @", name.str());
    Type globalType = type.getInput(i);
    if (auto g = fn.getArgAttrOfType<TypeAttr>(i, "omni.global_type"))
      globalType = g.getValue();
    absl::StatusOr<ValueType> global = valueTypeOf(globalType);
    absl::StatusOr<ValueType> local = valueTypeOf(type.getInput(i));
    if (!global.ok() || !local.ok())
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": ",
          (global.ok() ? local.status() : global.status()).message()));
    const HostTensor &arg = globalArgs[i];
    if (arg.dtype() != global->dtype || arg.shape() != global->shape)
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": expected the global ", typeString(globalType),
                       ", found ", arg.typeString()));
    if (local->shape.size() != global->shape.size() ||
        sharding.getDims().size() != global->shape.size())
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": omni.sharding, local type ",
                       typeString(type.getInput(i)), " and global type ",
                       typeString(globalType), " disagree on the rank"));
    absl::StatusOr<MeshGroups> mesh = meshOf(fn, sharding.getMesh());
    if (!mesh.ok())
      return mesh.status();
    int64_t dim = -1;
    std::vector<std::string> axes;
    for (size_t d = 0; d < global->shape.size(); ++d) {
      std::vector<std::string> a;
      for (llvm::StringRef s : sharding.getAxes(d))
        a.push_back(s.str());
      if (a.empty())
        continue;
      if (dim >= 0)
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": omni.sharding splits dimensions ", dim,
                         " and ", d, " (expected at most one)"));
      for (const std::string &axis : a)
        if (llvm::find(mesh->axes, axis) == mesh->axes.end())
          return absl::InvalidArgumentError(absl::StrCat(
              where, ": mesh @", sharding.getMesh().getValue().str(),
              " has no axis '", axis, "'"));
      dim = static_cast<int64_t>(d);
      axes = std::move(a);
    }
    for (size_t d = 0; d < global->shape.size(); ++d)
      if (static_cast<int64_t>(d) != dim && local->shape[d] != global->shape[d])
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": local type ", typeString(type.getInput(i)),
                         " differs from the global ", typeString(globalType),
                         " in unsharded dimension ", d));
    if (dim < 0)
      continue;
    if (mesh->numRanks() != numRanks)
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": mesh @", sharding.getMesh().getValue().str(), " has ",
          mesh->numRanks(), " ranks but the evaluation runs ", numRanks));
    int64_t block = local->shape[dim], total = global->shape[dim];
    for (int64_t r = 0; r < numRanks; ++r) {
      int64_t k = 0;
      std::vector<int64_t> members = mesh->groupOf(axes, r, &k);
      if (block * static_cast<int64_t>(members.size()) < total)
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": ", members.size(), " blocks of ", block,
                         " cannot hold dimension ", dim, " of size ", total));
      HostTensor out(local->dtype, local->shape);
      std::vector<int64_t> strides = stridesOf(global->shape);
      forEachIndex(local->shape, [&](llvm::ArrayRef<int64_t> index,
                                     int64_t position) {
        int64_t row = k * block + index[dim];
        if (row >= total)
          return; // padding stays zero
        int64_t from = 0;
        for (size_t d = 0; d < index.size(); ++d)
          from +=
              (static_cast<int64_t>(d) == dim ? row : index[d]) * strides[d];
        copyElement(arg, from, out, position);
      });
      perRank[r][i] = std::move(out);
    }
  }
  return perRank;
}

} // namespace omni::reference
