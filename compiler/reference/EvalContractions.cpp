//===- EvalContractions.cpp - matmul, conv2d, attention, linear -*- C++ -*-===//
//
// The ops backends hand to libraries (GEMM, convolution, fused attention),
// evaluated by their definitions with plain loops. Every dot product
// accumulates in double and is rounded once (in float32 mode), which is at
// least as accurate as any backend's f32 accumulation and independent of
// summation order; integer matmul wraps.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Interpreter.h"

#include "dialects/omni/OmniOps.h"

#include <cmath>
#include <limits>

using namespace mlir;
namespace om = mlir::omni;

namespace omni::reference::detail {
namespace {

absl::StatusOr<Results> evalMatmul(om::MatmulOp op, Interpreter &interp) {
  const HostTensor &lhs = interp.get(op.getLhs());
  const HostTensor &rhs = interp.get(op.getRhs());
  HostTensor out = interp.zerosForResult(op, 0);
  if (lhs.rank() < 2 || rhs.rank() < 2 || out.rank() < 2)
    return opError(op, "needs operands of rank >= 2");
  bool tl = op.getTransposeLhs(), tr = op.getTransposeRhs();
  int64_t rl = lhs.rank(), rr = rhs.rank(), ro = out.rank();
  int64_t m = out.shape()[ro - 2], n = out.shape()[ro - 1];
  int64_t k = tl ? lhs.shape()[rl - 2] : lhs.shape()[rl - 1];
  int64_t rhsK = tr ? rhs.shape()[rr - 1] : rhs.shape()[rr - 2];
  if (k != rhsK)
    return opError(op, "contracts " + llvm::Twine(k) + " with " +
                           llvm::Twine(rhsK) + " elements");
  int64_t batch = out.numElements() / std::max<int64_t>(m * n, 1);
  if (m * n == 0)
    return Results{std::move(out)};
  bool sharedRhs = rr == 2;
  if (lhs.numElements() != batch * m * k ||
      rhs.numElements() != (sharedRhs ? 1 : batch) * k * n)
    return opError(op, "operands " + lhs.typeString() + " and " +
                           rhs.typeString() + " do not produce " +
                           out.typeString());
  for (int64_t b = 0; b < batch; ++b) {
    int64_t lo = b * m * k, ro2 = sharedRhs ? 0 : b * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        int64_t position = (b * m + i) * n + j;
        if (out.isFloat()) {
          double acc = 0;
          for (int64_t p = 0; p < k; ++p)
            acc += lhs.floats()[lo + (tl ? p * m + i : i * k + p)] *
                   rhs.floats()[ro2 + (tr ? j * k + p : p * n + j)];
          out.floats()[position] = acc;
        } else {
          uint64_t acc = 0;
          for (int64_t p = 0; p < k; ++p)
            acc += static_cast<uint64_t>(
                       lhs.ints()[lo + (tl ? p * m + i : i * k + p)]) *
                   static_cast<uint64_t>(
                       rhs.ints()[ro2 + (tr ? j * k + p : p * n + j)]);
          out.ints()[position] = static_cast<int64_t>(acc);
        }
      }
  }
  return Results{std::move(out)};
}

absl::StatusOr<Results> evalConv2d(om::Conv2dOp op, Interpreter &interp) {
  const HostTensor &in = interp.get(op.getInput());
  const HostTensor &w = interp.get(op.getFilter());
  HostTensor out = interp.zerosForResult(op, 0);
  ArrayRef<int64_t> stride = op.getStrides(), pad = op.getPadding(),
                    dil = op.getDilation();
  if (in.rank() != 4 || w.rank() != 4 || out.rank() != 4 ||
      stride.size() != 2 || pad.size() != 2 || dil.size() != 2)
    return opError(op, "needs rank-4 operands and two strides, paddings and "
                       "dilations");
  int64_t n = in.shape()[0], c = in.shape()[1], h = in.shape()[2],
          wd = in.shape()[3];
  int64_t o = w.shape()[0], kh = w.shape()[2], kw = w.shape()[3];
  int64_t oh = out.shape()[2], ow = out.shape()[3];
  if (w.shape()[1] != c || out.shape()[0] != n || out.shape()[1] != o)
    return opError(op, "input " + in.typeString() + " and filter " +
                           w.typeString() + " do not produce " +
                           out.typeString());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t x = 0; x < ow; ++x) {
          double acc = 0;
          for (int64_t ic = 0; ic < c; ++ic)
            for (int64_t ky = 0; ky < kh; ++ky) {
              int64_t iy = y * stride[0] - pad[0] + ky * dil[0];
              if (iy < 0 || iy >= h)
                continue;
              for (int64_t kx = 0; kx < kw; ++kx) {
                int64_t ix = x * stride[1] - pad[1] + kx * dil[1];
                if (ix < 0 || ix >= wd)
                  continue;
                acc += in.floats()[((b * c + ic) * h + iy) * wd + ix] *
                       w.floats()[((oc * c + ic) * kh + ky) * kw + kx];
              }
            }
          out.floats()[((b * o + oc) * oh + y) * ow + x] = acc;
        }
  return Results{std::move(out)};
}

