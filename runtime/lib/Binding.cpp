//===- Binding.cpp - Which buffer goes to which kernel parameter ----------===//

#include "mk/runtime/Binding.h"

namespace mk {
namespace rt {

Status checkTensor(const std::string &what, DType expectedDtype,
                   const std::vector<int64_t> &expectedShape, int64_t rows,
                   DType dtype, const std::vector<int64_t> &shape) {
  std::vector<int64_t> want = expectedShape;
  for (int64_t &d : want)
    if (d < 0)
      d = rows;
  if (dtype != expectedDtype)
    return makeError(ErrorCode::Binding,
                     what + ": dtype " + dtypeName(expectedDtype) +
                         " expected, got " + dtypeName(dtype));
  if (shape != want)
    return makeError(ErrorCode::Binding, what + ": shape " + formatShape(want) +
                                             " expected, got " +
                                             formatShape(shape));
  return Status::ok();
}

Status BindingLayout::build(const Manifest &m, BindingLayout &out) {
  BindingLayout b;
  std::vector<TensorDesc> states = stateTensors(m.config, -1);
  for (const TensorDesc &t : states) {
    StateSlot s;
    s.desc = t;
    s.isCache = !t.shape.empty() && t.shape[0] < 0;
    int64_t n = 1;
    for (size_t i = s.isCache ? 1 : 0; i < t.shape.size(); ++i)
      n *= t.shape[i];
    s.rowBytes = n * dtypeBytes(t.dtype);
    s.inParam = m.findParam(t.name, ParamRole::StateIn);
    s.outParam = m.findParam(t.name, ParamRole::StateOut);
    if (s.inParam < 0 || s.outParam < 0)
      return makeError(ErrorCode::Manifest,
                       "the manifest lacks state '" + t.name + "'");
    b.stateByName[t.name] = int(b.state.size());
    b.state.push_back(std::move(s));
  }
  for (size_t i = 0; i < m.params.size(); ++i) {
    const ManifestParam &p = m.params[i];
    int idx = int(i);
    switch (p.role) {
    case ParamRole::Weight:
      b.weightByName[p.name] = idx;
      b.weightDescs[p.name] = TensorDesc{p.name, p.dtype, p.shape};
      b.weightParams.push_back(idx);
      break;
    case ParamRole::Input: b.input = idx; break;
    case ParamRole::Output: b.output = idx; break;
    case ParamRole::Workspace: b.workspace = idx; break;
    case ParamRole::Sync: b.sync = idx; break;
    case ParamRole::Debug: b.debug = idx; break;
    case ParamRole::Scalar:
      (p.name == "ctx_len" ? b.ctxLen : p.name == "token" ? b.token : b.capacity) = idx;
      break;
    case ParamRole::StateIn:
    case ParamRole::StateOut:
      break;
    }
  }
  out = std::move(b);
  return Status::ok();
}

Status BindingLayout::checkWeight(const std::string &name, DType dtype,
                                  const std::vector<int64_t> &shape,
                                  int &param) const {
  auto it = weightByName.find(name);
  if (it == weightByName.end()) {
    std::string msg = "unknown weight '" + name + "': not a weight of this kernel";
    if (stateByName.count(name))
      msg += " (it is a state tensor)";
    return makeError(ErrorCode::Binding, msg);
  }
  param = it->second;
  const TensorDesc &want = weightDescs.at(name);
  return checkTensor("weight '" + name + "'", want.dtype, want.shape, 0, dtype,
                     shape);
}

Status BindingLayout::checkState(const std::string &name, DType dtype,
                                 const std::vector<int64_t> &shape,
                                 int64_t rows, int &slot) const {
  auto it = stateByName.find(name);
  if (it == stateByName.end())
    return makeError(ErrorCode::Binding, "unknown state tensor '" + name +
                                             "': not a state of this kernel");
  slot = it->second;
  const StateSlot &s = state[size_t(slot)];
  return checkTensor("state '" + name + "'", s.desc.dtype, s.desc.shape, rows,
                     dtype, shape);
}

} // namespace rt
} // namespace mk
