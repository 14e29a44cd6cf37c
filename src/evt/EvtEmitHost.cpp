// Host code of the CUTLASS emitter (see EvtEmitInternal.h): the kernel program's check (random
// inputs, the GEMM, a host reference from the same IR) and the library entry point.
#include "evt/EvtEmitInternal.h"

#include <cmath>
#include <map>
#include <sstream>

namespace coil::evt::detail {
namespace {

class HostPrinter {
public:
  explicit HostPrinter(const HostView &v)
      : v_(v), p_(v.p), plan_(v.plan), o_(v.o), ns_(v.ns), sm90_(v.sm90) {}

  /// Host element index of tensor node `n` at (m, n, l) using its strides.
  std::string hostIndex(const Node &n) const {
    std::vector<std::string> t;
    bool packed = (n.stride.m == 0 || n.stride.m == 1 || n.stride.m == p_.problem.n) &&
                  (n.stride.n == 0 || n.stride.n == 1 || n.stride.n == p_.problem.m) &&
                  (n.stride.l == 0 || n.stride.l == p_.problem.m * p_.problem.n ||
                   !(n.kind == Kind::AuxLoad || n.kind == Kind::Src || n.kind == Kind::AuxStore));
    if (!packed)
      return "size_t(m) * " + std::to_string(n.stride.m) + " + size_t(n) * " +
             std::to_string(n.stride.n) + " + size_t(l) * " + std::to_string(n.stride.l);
    if (n.stride.m != 0) t.push_back(n.stride.m == 1 ? "size_t(m)" : "size_t(m) * N");
    if (n.stride.n != 0) t.push_back(n.stride.n == 1 ? "size_t(n)" : "size_t(n) * M");
    if (n.stride.l != 0) {
      bool dense = n.kind == Kind::AuxLoad || n.kind == Kind::Src || n.kind == Kind::AuxStore;
      std::string c = dense                                                  ? " * M * N"
                      : (n.kind == Kind::RowBcast || n.kind == Kind::RowRed) ? " * N"
                      : (n.kind == Kind::ColBcast || n.kind == Kind::ColRed) ? " * M"
                                                                             : "";
      t.push_back("size_t(l)" + c);
    }
    std::string s;
    for (const std::string &x : t) s += (s.empty() ? "" : " + ") + x;
    return s.empty() ? "0" : s;
  }

  /// Elements a tensor node's buffer needs: one past its largest index.
  int64_t elems(const Node &n) const {
    return (n.shape.m - 1) * n.stride.m + (n.shape.n - 1) * n.stride.n +
           (n.shape.l - 1) * n.stride.l + 1;
  }

  /// The buffers the GEMM writes: D (sm90) and each store node's, as (field, (element type,
  /// elements)).
  using OutBuffers = std::vector<std::pair<std::string, std::pair<std::string, int64_t>>>;

  /// The host program's helpers: error checks, exact random values, uploads, the error measure.
  void emitHelpers(std::ostringstream &os) const {
    os << "\n// ---- host program: random inputs, the GEMM, and a reference on the host ----\n";
    os << "#define COIL_CUDA(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { "
          "std::printf(\"cuda error %s at %s:%d\\n\", cudaGetErrorString(e_), __FILE__, __LINE__); "
          "return 2; } } while (0)\n";
    os << "namespace {\nuint64_t coil_rng = 0x9e3779b97f4a7c15ull;\n"
          "float coil_rand(int lo, int hi) {  // multiples of 1/4 in [lo/4, hi/4]: exact in every "
          "dtype\n  coil_rng = coil_rng * 6364136223846793005ull + 1442695040888963407ull;\n"
          "  return float(lo + int((coil_rng >> 33) % uint64_t(hi - lo + 1))) / 4.f;\n}\n"
          "template <class T> T *coil_upload(std::vector<T> const &h) {\n"
          "  T *d = nullptr;\n  if (cudaMalloc(&d, h.size() * sizeof(T)) != cudaSuccess) return "
          "nullptr;\n"
          "  cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice);\n  return "
          "d;\n}\n"
          "template <class T> std::vector<T> coil_download(T const *d, size_t n) {\n"
          "  std::vector<T> h(n);\n  cudaMemcpy(h.data(), d, n * sizeof(T), "
          "cudaMemcpyDeviceToHost);\n"
          "  return h;\n}\n"
          "double coil_err(float got, double ref) {\n"
          "  if (std::isnan(ref) && std::isnan(got)) return 0;\n"
          "  if (std::isinf(ref) && got == ref) return 0;\n"
          "  return std::fabs(double(got) - ref) / std::fmax(1.0, std::fabs(ref));\n}\n}  // "
          "namespace\n\n";
  }

