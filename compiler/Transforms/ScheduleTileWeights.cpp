//===- ScheduleTileWeights.cpp - Tile-contiguous W4A16 weights (opt-in) ---===//
//
// A W4A16 tile of width tn reads tn bytes of each of w_q's K/2 rows ([K/2, N]
// row-major, the spec's storage). `layout=packed` (the default) further
// orders each packed tile's steps for the tile that streams it: the
// tensor-core tile (order `mma`; `arithmetic` folded, the default, scaled or
// exact picks its math, kernel-wide) or the integer tile (order `int8`: x
// quantized per group, exact integer dot products, scales per group on the
// sums). `expert-arithmetic` picks the MoE experts' tiles apart from the
// rest (e.g. int8 experts beside folded projections). Stored tile by tile
// ([N/tn][K/2][tn], and the scales and zeros [N/tn][K/G][tn], per expert), a
// task's weights are one contiguous range. A weight qualifies when every
// task that reads it is a W4A16 GEMV or expert tile, or a KDA task's folded
// output projection (128 wide; MLA's W_kv_b is also read by the absorbed
// attention, which indexes it its own way), of one width dividing its N.
//
//===----------------------------------------------------------------------===//

#include "Transforms/Passes.h"
#include "mk/PackedLayout.h"

#include "llvm/ADT/StringMap.h"

#include <numeric>

namespace mk::schedule {
#define GEN_PASS_DEF_SCHEDULETILEWEIGHTS
#include "Transforms/Passes.h.inc"
} // namespace mk::schedule

using namespace mlir;
using namespace mk;
using namespace mk::schedule;