/// An attention mask's element for (batch bi, head hi, query i, key j): its
/// size-1 batch and head dimensions broadcast.
double maskAt(const HostTensor &mask, int64_t bi, int64_t hi, int64_t i,
              int64_t j, int64_t sq, int64_t sk) {
  int64_t mb = mask.shape()[0] == 1 ? 0 : bi;
  int64_t mh = mask.shape()[1] == 1 ? 0 : hi;
  return mask.floats()[((mb * mask.shape()[1] + mh) * sq + i) * sk + j];
}

absl::StatusOr<Results> evalAttention(om::AttentionOp op, Interpreter &interp) {
  const HostTensor &q = interp.get(op.getQuery());
  const HostTensor &k = interp.get(op.getKey());
  const HostTensor &v = interp.get(op.getValue());
  const HostTensor *mask = op.getMask() ? &interp.get(op.getMask()) : nullptr;
  HostTensor out = interp.zerosForResult(op, 0);
  if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4 || out.rank() != 4 ||
      (mask && mask->rank() != 4))
    return opError(op, "needs rank-4 query, key, value and mask");
  int64_t b = q.shape()[0], h = q.shape()[1], sq = q.shape()[2],
          d = q.shape()[3];
  int64_t sk = k.shape()[2], dv = v.shape()[3];
  if (k.shape()[3] != d || v.shape()[2] != sk || out.shape()[3] != dv)
    return opError(op, "query " + q.typeString() + ", key " + k.typeString() +
                           " and value " + v.typeString() + " do not agree");
  double scale = op.getScale() ? op.getScale()->convertToDouble()
                               : 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> scores(static_cast<size_t>(sk));
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t hi = 0; hi < h; ++hi)
      for (int64_t i = 0; i < sq; ++i) {
        const double *qrow = &q.floats()[((bi * h + hi) * sq + i) * d];
        double maxScore = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < sk; ++j) {
          const double *krow = &k.floats()[((bi * h + hi) * sk + j) * d];
          double s = 0;
          for (int64_t p = 0; p < d; ++p)
            s += qrow[p] * krow[p];
          s *= scale;
          if (mask)
            s += maskAt(*mask, bi, hi, i, j, sq, sk);
          scores[j] = s;
          maxScore = std::max(maxScore, s);
        }
        double total = 0;
        for (double &s : scores) {
          s = std::exp(s - maxScore);
          total += s;
        }
        double *orow = &out.floats()[((bi * h + hi) * sq + i) * dv];
        for (int64_t j = 0; j < sk; ++j) {
          const double *vrow = &v.floats()[((bi * h + hi) * sk + j) * dv];
          double p = scores[j] / total;
          for (int64_t e = 0; e < dv; ++e)
            orow[e] += p * vrow[e];
        }
      }
  return Results{std::move(out)};
}

/// The op's definition: P = softmax(q k^T scale + mask), dS = P (dO v^T -
/// rowsum(dO output)), dq = dS k scale, dk = dS^T q scale, dv = P^T dO.
absl::StatusOr<Results> evalAttentionGrad(om::AttentionGradOp op,
                                          Interpreter &interp) {
  const HostTensor &q = interp.get(op.getQuery());
  const HostTensor &k = interp.get(op.getKey());
  const HostTensor &v = interp.get(op.getValue());
  const HostTensor &o = interp.get(op.getOutput());
  const HostTensor &dO = interp.get(op.getDOutput());
  const HostTensor *mask = op.getMask() ? &interp.get(op.getMask()) : nullptr;
  HostTensor dq = interp.zerosForResult(op, 0);
  HostTensor dk = interp.zerosForResult(op, 1);
  HostTensor dv = interp.zerosForResult(op, 2);
  if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4 || o.rank() != 4 ||
      dO.rank() != 4 || (mask && mask->rank() != 4))
    return opError(op, "needs rank-4 operands");
  const int64_t heads = q.shape()[1], bh = q.shape()[0] * heads,
                sq = q.shape()[2], d = q.shape()[3], sk = k.shape()[2],
                dvs = v.shape()[3];
  if (k.shape()[3] != d || v.shape()[2] != sk || o.shape()[3] != dvs ||
      dO.shape() != o.shape())
    return opError(op, "query " + q.typeString() + ", key " + k.typeString() +
                           ", value " + v.typeString() + " and output " +
                           o.typeString() + " do not agree");
  const double scale = op.getScale() ? op.getScale()->convertToDouble()
                                     : 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> p(static_cast<size_t>(sk));
  for (int64_t b = 0; b < bh; ++b)
    for (int64_t i = 0; i < sq; ++i) {
      const double *qi = &q.floats()[(b * sq + i) * d];
      const double *dOi = &dO.floats()[(b * sq + i) * dvs];
      const double *oi = &o.floats()[(b * sq + i) * dvs];
      double maxScore = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < sk; ++j) {
        const double *kj = &k.floats()[(b * sk + j) * d];
        double s = 0;
        for (int64_t e = 0; e < d; ++e)
          s += qi[e] * kj[e];
        p[j] = s * scale;
        if (mask)
          p[j] += maskAt(*mask, b / heads, b % heads, i, j, sq, sk);
        maxScore = std::max(maxScore, p[j]);
      }
      double total = 0;
      for (double &x : p)
        total += (x = std::exp(x - maxScore));
      double rowDot = 0;
      for (int64_t e = 0; e < dvs; ++e)
        rowDot += dOi[e] * oi[e];
      for (int64_t j = 0; j < sk; ++j) {
        const double pij = p[j] / total;
        const double *vj = &v.floats()[(b * sk + j) * dvs];
        double dp = 0;
        for (int64_t e = 0; e < dvs; ++e) {
          dp += dOi[e] * vj[e];
          dv.floats()[(b * sk + j) * dvs + e] += pij * dOi[e];
        }
        const double ds = pij * (dp - rowDot) * scale;
        const double *kj = &k.floats()[(b * sk + j) * d];
        for (int64_t e = 0; e < d; ++e) {
          dq.floats()[(b * sq + i) * d + e] += ds * kj[e];
          dk.floats()[(b * sk + j) * d + e] += ds * qi[e];
        }
      }
    }
  Results results;
  results.push_back(std::move(dq));
  results.push_back(std::move(dk));
  results.push_back(std::move(dv));
  return results;
}