  /// main()'s start: sizes, A and B, and every parameter (scalars by value, tensors uploaded).
  void emitInputs(std::ostringstream &os) const {
    os << "int main() {\n  using namespace " << ns_ << ";\n";
    os << "  int M = " << p_.problem.m << ", N = " << p_.problem.n << ", K = " << o_.k
       << ", L = " << p_.problem.l << ";\n";
    os << "  EpilogueParams p;\n  p.M = M; p.N = N; p.L = L;\n";
    os << "  std::vector<ElementA> hA(size_t(M) * K * L);\n  std::vector<ElementB> hB(size_t(N) * "
          "K * L);\n";
    os << "  for (auto &x : hA) x = ElementA(coil_rand(-4, 4));\n";
    os << "  for (auto &x : hB) x = ElementB(coil_rand(-4, 4));\n";
    os << "  ElementA *dA = coil_upload(hA);\n  ElementB *dB = coil_upload(hB);\n";
    for (int id : paramNodes()) {
      const Node &n = p_.at(id);
      std::string t = cppType(n.dtype), f = field(n);
      if (n.kind == Kind::ScalarBcast && n.stride.l == 0) {
        os << "  p." << f << " = " << t << "(coil_rand(2, 6));\n";
        os << "  float h_" << f << " = float(p." << f << ");\n";
        continue;
      }
      os << "  std::vector<" << t << "> h_" << f << "(" << elems(n) << ");\n";
      os << "  for (auto &x : h_" << f << ") x = " << t << "(coil_rand("
         << (n.kind == Kind::ScalarBcast ? "2, 6" : "-8, 8") << "));\n";
      os << "  p." << f << " = coil_upload(h_" << f << ");\n";
    }
  }

  OutBuffers outputBuffers() const {
    OutBuffers outs;
    if (sm90_) outs.push_back({"o_D", {"ElementD", p_.problem.m * p_.problem.n * p_.problem.l}});
    for (int id : storeNodes()) {
      const Node &n = p_.at(id);
      outs.push_back({field(n), {cppType(n.dtype), elems(n)}});
    }
    return outs;
  }

  /// The output buffers (reductions start at their identity), then one check of every upload.
  void emitOutputs(std::ostringstream &os, const OutBuffers &outs) const {
    for (auto &[f, tn] : outs) {
      const Node *rn = nullptr;
      for (int id : storeNodes())
        if (field(p_.at(id)) == f) rn = &p_.at(id);
      std::string init = tn.first + "(0)";
      if (rn && isReduction(rn->kind)) init = rn->red == RedFn::Sum ? "0.f" : "-INFINITY";
      os << "  std::vector<" << tn.first << "> h_" << f << "(" << tn.second << ", " << init
         << ");\n";
      os << "  p." << f << " = coil_upload(h_" << f << ");\n";
    }
    os << "  for (void *ptr : {(void *)dA, (void *)dB";
    for (int id : paramNodes())
      if (!(p_.at(id).kind == Kind::ScalarBcast && p_.at(id).stride.l == 0))
        os << ", (void *)p." << field(p_.at(id));
    for (auto &o : outs) os << ", (void *)p." << o.first;
    os << "})\n    if (!ptr) { std::printf(\"cudaMalloc failed\\n\"); return 2; }\n";
  }