namespace {

struct ScheduleTileWeightsPass
    : schedule::impl::ScheduleTileWeightsBase<ScheduleTileWeightsPass> {
  using Base::Base;
  void runOnOperation() override;
};

/// A weight's uses: the tile widths of the tiles that read it and its
/// column count; `other` when any other task reads it.
struct WeightUse {
  llvm::SmallVector<int64_t> tns;
  int64_t n = 0;
  bool other = false;
  /// Read by a MoE expert tile (gate/up or down): `expert-arithmetic`;
  /// by another tile (a GEMV, a KDA task's folded output projection).
  bool expert = false, plain = false;
  /// The gcd of the tasks' k-slices (rows): packable when whole steps of
  /// the packed tile; the largest k-slice and the quantization groups (the
  /// integer order's limits).
  int64_t kslices = 0, maxKslice = 0;
  llvm::SmallVector<int64_t> groups;
  void addSlice(int64_t tn, int64_t n_, int64_t kslice, int64_t group) {
    tns.push_back(tn);
    n = n_;
    kslices = std::gcd(kslices, kslice);
    maxKslice = std::max(maxKslice, kslice);
    groups.push_back(group);
  }
  /// Whether tn-wide tiles in `order` can stream every slice.
  bool packable(PackedOrder order, int64_t tn) const {
    const int64_t rows = mk::stepRows(order, tn);
    if (!rows || kslices % rows)
      return false;
    if (order != PackedOrder::Int8)
      return true;
    return maxKslice <= mk::kInt8MaxSliceRows &&
           llvm::all_of(groups, [](int64_t g) { return g > 0 && g % 32 == 0 && g <= 128; });
  }
};

void ScheduleTileWeightsPass::runOnOperation() {
  if (layout != "packed" && layout != "tiled" && layout != "row-major") {
    mlir::emitError(getOperation().getLoc(), "schedule-tile-weights: layout "
                                             "must be packed, tiled or row-major, got '")
        << layout << "'";
    return signalPassFailure();
  }
  // Whether option `name`'s value `v` names a tile arithmetic (else reports it).
  auto knownArithmetic = [&](StringRef name, StringRef v) {
    if (llvm::is_contained({"folded", "scaled", "exact", "int8"}, v))
      return true;
    mlir::emitError(getOperation().getLoc(), "schedule-tile-weights: ")
        << name << " must be folded, scaled, exact or int8, got '" << v << "'";
    return false;
  };
  if (!knownArithmetic("arithmetic", arithmetic) ||
      (!expertArithmetic.empty() && !knownArithmetic("expert-arithmetic", expertArithmetic)))
    return signalPassFailure();
  // The experts' arithmetic (empty: `arithmetic`). The tensor-core tiles'
  // math is one per kernel (`packed_arithmetic`): two of them cannot mix.
  const std::string expertArith =
      expertArithmetic.empty() ? arithmetic.getValue() : expertArithmetic.getValue();
  if (arithmetic != "int8" && expertArith != "int8" && expertArith != arithmetic) {
    mlir::emitError(getOperation().getLoc(), "schedule-tile-weights: expert-arithmetic '")
        << expertArith << "' and arithmetic '" << arithmetic
        << "' are two tensor-core tile arithmetics; a kernel has one (only int8 mixes with "
           "another)";
    return signalPassFailure();
  }
  if (layout == "row-major")
    return;
  // The tensor-core tiles' math: the non-integer one of the two (exact when
  // both are int8: no tensor-core tile streams packed weights then).
  const std::string mmaArith =
      arithmetic != "int8" ? arithmetic.getValue() : expertArith != "int8" ? expertArith : "exact";
  auto orderFor = [&](const WeightUse &u) {
    return (u.expert ? expertArith : arithmetic.getValue()) == "int8" ? PackedOrder::Int8
                                                                      : PackedOrder::Mma;
  };
  for (KernelOp kernel : getOperation().getOps<KernelOp>()) {
    kernel.setPackedArithmetic(mmaArith);
    llvm::StringMap<WeightUse> uses;
    std::vector<std::string> order;
    auto use = [&](StringRef w) -> WeightUse & {
      auto [it, fresh] = uses.try_emplace(w);
      if (fresh)
        order.push_back(w.str());
      return it->second;
    };
    kernel.walk([&](TaskOpInterface t) {
      if (isa<W4A16GemvOp>(t.getOperation())) {
        SmallVector<std::string> ws = t.getStrArrayArg("weights");
        SmallVector<int64_t> ns = t.getIntArrayArg("n");
        const int64_t kslice = t.getIntArg("k") / std::max<int64_t>(1, t.getIntArg("ksplit", 1));
        for (size_t i = 0; i < ws.size() && i < ns.size(); ++i) {
          WeightUse &u = use(ws[i]);
          u.addSlice(t.getIntArg("tn"), ns[i], kslice, t.getIntArg("group"));
          u.plain = true;
        }
      } else if (isa<MoeGateUpOp, MoeDownOp>(t.getOperation())) {
        bool down = isa<MoeDownOp>(t.getOperation());
        int64_t n = down ? t.getIntArg("hidden") : t.getIntArg("inter");
        const int64_t kslice = (down ? t.getIntArg("inter") : t.getIntArg("hidden")) /
                               std::max<int64_t>(1, t.getIntArg("ksplit", 1));
        for (StringRef a : down ? SmallVector<StringRef>{"down"}
                                : SmallVector<StringRef>{"gate", "up"}) {
          WeightUse &u = use(t.getStrArg(a));
          u.addSlice(t.getIntArg("tn"), n, kslice, t.getIntArg("group"));
          u.expert = true;
        }
      } else if (isa<KdaHeadChunkOp>(t.getOperation()) && !t.getStrArg("o_weight").empty()) {
        // A folded output projection (schedule-fuse-kda-o-proj): 128-wide
        // row slices of `chunk` rows, in the exact tile's order only (the
        // integer order's 32-row steps are no row slice: group 0 keeps it
        // out of that order).
        WeightUse &u = use(t.getStrArg("o_weight"));
        u.addSlice(128, t.getIntArg("o_n"), t.getIntArg("chunk"), 0);
        u.plain = true;
      }
    });
    // Any other task naming one of them disqualifies it.
    kernel.walk([&](TaskOpInterface t) {
      if (isa<W4A16GemvOp, MoeGateUpOp, MoeDownOp>(t.getOperation()))
        return;
      for (NamedAttribute a : t.getArgDictionary())
        if (auto s = dyn_cast<StringAttr>(a.getValue())) {
          if (isa<KdaHeadChunkOp>(t.getOperation()) && a.getName() == "o_weight")
            continue;
          auto it = uses.find(s.getValue());
          if (it != uses.end())
            it->second.other = true;
        }
    });
    // The storage goes on the weight's parts (w_q, scales, zeros): their
    // tile, and the payload's order on the w_q.
    llvm::StringMap<WeightOp> parts;
    for (WeightOp w : kernel.getBodyBlock().getOps<WeightOp>())
      parts[w.getSymName()] = w;
    Builder b(&getContext());
    for (const std::string &w : order) {
      const WeightUse &u = uses.lookup(w);
      if (u.other || u.tns.empty() || u.n <= 0)
        continue;
      int64_t tn = u.tns.front();
      if (llvm::any_of(u.tns, [&](int64_t x) { return x != tn; }) || u.n % tn)
        continue;
      // Read by expert tiles and others whose arithmetics want different
      // orders: no one order serves both, so the spec's storage.
      if (u.expert && u.plain && (expertArith == "int8") != (arithmetic == "int8"))
        continue;
      const PackedOrder packOrder = orderFor(u);
      // packed: only what the packed tile streams moves; the rest keeps the
      // spec's storage (tile-contiguous narrow tiles measured no faster).
      if (layout == "packed" && !u.packable(packOrder, tn))
        continue;
      for (StringRef part : {".w_q", ".scales", ".zeros"})
        if (WeightOp op = parts.lookup(w + part.str()))
          op.setTileAttr(b.getI64IntegerAttr(tn));
      if (layout == "packed")
        if (WeightOp op = parts.lookup(w + ".w_q"))
          op.setOrderAttr(b.getStringAttr(packOrder == PackedOrder::Int8 ? "int8" : "mma"));
    }
  }
}

} // namespace
