//===- Passes.td - omni passes ------------------------------*- tablegen -*-===//
//
// Every omni pass, grouped by pipeline phase (docs/architecture.md section 2). The
// pipeline that runs them in order is buildOmniPipeline() in Pipelines.cpp,
// registered as `omni-pipeline` so lit can run exactly what omnic runs.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_PASSES_TD
#define OMNI_PASSES_TD

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Resident state
//===----------------------------------------------------------------------===//

def OmniResidentStatePass
    : Pass<"omni-resident-state", "::mlir::ModuleOp"> {
  let summary = "mark the training state as persistent state slots";
  let description = [{
    An argument of a public function with `omni.state = "<name>"` reads
    state slot <name>; a result with it is stored into the slot when the
    function returns. The step.bin writer makes them Storage::State tensors
    (not inputs or outputs), so parameters and optimizer state stay in
    device buffers across calls (docs/backend.md, "Resident state").

    The pass infers the attributes for the training convention
    (docs/backend.md, "Training"):
    - a public function `(state..., seed: tensor<i64>, iteration:
      tensor<i64>, data...) -> (state'..., results...)` whose state
      arguments are all named by `omni.name` (data are trailing arguments
      named `prompt_embeds` / `pooled_prompt_embeds`, with CFG also
      `negative_prompt_embeds` / `negative_pooled_prompt_embeds`) and
      whose leading
      results have the state's types gets `omni.state = <omni.name>` on
      the state arguments and on those results;
    - a public function `(seed: tensor<i64>) -> (T...)` whose result types
      are such a state list (`@init_state`) gets the list's names on its
      results (when its results carry `omni.name`, those must be the
      names).
    A function that already has `omni.state` attributes is kept as
    written; other functions are unchanged. Errors (one line, at the
    function): a state slot with two tensor types in the module, a slot
    read or stored twice by one function, an initializer that matches the
    state of steps with different names, an `omni.state` that is not a
    non-empty string.

    Before:
    ```mlir
    func.func @train_step(%w: tensor<4xf32> {omni.name = "w"},
                          %seed: tensor<i64>, %iteration: tensor<i64>)
        -> (tensor<4xf32>, tensor<f32> {omni.name = "loss"})
    ```
    After:
    ```mlir
    func.func @train_step(%w: tensor<4xf32> {omni.name = "w", omni.state = "w"},
                          %seed: tensor<i64>, %iteration: tensor<i64>)
        -> (tensor<4xf32> {omni.state = "w"}, tensor<f32> {omni.name = "loss"})
    ```
  }];
}

//===----------------------------------------------------------------------===//
// Autodiff
//===----------------------------------------------------------------------===//

def OmniAutodiffPass : Pass<"omni-autodiff", "::mlir::ModuleOp"> {
  let summary = "expand grad / value_and_grad into reverse-mode IR";
  let description = [{
    Replaces each `omni.grad` / `omni.value_and_grad` by a call to a
    generated private function `@<callee>_grad_<wrt...>` (or
    `_value_and_grad_`) that runs the callee forward and then the adjoint
    program built from the ops' VJP rules (VJPOpInterface):

    1. clone the callee; inline every func.call in it (model calls);
    2. fully unroll every scf.for (the trip count must be static);
    3. activity analysis: a value is active when it is a float tensor that
       depends on a `wrt` argument and the loss depends on it; frozen
       weights, data and noise get no adjoint code;
    4. walk the ops backward from the loss (adjoint 1), asking each active
       op for the adjoints of its operands and summing the adjoints of
       values used several times (fan-out);
    5. return the adjoints of the `wrt` arguments (zeros for an argument
       the loss does not depend on) and remove dead code.

    An active op with no VJP rule (host_call, random numbers, integer math)
    is an error naming the op and the argument. By default every forward
    value the backward program reads is saved; `recompute` names functions
    (for example a transformer block) whose ops are instead recomputed
    right before the backward program needs them (docs/autodiff.md).

    Before:
    ```mlir
    %g = omni.grad @loss(%w, %x) wrt = [0] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    ```
    After:
    ```mlir
    %g = call @loss_grad_0(%w, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    ```
  }];
  let options = [
    ListOption<"recompute", "recompute", "std::string",
               "functions whose forward ops the backward program recomputes "
               "instead of saving (rematerialization)">
  ];
  let dependentDialects = ["::mlir::omni::OmniDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::tensor::TensorDialect"];
}

//===----------------------------------------------------------------------===//
// Lowering of composite ops
//===----------------------------------------------------------------------===//