  /// The GEMM's arguments (sm90's or sm80's form) and its run.
  void emitGemm(std::ostringstream &os) const {
    if (sm90_) {
      int c = srcNode();
      os << "  auto strideA = cutlass::make_cute_packed_stride(GemmKernel::StrideA{}, "
            "cute::make_shape(M, K, L));\n";
      os << "  auto strideB = cutlass::make_cute_packed_stride(GemmKernel::StrideB{}, "
            "cute::make_shape(N, K, L));\n";
      os << "  auto strideC = cutlass::make_cute_packed_stride(GemmKernel::StrideC{}, "
            "cute::make_shape(M, N, L));\n";
      os << "  auto strideD = cutlass::make_cute_packed_stride(GemmKernel::StrideD{}, "
            "cute::make_shape(M, N, L));\n";
      os << "  typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm, {M, N, K, "
            "L},\n"
            "      {dA, strideA, dB, strideB},\n"
            "      {make_arguments(p), "
         << (c >= 0 ? "p." + field(p_.at(c)) : std::string("nullptr"))
         << ", strideC, p.o_D, strideD}};\n";
    } else {
      os << "  typename Gemm::Arguments args(\n"
            "      L > 1 ? cutlass::gemm::GemmUniversalMode::kBatched : "
            "cutlass::gemm::GemmUniversalMode::kGemm,\n"
            "      {M, N, K}, L, make_arguments(p), dA, dB, nullptr, nullptr,\n"
            "      int64_t(M) * K, int64_t(N) * K, 0, 0, int64_t(K), int64_t(K), int64_t(0), "
            "int64_t(0));\n";
    }
    os << "  Gemm gemm;\n"
          "  if (gemm.can_implement(args) != cutlass::Status::kSuccess) { "
          "std::printf(\"can_implement failed\\n\"); return 2; }\n"
          "  size_t ws = Gemm::get_workspace_size(args);\n"
          "  void *workspace = nullptr;\n"
          "  if (ws) COIL_CUDA(cudaMalloc(&workspace, ws));\n"
          "  if (gemm.initialize(args, workspace) != cutlass::Status::kSuccess) { "
          "std::printf(\"initialize failed\\n\"); return 2; }\n"
          "  if (gemm.run() != cutlass::Status::kSuccess) { std::printf(\"run failed\\n\"); return "
          "2; }\n"
          "  COIL_CUDA(cudaDeviceSynchronize());\n";
  }

  /// One node's value in the reference loop (and its store's or reduction's comparison).
  void emitReferenceNode(std::ostringstream &os, int id) const {
    const Node &n = p_.at(id);
    std::string v = "v" + std::to_string(id);
    switch (n.kind) {
    case Kind::Accum:
      os << "    [[maybe_unused]] float " << v << " = acc;\n";
      break;
    case Kind::Literal:
      os << "    [[maybe_unused]] float " << v << " = " << floatLit(n.value) << ";\n";
      break;
    case Kind::ScalarBcast:
      if (n.stride.l == 0) {
        os << "    [[maybe_unused]] float " << v << " = h_" << field(n) << ";\n";
        break;
      }
      [[fallthrough]];
    case Kind::Src:
    case Kind::AuxLoad:
    case Kind::RowBcast:
    case Kind::ColBcast:
      os << "    [[maybe_unused]] float " << v << " = float(h_" << field(n) << "[" << hostIndex(n)
         << "]);\n";
      break;
    case Kind::Compute: {
      os << "    [[maybe_unused]] float " << v << ";\n    {";
      size_t used = n.op == Op::First ? 1 : n.operands.size();
      // A compute visitor converts its inputs to ElementCompute (accumulators and loads reach
      // it in their own types).
      for (size_t k = 0; k < used && k < 3; ++k)
        os << " float a" << k << " = "
           << (p_.compute != DType::F32
                   ? "float(ElementCompute(v" + std::to_string(n.operands[k]) + "))"
                   : "v" + std::to_string(n.operands[k]))
           << ";";
      os << " " << v << " = " << scalarExpr(n.op) << ";";
      if (n.op == Op::First)
        for (size_t k = 1; k < n.operands.size(); ++k) os << " (void)v" << n.operands[k] << ";";
      os << " }\n";
      if (n.op == Op::Cast && n.dtype != DType::F32)
        os << "    " << v << " = float(" << cppType(n.dtype) << "(" << v << "));\n";
      break;
    }
    case Kind::AuxStore:
      os << "    [[maybe_unused]] float " << v << " = v" << n.operands[0] << ";\n";
      os << "    { double r = float(" << cppType(n.dtype) << "(" << v << ")); double e = coil_err("
         << "float(g_" << field(n) << "[" << hostIndex(n) << "]), r); if (!(e <= errs[\"" << n.name
         << "\"])) errs[\"" << n.name << "\"] = e; }\n";
      break;
    case Kind::RowRed:
    case Kind::ColRed:
    case Kind::ScalarRed: {
      os << "    [[maybe_unused]] float " << v << " = v" << n.operands[0] << ";\n";
      std::string slot = "r_" + field(n) + "[" + hostIndex(n) + "]";
      if (n.red == RedFn::Sum)
        os << "    " << slot << " += " << v << ";\n";
      else
        os << "    " << slot << " = std::fmax(" << slot << ", double(" << v << "));\n";
      break;
    }
    case Kind::Input:
      break;
    }
    // Under a compute type narrower than f32, the values produced in ElementCompute are
    // rounded to it: compute results (a cast's is in its own type), literals, and sm90's row
    // and column broadcasts. Accumulators, loads and sm80 broadcasts keep their own types
    // until a compute visitor converts them, so a store or reduction sees them unrounded.
    bool inCompute = (n.kind == Kind::Compute && n.op != Op::Cast) || n.kind == Kind::Literal ||
                     (sm90_ && (n.kind == Kind::RowBcast || n.kind == Kind::ColBcast));
    if (p_.compute != DType::F32 && inCompute)
      os << "    " << v << " = float(ElementCompute(" << v << "));\n";
  }

