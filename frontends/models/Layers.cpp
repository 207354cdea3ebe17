//===- Layers.cpp - building blocks shared by the diffusers models --------===//

#include "frontends/models/Layers.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>

namespace omni::fe::layers {

Tensor timestepSinusoids(const Tensor &t, int64_t dim, bool flipSinToCos,
                         double downscaleFreqShift) {
  int64_t half = dim / 2;
  // float32 like torch: exponent = -log(10000) * arange(half) / (half - s).
  std::vector<float> freqs(half);
  float logPeriod = -std::log(10000.0f);
  for (int64_t i = 0; i < half; ++i) {
    float exponent = logPeriod * static_cast<float>(i);
    exponent = exponent / static_cast<float>(half - downscaleFreqShift);
    freqs[i] = std::exp(exponent);
  }
  Graph &g = t.graph();
  int64_t b = t.dim(0);
  Tensor f = g.constant({half}, freqs).broadcastInDim({b, half}, {1});
  Tensor arg = t.broadcastInDim({b, half}, {0}) * f;
  Tensor s = sin(arg), c = cos(arg);
  Tensor emb = flipSinToCos ? concat({c, s}, 1) : concat({s, c}, 1);
  // An odd dim gets a zero column, as diffusers pads.
  return dim % 2 ? concat({emb, g.full({b, 1}, 0.0)}, 1) : emb;
}

Tensor timestepEmbedding(Module m, const Tensor &x, int64_t dim) {
  return m.linear("linear_2", silu(m.linear("linear_1", x, dim)), dim);
}

Tensor sincosPosEmbed2d(Graph &g, int64_t embedDim, int64_t gridSize,
                        double baseSize, double interpolationScale, int64_t top,
                        int64_t left, int64_t h, int64_t w) {
  int64_t quarter = embedDim / 4; // each of the two halves: sin | cos
  std::vector<double> omega(quarter);
  for (int64_t i = 0; i < quarter; ++i)
    omega[i] =
        1.0 / std::pow(10000.0, static_cast<double>(i) / (embedDim / 2 / 2.0));
  // Grid coordinates are float32 in diffusers (arange(...) / (n / base) /
  // interpolation_scale); the outer product and sin/cos are float64.
  auto coord = [&](int64_t i) {
    float v = static_cast<float>(i) /
              static_cast<float>(static_cast<double>(gridSize) / baseSize);
    return static_cast<double>(v / static_cast<float>(interpolationScale));
  };
  std::vector<float> values;
  values.reserve(h * w * embedDim);
  for (int64_t r = top; r < top + h; ++r)
    for (int64_t c = left; c < left + w; ++c) {
      // diffusers' meshgrid(grid_w, grid_h, indexing="xy") puts the column
      // coordinate first: [sin(c w), cos(c w), sin(r w), cos(r w)].
      for (double pos : {coord(c), coord(r)}) {
        for (int64_t i = 0; i < quarter; ++i)
          values.push_back(static_cast<float>(std::sin(pos * omega[i])));
        for (int64_t i = 0; i < quarter; ++i)
          values.push_back(static_cast<float>(std::cos(pos * omega[i])));
      }
    }
  return g.constant({1, h * w, embedDim}, values);
}

Tensor patchEmbed(Module m, const Tensor &x, int64_t dim, int64_t patch) {
  Tensor y = m.conv2d("proj", x, dim, patch, patch, 0); // [B, D, h, w]
  int64_t b = y.dim(0), tokens = y.dim(2) * y.dim(3);
  return y.reshape({b, dim, tokens}).transpose({0, 2, 1});
}

Tensor unpatchify(const Tensor &x, int64_t h, int64_t w, int64_t patch,
                  int64_t channels) {
  int64_t b = x.dim(0);
  Tensor y = x.reshape({b, h, w, patch, patch, channels})
                 .transpose({0, 5, 1, 3, 2, 4});
  return y.reshape({b, channels, h * patch, w * patch});
}

Tensor splitHeads(const Tensor &x, int64_t heads) {
  int64_t b = x.dim(0), s = x.dim(1), d = x.dim(2) / heads;
  return x.reshape({b, s, heads, d}).transpose({0, 2, 1, 3});
}

Tensor mergeHeads(const Tensor &x) {
  int64_t b = x.dim(0), h = x.dim(1), s = x.dim(2), d = x.dim(3);
  return x.transpose({0, 2, 1, 3}).reshape({b, s, h * d});
}

Tensor keyPaddingMask(const Tensor &valid, int64_t queries) {
  int64_t b = valid.dim(0), sk = valid.dim(1);
  Tensor additive = (valid - 1.0) * 1e30; // 0 or -1e30 for a 0/1 mask
  return additive.broadcastInDim({b, 1, queries, sk}, {0, 3});
}

Tensor feedForward(Module m, const Tensor &x, int64_t mult) {
  int64_t dim = x.dim(-1);
  Tensor h = gelu(m.linear("net.0.proj", x, dim * mult), /*tanh=*/true);
  return m.linear("net.2", h, dim);
}

Tensor modulate(const Tensor &x, const Tensor &shift, const Tensor &scale) {
  Shape s = x.shape();
  return x * (1.0 + scale.broadcastInDim(s, {0, 2})) +
         shift.broadcastInDim(s, {0, 2});
}

RotaryTable rotaryTable(const std::vector<std::vector<int64_t>> &positions,
                        const std::vector<int64_t> &axesDims, double theta) {
  // torch: 1 / pow(theta, arange(0, dim, 2).float() / dim), all float32.
  std::vector<float> inv;
  for (int64_t dim : axesDims)
    for (int64_t k = 0; k < dim / 2; ++k) {
      float e = static_cast<float>(2 * k) / static_cast<float>(dim);
      inv.push_back(1.0f / static_cast<float>(std::pow(theta, double(e))));
    }
  RotaryTable t;
  t.tokens = static_cast<int64_t>(positions.size());
  t.half = static_cast<int64_t>(inv.size());
  t.cos.reserve(t.tokens * t.half);
  t.sin.reserve(t.tokens * t.half);
  for (const std::vector<int64_t> &pos : positions) {
    size_t j = 0;
    for (size_t a = 0; a < axesDims.size(); ++a)
      for (int64_t k = 0; k < axesDims[a] / 2; ++k, ++j) {
        float angle = static_cast<float>(pos[a]) * inv[j];
        t.cos.push_back(static_cast<float>(std::cos(double(angle))));
        t.sin.push_back(static_cast<float>(std::sin(double(angle))));
      }
  }
  return t;
}

std::pair<Tensor, Tensor> rotaryConstants(Graph &g, const RotaryTable &table) {
  return {g.constant({table.tokens, table.half}, table.cos),
          g.constant({table.tokens, table.half}, table.sin)};
}

Tensor applyRotary(const Tensor &x, const Tensor &cos, const Tensor &sin) {
  Shape s = x.shape(); // B, H, S, D
  int64_t half = s[3] / 2;
  Shape pairs = {s[0], s[1], s[2], half, 1};
  Tensor xp = x.reshape({s[0], s[1], s[2], half, 2});
  Tensor re = xp.slice(4, 0, 1), im = xp.slice(4, 1, 2);
  Tensor c = cos.reshape({s[2], half, 1}).broadcastInDim(pairs, {2, 3, 4});
  Tensor sn = sin.reshape({s[2], half, 1}).broadcastInDim(pairs, {2, 3, 4});
  return concat({re * c - im * sn, re * sn + im * c}, 4).reshape(s);
}

RecomputedBlock::RecomputedBlock(Graph &g, bool enabled)
    : g_(g), enabled_(enabled) {
  if (!enabled)
    return;
  mlir::OpBuilder &b = g.builder();
  block_ = b.getInsertionBlock();
  mlir::Block::iterator ip = b.getInsertionPoint();
  before_ = ip == block_->begin() ? nullptr : &*std::prev(ip);
}

std::vector<Tensor>
RecomputedBlock::finish(const std::string &name,
                        const std::vector<Tensor> &outputs) {
  if (!enabled_)
    return outputs;
  mlir::OpBuilder &b = g_.builder();
  if (b.getInsertionBlock() != block_)
    llvm::report_fatal_error("RecomputedBlock: the insertion block changed");
  mlir::Block::iterator first =
      before_ ? std::next(before_->getIterator()) : block_->begin();
  std::vector<mlir::Operation *> ops;
  for (auto it = first; it != b.getInsertionPoint(); ++it)
    ops.push_back(&*it);
  if (ops.empty())
    return outputs;
  llvm::DenseSet<mlir::Operation *> inside(ops.begin(), ops.end());
  // Whether `v` is defined by one of the block's ops or inside one.
  auto definedInside = [&](mlir::Value v) {
    mlir::Operation *owner = v.getDefiningOp();
    if (!owner)
      owner = llvm::cast<mlir::BlockArgument>(v).getOwner()->getParentOp();
    mlir::Operation *top =
        owner ? block_->findAncestorOpInBlock(*owner) : nullptr;
    return top && inside.contains(top);
  };
  // Values from outside, in order of first use; constants are cloned in.
  llvm::SetVector<mlir::Value> inputs;
  llvm::SetVector<mlir::Operation *> constants;
  for (mlir::Operation *op : ops)
    op->walk([&](mlir::Operation *nested) {
      for (mlir::Value v : nested->getOperands()) {
        if (definedInside(v))
          continue;
        mlir::Operation *def = v.getDefiningOp();
        if (def && def->hasTrait<mlir::OpTrait::ConstantLike>())
          constants.insert(def);
        else
          inputs.insert(v);
      }
    });
  // Outputs from outside the block pass by it.
  llvm::SmallVector<mlir::Value> results;
  llvm::SmallVector<mlir::Type> argTypes, resultTypes;
  std::vector<bool> returned;
  for (const Tensor &t : outputs)
    if (returned.push_back(definedInside(t.value())); returned.back()) {
      results.push_back(t.value());
      resultTypes.push_back(t.value().getType());
    }
  for (mlir::Value v : inputs)
    argTypes.push_back(v.getType());

  auto outer = llvm::dyn_cast<mlir::func::FuncOp>(block_->getParentOp());
  if (!outer)
    llvm::report_fatal_error("RecomputedBlock: not inside a func.func");
  // After the enclosing function and the blocks outlined from it before,
  // so that the module reads in the order it was built.
  std::string prefix = (outer.getSymName() + ".").str();
  mlir::Operation *after = outer;
  for (mlir::Operation *next = after->getNextNode(); next;
       next = next->getNextNode()) {
    auto fn = llvm::dyn_cast<mlir::func::FuncOp>(next);
    if (!fn || !fn.getSymName().starts_with(prefix))
      break;
    after = next;
  }
  mlir::OpBuilder fb(&g_.context());
  fb.setInsertionPointAfter(after);
  auto fn = mlir::func::FuncOp::create(
      fb, g_.loc(), (outer.getSymName() + "." + name).str(),
      fb.getFunctionType(argTypes, resultTypes));
  fn.setPrivate();
  fn.setNoInline(true);
  fn->setAttr("omni.recompute", fb.getUnitAttr());
  mlir::Block *entry = fn.addEntryBlock();
  fb.setInsertionPointToEnd(entry);
  mlir::IRMapping mapping;
  for (mlir::Operation *c : constants)
    mapping.map(c->getResults(), fb.clone(*c)->getResults());
  for (auto [v, arg] : llvm::zip(inputs, entry->getArguments()))
    mapping.map(v, arg);
  for (mlir::Operation *op : ops)
    op->moveBefore(entry, entry->end());
  for (mlir::Operation *op : ops)
    op->walk([&](mlir::Operation *nested) {
      for (mlir::OpOperand &use : nested->getOpOperands())
        if (mlir::Value mapped = mapping.lookupOrNull(use.get()))
          use.set(mapped);
    });
  mlir::func::ReturnOp::create(fb, g_.loc(), results);

  llvm::SmallVector<mlir::Value> args(inputs.begin(), inputs.end());
  auto call = mlir::func::CallOp::create(b, g_.loc(), fn, args);
  // Nothing outside may read the block's values but through the call.
  for (mlir::Operation *op : ops)
    for (mlir::Value r : op->getResults())
      for (mlir::Operation *user : r.getUsers())
        if (!fn->isAncestor(user))
          llvm::report_fatal_error(
              "RecomputedBlock: a value of the block is used outside it");
  std::vector<Tensor> out;
  for (size_t i = 0, next = 0; i < outputs.size(); ++i)
    out.push_back(returned[i] ? Tensor(&g_, call.getResult(next++))
                              : outputs[i]);
  return out;
}

} // namespace omni::fe::layers