def OmniDecomposePass : Pass<"omni-decompose"> {
  let summary = "rewrite composite ops into omni primitives";
  let description = [{
    Replaces each composite op by its documented decomposition into
    primitives, so later passes and backends see only primitives and the
    library ops (matmul, conv2d, attention, attention_grad).

    Before:
    ```mlir
    %y = omni.silu %x : tensor<4xf32>
    ```
    After:
    ```mlir
    %s = omni.logistic %x : tensor<4xf32>
    %y = omni.mul %x, %s : tensor<4xf32>
    ```
  }];
  let options = [
    Option<"decomposeLibraryOps", "decompose-library-ops", "bool",
           /*default=*/"false",
           "also decompose the ops kept for libraries (attention, "
           "attention_grad), for backends without a kernel for them and "
           "for testing">,
    Option<"decomposeAttentionGrad", "decompose-attention-grad", "bool",
           /*default=*/"false",
           "decompose omni.attention_grad (for a target without its "
           "library call; the cpu and cuda drivers have it)">
  ];
  let dependentDialects = ["::mlir::omni::OmniDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
}

//===----------------------------------------------------------------------===//
// Fusion
//===----------------------------------------------------------------------===//

def OmniShardPass : Pass<"omni-shard", "::mlir::ModuleOp"> {
  let summary = "split a program over the ranks of its omni.mesh (SPMD)";
  let description = [{
    Turns a program written for one device into the program every rank of
    the module's `omni.mesh` runs (docs/sharding.md section 3). Its input
    states how some values are split: `omni.sharding` on state arguments
    and results of public functions (parameters and optimizer moments,
    split on one dimension, padded when the ranks do not divide it) and
    `omni.shard` ops in the body (the rollout batch). The pass

    1. propagates these shardings through every op by the op's sharding
       rule (ShardingRuleOpInterface: dimensions labeled with factors;
       elementwise ops share all of theirs); a split reduction factor
       (a contraction over the batch, a sum over a split dimension) makes
       the result a partial sum that stays partial through linear ops;
    2. inserts the collectives that reconcile a value with what its user
       needs: all_gather (split -> whole), reduce_scatter / all_reduce
       (partial -> split / whole), a local slice at omni.axis_index (whole
       -> split; random numbers, broadcasts and splats are instead made
       locally, rows keyed by their global index);
    3. rewrites every type to the rank's local type.

    Non-state arguments and results stay whole (every rank gets the same
    inputs and returns the same results). The module attribute
    `omni.shard_gather` chooses where parameters used inside a loop are
    gathered: "once" (default: before the loop, kept for its duration) or
    "per-step" (inside the loop body, before each use: less memory, more
    traffic). Without an omni.mesh the pass does nothing; a function whose
    state already carries `omni.global_type` is already in per-rank form
    (an SPMD program written by hand) and is kept as it is.

    Errors (one line, at the op or function): a sharding on a non-state
    argument, more than one split dimension, a state sharded differently
    on entry and on return, a sharded 0-D tensor, several meshes, a
    function call left in the program.

    `trace` stamps every op with `omni.trace = <id>` and, after sharding,
    records each result's sharding in `omni.result_shardings` (for the
    reference evaluator's op-by-op comparison); `trace-only` stamps the ids
    and shards nothing.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
  let options = [
    Option<"trace", "trace", "bool", /*default=*/"false",
           "stamp ops with omni.trace and record result shardings">,
    Option<"traceOnly", "trace-only", "bool", /*default=*/"false",
           "stamp ops with omni.trace ids only (the unsharded reference)">,
  ];
}

def OmniSplitReductionsPass
    : Pass<"omni-split-reductions", "::mlir::func::FuncOp"> {
  let summary = "sum large reductions over the leading dimensions in two "
                "stages, so their kernels split over threads";
  let description = [{
    A kernel runs as several work items only where every value can be cut
    along its leading dimension (docs/backend.md, "Kernel ABI"); a sum over
    that dimension cannot be, so the kernel it joins runs on one thread.
    This pass rewrites a float `omni.reduce sum` of at least 2^17 elements
    whose reduced dimensions include the leading one(s), and whose result
    is not a scalar, into:

    1. the operand's rows as G groups (G <= 64, fixed by the shape: the
       leading dimension itself when it is 8..64 and the sum has other
       dimensions to reduce, else the largest divisor of the leading rows
       up to rows / 128, the operand reshaped to [G, rows / G, ...]),
       widened to f64 and summed per group: [G, kept...] f64;
    2. the G partial sums summed in f64 and cast back.

    Stage 1 keeps G as its leading dimension, so omni-fuse's kernel around
    it splits over threads; omni-fuse never puts stage 2 in the same
    kernel (a reduction of a reduced value, rule 2). The sum is the same in
    another fixed order and the partial sums stay f64, so the accumulation
    rule of float sums holds (docs/backend.md, "Reductions").

    ```mlir
    %s = omni.reduce sum %g dims = [0] : tensor<2048x256xf32> -> tensor<256xf32>
    ```
    becomes
    ```mlir
    %r = omni.reshape %g : tensor<2048x256xf32> -> tensor<16x128x256xf32>
    %w = omni.cast %r : tensor<16x128x256xf32> -> tensor<16x128x256xf64>
    %p = omni.reduce sum %w dims = [1] : tensor<16x128x256xf64> -> tensor<16x256xf64>
    %t = omni.reduce sum %p dims = [0] : tensor<16x256xf64> -> tensor<256xf64>
    %s = omni.cast %t : tensor<256xf64> -> tensor<256xf32>
    ```
  }];
}

def OmniHoistLoopScalarsPass
    : Pass<"omni-hoist-loop-scalars", "::mlir::func::FuncOp"> {
  let summary = "move scalar reads and index arithmetic that do not change "
                "across a loop's iterations out of the loop";
  let description = [{
    An integer read from a 0-D tensor (`tensor.extract`) becomes a register
    that the runtime reads from the device (a ScalarOp FromTensor, which
    synchronizes the stream), and a loop with such a read in its body cannot
    be captured as a graph (docs/backend.md, "Graphs"). The FlowGRPO train
    loop over micro-batches reads its window start that way, once per
    micro-batch, although the value is the same for all of them.

    This pass moves, out of every `scf.for`, innermost loops first:
    - `tensor.extract` of a 0-D tensor defined outside the loop (always in
      bounds, so it may run before a loop that runs no iteration);
    - speculatable, side-effect-free ops without regions whose operands are
      defined outside the loop and whose results are all scalars (index,
      integer or float: arith's index arithmetic and casts).
    - `omni.cast` of a float tensor defined outside the loop to a
      narrower 16-bit float type: in a bf16 program the rollout's denoise
      loop casts every f32 weight to bf16 at every step, a pass over all
      the weights per step. Hoisted, the copy lives across the loop, which
      costs at most the bytes of its operand (live across the loop
      anyway): 4.5 GB for SD3.5-Medium's 2.24 B parameters, which saves
      9 of 10 casts of 13.4 GB each per rollout. A hoisted cast of a
      function argument (a weight) then replaces the same casts it
      dominates (the train phase's), so each weight is cast once per
      call. Other casts are not shared that way: omni-fuse would schedule
      the later code that reads a shared value before the loop, out of
      its phase.
    Other tensor-valued ops stay where they are: moving them would make
    their buffers live across the whole loop (omni-plan-memory), with no
    bound. Values do not change: the same ops run on the same operands,
    once.

    ```mlir
    scf.for %k = %c0 to %c4 step %c1 {
      %s = tensor.extract %start[] : tensor<i64>
      %i = arith.index_cast %s : i64 to index
      %j = arith.addi %i, %k : index
      ...
    }
    ```
    becomes
    ```mlir
    %s = tensor.extract %start[] : tensor<i64>
    %i = arith.index_cast %s : i64 to index
    scf.for %k = %c0 to %c4 step %c1 {
      %j = arith.addi %i, %k : index
      ...
    }
    ```
  }];
}

def OmniMoveReshapesPass
    : Pass<"omni-move-reshapes", "::mlir::func::FuncOp"> {
  let summary = "move reshapes and narrowing casts out of chains of fusible "
                "ops, so omni-fuse can make them one kernel";
  let description = [{
    A reshape never joins a fusion region (it aliases its operand), so one
    between two fusible ops splits them into two kernels with the value
    stored between. In an attention's q, k and v paths that is the bias add
    (bf16 in, f32 out), the reshape to heads, then the per-head RMS norm,
    transposed; and after the attention the transpose back, the reshape to
    tokens, the slice and the rounding for the out projection.

    This pass moves each reshape outside a fusion region (in every block:
    function bodies and loop bodies) to an edge of its chain, where a
    reshape costs nothing:
    - up, when the value it reshapes is made, through elementwise ops read
      only by the chain and through broadcasts (rebuilt for the new shape),
      from values no region holds: arguments, library and opaque results,
      loop results, splat constants. A broadcast moves only when every
      dimension group of the reshape is either wholly broadcast or wholly
      from source dimensions of the same sizes (`[64] -> [2, 4, 64]`,
      reshaped to `[2, 4, 4, 16]`, is the source `[4, 16]` broadcast);
    - else down, when every fusible reader is an elementwise op of the
      chain and splat constants, or a slice cutting only dimensions the
      reshape leaves as they are, up to readers no region holds.
    Otherwise it stays. A reshape already at an edge, or read only by ops
    outside regions, is left alone.

    A float cast to a narrower type of a concatenation read only by it
    becomes a concatenation of the casts of its parts: the concatenation
    moves the narrower bytes, and each cast can join its part's kernel
    (the joint attention's image and text heads, each RMS-normed in its own
    kernel, rounded to bf16 there instead of after the concatenation).

    Values do not change: the same ops compute the same elements, laid out
    in another shape.

    ```mlir
    %y = omni.matmul %x, %w transpose_rhs : tensor<2x8x64xbf16>, tensor<64x64xbf16> -> tensor<2x8x64xbf16>
    %f = omni.cast %y : tensor<2x8x64xbf16> -> tensor<2x8x64xf32>
    %b = omni.broadcast_in_dim %bias, dims = [2] : tensor<64xf32> -> tensor<2x8x64xf32>
    %a = omni.add %f, %b : tensor<2x8x64xf32>
    %h = omni.reshape %a : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
    %t = omni.transpose %h, permutation = [0, 2, 1, 3] : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
    ```
    becomes
    ```mlir
    %y = omni.matmul %x, %w transpose_rhs : tensor<2x8x64xbf16>, tensor<64x64xbf16> -> tensor<2x8x64xbf16>
    %yh = omni.reshape %y : tensor<2x8x64xbf16> -> tensor<2x8x4x16xbf16>
    %f = omni.cast %yh : tensor<2x8x4x16xbf16> -> tensor<2x8x4x16xf32>
    %bh = omni.reshape %bias : tensor<64xf32> -> tensor<4x16xf32>
    %b = omni.broadcast_in_dim %bh, dims = [2, 3] : tensor<4x16xf32> -> tensor<2x8x4x16xf32>
    %a = omni.add %f, %b : tensor<2x8x4x16xf32>
    %t = omni.transpose %a, permutation = [0, 2, 1, 3] : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
    ```
  }];
  let dependentDialects = ["::mlir::omni::OmniDialect"];
}

def OmniFusePass : Pass<"omni-fuse", "::mlir::func::FuncOp"> {
  let summary = "group elementwise, broadcast, movement and reduction ops "
                "into omni.fusion regions";
  let description = [{
    Forms the kernels of the backends. In every block of a function (the
    body and the bodies of scf.for loops, never inside an existing
    omni.fusion) the ops that omni-fuse may fuse (FusionKindOpInterface
    kinds Elementwise, Broadcast, Movement and Reduction, constants
    excepted) are grouped, and each group becomes one `omni.fusion`: its
    inputs are the values it reads from outside (a splat constant is
    rebuilt inside as an omni.constant instead), its results the values
    used outside, so a value that
    is also needed elsewhere (for example by a later matmul) becomes an
    extra result. An op that joins nothing becomes a one-op fusion, so the
    backend sees only fusion regions, library ops, reshapes, constants and
    opaque commands.

    Groups grow in program order: an op joins the groups of its producers
    (producer/consumer fusion) and the groups of earlier ops that read one
    of its inputs whole, elementwise or by reduction (sibling fusion:
    multi-output regions). Two groups are NOT merged when (docs/fusion.md):

    1. a path leads from one to the other through an op outside both (a
       Library op, an Opaque op, a loop, another group): the region would
       depend on itself. So nothing fuses across a matmul, conv2d,
       attention, host_call, random op or collective;
    2. inside the region a reduction's result would be read by anything
       but elementwise ops on the reduced shape and a broadcast back to
       the reduction's operand shape, or a value after that broadcast by
       anything but elementwise ops and further reductions: a reduction
       ends a group for every other consumer (a movement, a reduction of
       the reduced value);
    3. merging would swap two ops with side effects (the ops between the
       groups that read the first move below the merged region, the others
       above it);
    4. for siblings: the shared input is a scalar or a splat, or an op
       between the groups reads the first (merging would delay a value
       another op waits for).
    5. across a scalar edge: the consumer's result is not a scalar, or
       both groups already reduce a tensor to a scalar (a global norm keeps
       one kernel per tensor).

    A broadcast read by several fusible ops is copied into each reader
    rather than stored or shared. After grouping, a tensor value that only
    later regions read, computed by elementwise ops and broadcasts from
    inputs no larger than it, is computed again in each reader region when
    that reads fewer bytes than storing it and reading it back (an MLP's
    widened, bias-added pre-activation read by the backward's GELU
    derivative). Nothing else is duplicated, so no reduction is ever
    recomputed: a value needed both inside and outside a region is a
    result of the region.

    Before:
    ```mlir
    %e = omni.exp %x : tensor<4xf32>
    %m = omni.mul %e, %y : tensor<4xf32>
    %s = omni.reduce sum %m dims = [0] : tensor<4xf32> -> tensor<f32>
    ```
    After:
    ```mlir
    %s = omni.fusion (%x, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32> {
    ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
      %e = omni.exp %a : tensor<4xf32>
      %m = omni.mul %e, %b : tensor<4xf32>
      %s = omni.reduce sum %m dims = [0] : tensor<4xf32> -> tensor<f32>
      omni.yield %s : tensor<f32>
    }
    ```
  }];
  let dependentDialects = ["::mlir::omni::OmniDialect"];
  let statistics = [
    Statistic<"numLegalityVisits", "legality-visits",
              "Ops whose users the merge legality check walked (grows with "
              "the ops that depend on a group, not with the distance between "
              "two groups)">,
    Statistic<"numKeysRenumbered", "keys-renumbered",
              "Ops given new order keys besides the ops a merge moved">,
    Statistic<"numLandmarkRejections", "landmark-rejections",
              "Merges ruled out by rule 1 through a landmark, without a walk">
  ];
}

//===----------------------------------------------------------------------===//
// Memory planning
//===----------------------------------------------------------------------===//

def OmniPlanMemoryPass : Pass<"omni-plan-memory", "::mlir::func::FuncOp"> {
  let summary = "assign every transient tensor an offset in a static arena";
  let description = [{
    Liveness-based static memory planning for a fused function. Every
    tensor result of an op outside fusion bodies (fusions, library ops,
    random ops, host calls, calls, collectives, copies) and every value
    carried by an scf.for gets a 64-byte aligned byte range in one arena,
    chosen by a linear scan in program order with a best-fit free list, so
    values that are never live at the same time may share bytes. A value
    defined outside a loop and read inside it stays live until the loop
    ends. Reshapes alias their operand (no allocation); constants and
    arguments are not in the arena.

    In-place reuse (docs/fusion.md): a result takes the buffer of an
    operand whose last use is its op when
    (a) the op is an omni.fusion whose body holds only Elementwise and
        Broadcast ops, the operand is read in the body only by Elementwise
        ops none of which comes after the op yielding the result, and both
        have one shape and element size; or
    (b) the operand is the tied destination of a destination-style op
        (tensor.insert_slice).
    A loop keeps each carried tensor in one slot (the init's buffer when
    the init dies at the loop) shared by the iter_arg, the loop result and
    only the value yielded back into that slot. An argument marked
    `omni.donate` gives its buffer to a function result computed from it
    by rule (a) at its last use; a state argument (`omni.state`, from
    omni-resident-state) gives its slot likewise, but only to the result
    stored back into the same slot: an AdamW update writes over the old
    parameters and moments in their state slots.

    The plan is recorded as attributes: `omni.offsets` on each allocating
    op (one entry per result: the arena offset, or -1 for a non-tensor
    result and for a result in a donated argument, whose index
    `omni.donated_args` then gives, -1 elsewhere), `omni.overwrites` on a
    fusion with a result in place (per input: the result written over its
    buffer, or -1) and `omni.arena_size` (bytes) on the function.

    Before:
    ```mlir
    func.func @f(%x: tensor<16xf32>) -> tensor<16xf32> {
      %a = omni.fusion (%x) : (tensor<16xf32>) -> tensor<16xf32> {...}
      %b = omni.fusion (%a) : (tensor<16xf32>) -> tensor<16xf32> {...}
      return %b : tensor<16xf32>
    }
    ```
    After:
    ```mlir
    func.func @f(%x: tensor<16xf32>) -> tensor<16xf32> attributes {omni.arena_size = 64 : i64} {
      %a = omni.fusion (%x) {omni.offsets = array<i64: 0>} : ...
      %b = omni.fusion (%a) {omni.offsets = array<i64: 0>, omni.overwrites = array<i64: 0>} : ...
      return %b : tensor<16xf32>
    }
    ```
  }];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "print `arena: <bytes> bytes, <n> buffers, <m> reused` per "
           "function to stderr">
  ];
}

#endif // OMNI_PASSES_TD