  /// The reference on the host: every output element recomputed in float from A, B and the
  /// parameters, in the plan's order, and compared with the GEMM's.
  void emitReference(std::ostringstream &os, const OutBuffers &outs) const {
    for (auto &[f, tn] : outs)
      os << "  auto g_" << f << " = coil_download(p." << f << ", " << tn.second << ");\n";
    for (int id : storeNodes()) {
      const Node &n = p_.at(id);
      if (isReduction(n.kind))
        os << "  std::vector<double> r_" << field(n) << "(" << elems(n) << ", "
           << (n.red == RedFn::Sum ? "0.0" : "-INFINITY") << ");\n";
    }
    os << "  std::vector<double> e_acc(1, 0.0);\n";
    os << "  std::map<std::string, double> errs;\n";
    os << "  for (int l = 0; l < L; ++l)\n  for (int m = 0; m < M; ++m)\n  for (int n = 0; n < N; "
          "++n) {\n";
    os << "    float acc = 0.f;\n"
          "    for (int k = 0; k < K; ++k)\n"
          "      acc += float(hA[(size_t(l) * M + m) * K + k]) * float(hB[(size_t(l) * N + n) * K "
          "+ k]);\n";
    for (int id : plan_.topo) emitReferenceNode(os, id);
    if (sm90_) {
      os << "    { double r = float(ElementD(v" << p_.dValue
         << ")); double e = coil_err(float(g_o_D[(size_t(l) * M + m) * N + n]), r); if (!(e <= "
            "errs[\"D\"])) errs[\"D\"] = e; }\n";
    }
    os << "  }\n";
    for (int id : storeNodes()) {
      const Node &n = p_.at(id);
      if (!isReduction(n.kind)) continue;
      os << "  for (size_t i = 0; i < r_" << field(n) << ".size(); ++i) { double e = coil_err(g_"
         << field(n) << "[i], r_" << field(n) << "[i]); if (!(e <= errs[\"" << n.name
         << "\"])) errs[\"" << n.name << "\"] = e; }\n";
    }
  }