/// y = x W^T (+ b) (+ scale (x A^T) B^T) over the last dimension of x.
absl::StatusOr<Results> linear(Operation *op, Interpreter &interp, Value xv,
                               Value wv, Value bv, Value av, Value lbv,
                               double scale) {
  const HostTensor &x = interp.get(xv);
  const HostTensor &w = interp.get(wv);
  HostTensor out = interp.zerosForResult(op, 0);
  if (x.rank() < 1 || w.rank() != 2)
    return opError(op, "needs an input of rank >= 1 and a rank-2 weight");
  int64_t in = w.shape()[1], outDim = w.shape()[0];
  if (x.shape().back() != in || out.shape().back() != outDim)
    return opError(op, "input " + x.typeString() + " and weight " +
                           w.typeString() + " do not produce " +
                           out.typeString());
  // A product, not elements / in: `in` may be 0.
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < x.shape().size(); ++d)
    rows *= x.shape()[d];
  const HostTensor *bias = bv ? &interp.get(bv) : nullptr;
  const HostTensor *a = av ? &interp.get(av) : nullptr;
  const HostTensor *lb = lbv ? &interp.get(lbv) : nullptr;
  int64_t rank = a ? a->shape()[0] : 0;
  std::vector<double> xa(static_cast<size_t>(rank));
  for (int64_t r = 0; r < rows; ++r) {
    const double *xrow = x.floats().data() + r * in; // in may be 0
    for (int64_t s = 0; s < rank; ++s) {
      double acc = 0;
      for (int64_t p = 0; p < in; ++p)
        acc += xrow[p] * a->floats()[s * in + p];
      xa[s] = acc;
    }
    for (int64_t o = 0; o < outDim; ++o) {
      double acc = 0;
      for (int64_t p = 0; p < in; ++p)
        acc += xrow[p] * w.floats()[o * in + p];
      if (bias)
        acc += bias->floats()[o];
      if (lb) {
        double low = 0;
        for (int64_t s = 0; s < rank; ++s)
          low += xa[s] * lb->floats()[o * rank + s];
        acc += scale * low;
      }
      out.floats()[r * outDim + o] = acc;
    }
  }
  return Results{std::move(out)};
}

} // namespace

void registerContractionHandlers(HandlerTable &table) {
  addHandler<om::MatmulOp>(table, evalMatmul);
  addHandler<om::Conv2dOp>(table, evalConv2d);
  addHandler<om::AttentionOp>(table, evalAttention);
  addHandler<om::AttentionGradOp>(table, evalAttentionGrad);
  addHandler<om::LinearOp>(table, [](om::LinearOp op, Interpreter &interp) {
    return linear(op, interp, op.getInput(), op.getWeight(), op.getBias(),
                  Value(), Value(), 0.0);
  });
  addHandler<om::LoraLinearOp>(
      table, [](om::LoraLinearOp op, Interpreter &interp) {
        return linear(op, interp, op.getInput(), op.getWeight(), op.getBias(),
                      op.getLoraA(), op.getLoraB(),
                      op.getScale().convertToDouble());
      });
}

} // namespace omni::reference::detail