  /// Each output's verdict against its dtype's tolerance, and main()'s end.
  void emitChecks(std::ostringstream &os) const {
    os << "  bool ok = true;\n";
    auto tolOf = [](DType t) {
      return t == DType::BF16 ? "1e-2" : t == DType::F16 ? "2e-3" : "1e-3";
    };
    if (sm90_)
      os << "  { double tol = " << tolOf(dType())
         << "; bool pass = errs[\"D\"] <= tol; ok = ok && pass;\n"
         << "    std::printf(\"coil-evt-check " << p_.fnName << " sm90 output D: max rel err %.3g "
         << "(tol %.0e) %s\\n\", errs[\"D\"], tol, pass ? \"ok\" : \"FAIL\"); }\n";
    for (int id : storeNodes()) {
      const Node &n = p_.at(id);
      os << "  { double tol = " << tolOf(n.dtype) << "; bool pass = errs[\"" << n.name
         << "\"] <= tol; ok = ok && pass;\n"
         << "    std::printf(\"coil-evt-check " << p_.fnName << " " << archName(o_.arch)
         << " output " << n.name << ": max rel err %.3g (tol %.0e) %s\\n\", errs[\"" << n.name
         << "\"], tol, pass ? \"ok\" : \"FAIL\"); }\n";
    }
    os << "  std::printf(\"coil-evt-check " << p_.fnName << " " << archName(o_.arch)
       << ": %s\\n\", ok ? \"PASS\" : \"FAIL\");\n";
    os << "  return ok ? 0 : 1;\n}\n";
  }

  std::string mainFunction() const {
    std::ostringstream os;
    emitHelpers(os);
    emitInputs(os);
    const OutBuffers outs = outputBuffers();
    emitOutputs(os, outs);
    emitGemm(os);
    emitReference(os, outs);
    emitChecks(os);
    return os.str();
  }

  /// The library entry point (EvtEmit.h, LibraryEntry): operands by position into
  /// EpilogueParams, then the GEMM enqueued on the caller's stream.
  Status entryFunction(std::ostream &os) const {
    const LibraryEntry &e = *o_.entry;
    if (!sm90_) return Error::internal("evt: library entry points are sm90 only");
    std::map<std::string, std::string> inField, outField;
    for (int id : paramNodes()) {
      const Node &n = p_.at(id);
      if (n.kind == Kind::ScalarBcast && n.stride.l == 0)
        return Error::internal("evt: library entry: scalar '" + n.name + "' passed by value");
      inField[n.name] = field(n) + " = static_cast<" + cppType(n.dtype) + " *>(const_cast<void *>(";
    }
    for (int id : storeNodes()) outField[p_.at(id).name] = field(p_.at(id));
    os << "\nextern \"C\" int32_t " << e.name
       << "(const void *a, const void *b, const void *const *in, void *const *out, int64_t m,\n"
          "    int64_t n, int64_t k, void *stream, void *workspace, size_t workspace_bytes,\n"
          "    char *error, size_t error_size) {\n";
    os << "  using namespace " << ns_ << ";\n";
    os << "  (void)in; (void)out;\n";
    os << "  auto fail = [&](const char *what, int32_t code = 1) {\n"
          "    if (error && error_size) std::snprintf(error, error_size, \"%s\", what);\n"
          "    return code;\n  };\n";
    // TMA needs 16-byte aligned global addresses.
    os << "  bool aligned = (uintptr_t(a) | uintptr_t(b) | uintptr_t(out[0])) % 16 == 0;\n";
    for (size_t i = 0; i < e.inputs.size(); ++i)
      os << "  aligned = aligned && uintptr_t(in[" << i << "]) % 16 == 0;\n";
    for (size_t j = 1; j < e.outputs.size(); ++j)
      os << "  aligned = aligned && uintptr_t(out[" << j << "]) % 16 == 0;\n";
    os << "  if (!aligned) return fail(\"" << e.name
       << ": an operand is not 16-byte aligned\", 2);\n";
    os << "  if (m <= 0 || n <= 0) return 0;\n";
    os << "  if (m > 2147483647 || n > 2147483647 || k > 2147483647)\n"
          "    return fail(\""
       << e.name << ": a GEMM dimension exceeds 2^31 - 1\");\n";
    os << "  int M = int(m), N = int(n), K = int(k), L = 1;\n";
    os << "  EpilogueParams p;\n  p.M = M; p.N = N; p.L = L;\n";
    for (size_t i = 0; i < e.inputs.size(); ++i) {
      auto it = inField.find(e.inputs[i]);
      if (it == inField.end())
        return Error::internal("evt: library entry: no epilogue parameter '" + e.inputs[i] + "'");
      os << "  p." << it->second << "in[" << i << "]));\n";
    }
    if (inField.size() != e.inputs.size())
      return Error::internal("evt: library entry: the epilogue has parameters the entry omits");
    if (e.outputs.empty() || e.outputs[0] != "D")
      return Error::internal("evt: library entry: D must be the first output");
    os << "  p.o_D = static_cast<ElementD *>(out[0]);\n";
    for (size_t j = 1; j < e.outputs.size(); ++j) {
      auto it = outField.find(e.outputs[j]);
      if (it == outField.end())
        return Error::internal("evt: library entry: no epilogue output '" + e.outputs[j] + "'");
      os << "  p." << it->second << " = static_cast<decltype(p." << it->second << ")>(out[" << j
         << "]);\n";
    }
    int c = srcNode();
    // Packed strides: the dynamic one of the first two modes is the leading dimension.
    os << "  auto packed = [](auto s, int64_t ld, int64_t batch) {\n"
          "    if constexpr "
          "(cute::is_static<cute::remove_cvref_t<decltype(cute::get<0>(s))>>::value)\n"
          "      cute::get<1>(s) = ld;\n"
          "    else\n"
          "      cute::get<0>(s) = ld;\n"
          "    cute::get<2>(s) = batch;\n"
          "    return s;\n"
          "  };\n";
    os << "  auto strideA = packed(GemmKernel::StrideA{}, " << (o_.columnMajorA ? "M" : "K")
       << ", int64_t(M) * K);\n"
          "  auto strideB = packed(GemmKernel::StrideB{}, "
       << (o_.rowMajorB ? "N" : "K")
       << ", int64_t(N) * K);\n"
          "  auto strideC = packed(GemmKernel::StrideC{}, N, int64_t(M) * N);\n"
          "  auto strideD = packed(GemmKernel::StrideD{}, N, int64_t(M) * N);\n";
    os << "  typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm, {M, N, K, L},\n"
          "      {static_cast<ElementA const *>(a), strideA, static_cast<ElementB const *>(b), "
          "strideB},\n"
          "      {make_arguments(p), "
       << (c >= 0 ? "p." + field(p_.at(c)) : std::string("nullptr"))
       << ", strideC, p.o_D, strideD}};\n";
    os << "  if (Gemm::can_implement(args) != cutlass::Status::kSuccess)\n"
          "    return fail(\""
       << e.name
       << ": CUTLASS cannot run this problem (sizes or alignment)\", 2);\n"
          "  size_t need = Gemm::get_workspace_size(args);\n"
          "  if (need > workspace_bytes) return fail(\""
       << e.name
       << ": the GEMM needs more workspace than the run has\");\n"
          "  Gemm gemm;\n"
          "  cutlass::Status st = gemm.initialize(args, need ? workspace : nullptr, "
          "static_cast<cudaStream_t>(stream));\n"
          "  if (st != cutlass::Status::kSuccess) return fail(\""
       << e.name
       << ": initializing the GEMM failed\");\n"
          "  st = gemm.run(static_cast<cudaStream_t>(stream));\n"
          "  if (st != cutlass::Status::kSuccess) {\n"
          "    char buf[256];\n"
          "    std::snprintf(buf, sizeof buf, \""
       << e.name
       << ": the launch failed: %s\", cudaGetErrorString(cudaGetLastError()));\n"
          "    return fail(buf);\n  }\n  return 0;\n}\n";
    return okStatus();
  }

private:
  std::vector<int> paramNodes() const { return v_.params; }
  std::vector<int> storeNodes() const { return v_.stores; }
  int srcNode() const { return v_.src; }
  DType dType() const { return v_.d; }
  std::string field(const Node &n) const { return v_.field(n); }

  const HostView &v_;
  const Program &p_;
  const VisitorPlan &plan_;
  const EmitOptions &o_;
  const std::string &ns_;
  bool sm90_;
};

} // namespace

std::string checkProgram(const HostView &v) {
  return HostPrinter(v).mainFunction();
}

Expected<std::string> libraryEntry(const HostView &v) {
  std::ostringstream os;
  COIL_TRY_STATUS(HostPrinter(v).entryFunction(os));
  return os.str();
}

} // namespace coil::evt::detail
