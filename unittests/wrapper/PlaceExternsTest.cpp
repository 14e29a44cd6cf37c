// Typed extern calls: the extern table (kernels/Externs.def), placement from it
// (wrapper/PlaceExterns.h), host fallbacks as lines (wrapper/HostCopies.h) and the verifier's
// checks of those lines, memories and table signatures.
#include "wrapper/PlaceExterns.h"

#include "WrapperTestUtil.h"
#include "kernels/Externs.h"
#include "wrapper/HostCopies.h"
#include "wrapper/Verify.h"

#include <set>

namespace coil::wrapper::testing {
namespace {

using kernels::ExternId;

constexpr DType kDTypes[] = {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64,
                             DType::I32, DType::I16, DType::I8,  DType::U64,  DType::U32,
                             DType::U16, DType::U8,  DType::Bool};

TEST(ExternTable, EveryNameResolvesToItsExtern) {
  std::set<std::string> names;
  for (const kernels::ExternInfo &e : kernels::kExterns) {
    SCOPED_TRACE(std::string(e.base));
    EXPECT_EQ(&kernels::externInfo(e.id), &e);
    EXPECT_EQ(e.cudaDTypes & ~e.dtypes, 0u) << "a CUDA twin for a dtype the CPU lacks";
    EXPECT_EQ(e.args.find_first_not_of("BOIDS"), std::string_view::npos);
    EXPECT_NE(e.args.find('O'), std::string_view::npos) << "an extern without an output";
    EXPECT_EQ(e.args.find('S') != std::string_view::npos, e.allocates)
        << "data-dependent sizes come with allocated outputs";
    if (e.dtypes == kernels::kUntyped) {
      std::string cpu = kernels::cpuSymbol(e.id);
      auto r = kernels::findExtern(cpu);
      ASSERT_TRUE(r);
      EXPECT_EQ(r->id, e.id);
      EXPECT_FALSE(r->cuda);
      EXPECT_TRUE(names.insert(cpu).second) << cpu;
      continue;
    }
    for (DType t : kDTypes) {
      std::string cpu = kernels::cpuSymbol(e.id, t), cuda = kernels::cudaSymbol(e.id, t);
      auto r = kernels::findExtern(cpu);
      EXPECT_EQ(r.has_value(), e.hasDType(t)) << cpu;
      if (!e.hasDType(t)) {
        EXPECT_TRUE(cuda.empty());
        continue;
      }
      EXPECT_TRUE(names.insert(cpu).second) << cpu << " named twice";
      EXPECT_EQ(r->id, e.id);
      EXPECT_EQ(r->dtype, t);
      EXPECT_FALSE(r->cuda);
      EXPECT_EQ(cuda.empty(), !e.hasCuda(t));
      if (cuda.empty()) continue;
      auto c = kernels::findExtern(cuda);
      ASSERT_TRUE(c) << cuda;
      EXPECT_TRUE(c->cuda);
      EXPECT_EQ(c->id, e.id);
      EXPECT_EQ(c->dtype, t);
      EXPECT_TRUE(names.insert(cuda).second) << cuda << " named twice";
    }
  }
  // Names are looked up exactly, never by a prefix.
  EXPECT_EQ(kernels::cpuSymbol(ExternId::Gemm, DType::F32), "coil_cpu_gemm_f32");
  EXPECT_EQ(kernels::cudaSymbol(ExternId::Gemm, DType::BF16), "coil_cuda_gemm_bf16");
  EXPECT_EQ(kernels::cpuSymbol(ExternId::ShapeDims), "coil_cpu_shape_dims");
  EXPECT_TRUE(kernels::cudaSymbol(ExternId::Attention, DType::F64).empty());
  EXPECT_TRUE(kernels::cudaSymbol(ExternId::NonZero, DType::F32).empty());
  for (const char *n : {"coil_cpu_gemm", "coil_cpu_gemm_f32x", "coil_cpu_gemm_i32",
                        "coil_cuda_det_f32", "coil_cpu_conv_bias_i32", "gemm_f32", ""})
    EXPECT_FALSE(kernels::findExtern(n)) << n;
}

/// The arguments of coil_cpu_gemm_<t>: a [N, 4] x b [4, 4] -> y [N, 4].
std::vector<ExternArg> gemmArgs(BufferId a, BufferId b, BufferId y) {
  return {exIn(a),   exIn(b),   exOut(y),  exSize(1), exSize(sym("N")), exSize(4),
          exSize(4), exSize(0), exSize(0), exSize(0), exSize(0),        exFloat(1.0)};
}

/// x [N, 4] -> gemm (CUDA twin) -> g -> det (host) -> d [N]; then NonZero of g (allocating,
/// host) -> nz [K]; TopK (host) -> values, indices.
struct Mixed {
  ProgramBuilder b{"mixed"};
  BufferId x, w, g, d, nz, vals, idx;
  Mixed() {
    x = b.input("x", DType::F32, {sym("N"), 4});
    w = b.constant("w", DType::F32, {4, 4});
    g = b.temp("g", DType::F32, {sym("N"), 4});
    d = b.output("d", DType::F32, {sym("N")});
    nz = b.output("nz", DType::I64, {sym("K")});
    vals = b.output("vals", DType::F32, {sym("N"), 2});
    idx = b.output("idx", DType::I64, {sym("N"), 2});
    b.p.symbols["N"] = {1, 64};
    b.bind("N", x, 0);                                                   // 0
    b.alloc(g);                                                          // 1
    b.line(ExternKernelOut{"coil_cpu_gemm_f32", gemmArgs(x, w, g), {}}); // 2
    b.line(ExternKernelOut{"coil_cpu_det_f32",                           // 3
                           {exIn(g), exOut(d), exSize(sym("N")), exSize(2)},
                           {},
                           {"d", "Det"}});
    b.line(ExternKernelAlloc{"coil_cpu_nonzero_f32", // 4
                             {exIn(g), exOut(nz), exSym("K"), exSize(4 * sym("N"))},
                             {"K"},
                             {}});
    b.line(ExternKernelOut{"coil_cpu_topk_f32", // 5
                           {exIn(g), exOut(vals), exOut(idx), exSize(sym("N")), exSize(4),
                            exSize(1), exSize(2), exSize(1)},
                           {}});
    b.free(g); // 6
  }
};

void expectOk(const WrapperProgram &p) {
  Status st = verifyWrapper(p);
  EXPECT_TRUE(st.ok()) << st.error().render();
}

void expectError(const WrapperProgram &p, const std::string &msg) {
  Status st = verifyWrapper(p);
  ASSERT_FALSE(st.ok()) << "expected: " << msg;
  EXPECT_EQ(st.error().kind(), ErrorKind::Internal);
  EXPECT_NE(st.error().message().find(msg), std::string::npos) << st.error().message();
}

TEST(PlaceExterns, CudaTwinsRunOnTheDeviceTheRestOnTheHost) {
  Mixed m;
  m.b.p.device = "cuda";
  ASSERT_TRUE(placeExterns(m.b.p).ok());
  const auto &gemm = std::get<ExternKernelOut>(m.b.p.lines[2]);
  EXPECT_EQ(gemm.function, "coil_cuda_gemm_f32");
  EXPECT_EQ(gemm.place, ExternPlace::kDevice);
  const auto &det = std::get<ExternKernelOut>(m.b.p.lines[3]);
  EXPECT_EQ(det.function, "coil_cpu_det_f32");
  EXPECT_EQ(det.place, ExternPlace::kHost);
  EXPECT_EQ(std::get<ExternKernelAlloc>(m.b.p.lines[4]).place, ExternPlace::kHost);
  expectOk(m.b.p); // before insertHostCopies, the host calls still take device buffers
  // Placing twice changes nothing but is an error: the twin is no CPU function.
  EXPECT_FALSE(placeExterns(m.b.p).ok());
}

TEST(PlaceExterns, CpuProgramsRunEveryExternOnTheHost) {
  Mixed m;
  ASSERT_TRUE(placeExterns(m.b.p).ok());
  EXPECT_EQ(std::get<ExternKernelOut>(m.b.p.lines[2]).function, "coil_cpu_gemm_f32");
  EXPECT_EQ(std::get<ExternKernelOut>(m.b.p.lines[2]).place, ExternPlace::kHost);
  expectOk(m.b.p);
}

TEST(PlaceExterns, AFunctionOutsideTheTableIsAnInternalError) {
  Mixed m;
  m.b.p.device = "cuda";
  std::get<ExternKernelOut>(m.b.p.lines[3]).function = "coil_cuda_det_f32";
  Status st = placeExterns(m.b.p);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().kind(), ErrorKind::Internal);
  EXPECT_NE(st.error().message().find("'coil_cuda_det_f32' is not in the extern table"),
            std::string::npos)
      << st.error().message();
}

TEST(PlaceExterns, AttentionInF64HasNoCudaTwin) {
  ProgramBuilder b("att");
  b.p.device = "cuda";
  BufferId q = b.input("q", DType::F64, {4});
  BufferId y = b.output("y", DType::F64, {4});
  std::vector<ExternArg> args = {exIn(q), exIn(q), exIn(q), exIn(q), exOut(y)};
  for (int i = 0; i < 30; ++i) args.push_back(exSize(1));
  args.push_back(exFloat(1.0));
  args.push_back(exFloat(0.0));
  b.line(ExternKernelOut{"coil_cpu_attention_f64", args, {}});
  b.line(ExternKernelOut{"coil_cpu_attention_f32", args, {}});
  ASSERT_TRUE(placeExterns(b.p).ok());
  EXPECT_EQ(std::get<ExternKernelOut>(b.p.lines[0]).place, ExternPlace::kHost);
  EXPECT_EQ(std::get<ExternKernelOut>(b.p.lines[1]).function, "coil_cuda_attention_f32");
}

/// The kinds of the lines, in order, from `from`.
std::vector<std::string> kinds(const WrapperProgram &p, size_t from, size_t to) {
  std::vector<std::string> k;
  for (size_t i = from; i < to && i < p.lines.size(); ++i) k.push_back(lineKindName(p.lines[i]));
  return k;
}

TEST(HostCopies, HostFallbacksBecomeLines) {
  Mixed m;
  m.b.p.device = "cuda";
  ASSERT_TRUE(placeExterns(m.b.p).ok());
  size_t nBuffers = m.b.p.buffers.size();
  insertHostCopies(m.b.p);
  const WrapperProgram &p = m.b.p;
  expectOk(p);
  // The device GEMM is untouched; det: synchronize, g to the host, d's host buffer, the call on
  // host buffers, d back, host memory freed.
  EXPECT_EQ(kinds(p, 0, 3),
            (std::vector<std::string>{"BindSymbol", "Allocate", "ExternKernelOut"}));
  EXPECT_EQ(kinds(p, 3, 11),
            (std::vector<std::string>{"Synchronize", "HostAllocate", "CopyToHost", "HostAllocate",
                                      "ExternKernelOut", "CopyToDevice", "HostFree", "HostFree"}));
  const auto &det = std::get<ExternKernelOut>(p.lines[7]);
  EXPECT_EQ(det.function, "coil_cpu_det_f32");
  BufferId gh = det.args[0].buffer, dh = det.args[1].buffer;
  EXPECT_EQ(p.buffers[gh].name, "g_host");
  EXPECT_EQ(p.buffers[dh].name, "d_host");
  EXPECT_EQ(p.buffers[gh].memory, BufferMemory::kHost);
  EXPECT_EQ(p.buffers[gh].shape, p.buffers[m.g].shape);
  const auto &back = std::get<CopyToDevice>(p.lines[8]);
  EXPECT_EQ(back.from, dh);
  EXPECT_EQ(back.to, m.d);
  EXPECT_FALSE(back.allocate);
  EXPECT_EQ(back.forCall, "coil_cpu_det_f32");
  // NonZero: its output is a host buffer it allocates; the device block is allocated by the copy.
  EXPECT_EQ(kinds(p, 11, 18), (std::vector<std::string>{"Synchronize", "HostAllocate", "CopyToHost",
                                                        "ExternKernelAlloc", "CopyToDevice",
                                                        "HostFree", "HostFree"}));
  const auto &nz = std::get<ExternKernelAlloc>(p.lines[14]);
  EXPECT_EQ(p.buffers[nz.args[1].buffer].name, "nz_host");
  EXPECT_TRUE(std::get<CopyToDevice>(p.lines[15]).allocate);
  // g has one more host copy per call (names stay unique).
  EXPECT_EQ(p.buffers[std::get<CopyToHost>(p.lines[13]).to].name, "g_host_1");
  EXPECT_GT(p.buffers.size(), nBuffers);
  // Idempotent: the calls already take host buffers.
  WrapperProgram again = p;
  insertHostCopies(again);
  EXPECT_EQ(again.lines.size(), p.lines.size());
  EXPECT_EQ(again.buffers.size(), p.buffers.size());
}

TEST(HostCopies, CpuProgramsAreUnchanged) {
  Mixed m;
  ASSERT_TRUE(placeExterns(m.b.p).ok());
  size_t lines = m.b.p.lines.size(), buffers = m.b.p.buffers.size();
  insertHostCopies(m.b.p);
  EXPECT_EQ(m.b.p.lines.size(), lines);
  EXPECT_EQ(m.b.p.buffers.size(), buffers);
}

/// The Mixed program placed and with its host copies, for the verifier's checks below.
WrapperProgram lowered() {
  Mixed m;
  m.b.p.device = "cuda";
  EXPECT_TRUE(placeExterns(m.b.p).ok());
  insertHostCopies(m.b.p);
  return m.b.p;
}

template <class T> T &lineAt(WrapperProgram &p, size_t i) {
  return std::get<T>(p.lines.at(i));
}

TEST(VerifyHostCopies, MalformedCopiesAreRefused) {
  {
    WrapperProgram p = lowered(); // a copy to the host into a device buffer
    lineAt<CopyToHost>(p, 5).to = 2;
    expectError(p, "line 5 (CopyToHost): 'g' is not a host buffer");
  }
  {
    WrapperProgram p = lowered(); // a copy from a host buffer to the host
    lineAt<CopyToHost>(p, 5).from = lineAt<CopyToHost>(p, 5).to;
    expectError(p, "line 5 (CopyToHost): CopyToHost's source takes 'g_host', a host buffer");
  }
  {
    WrapperProgram p = lowered(); // sizes differ
    p.buffers[size_t(lineAt<CopyToHost>(p, 5).to)].shape = {sym("N"), 2};
    expectError(p, "line 5 (CopyToHost): copy of 'g' (16*N bytes) into 'g_host' (8*N bytes)");
  }
  {
    WrapperProgram p = lowered(); // a copy back into a constant
    p.lines.insert(p.lines.begin() + 9,
                   CopyToDevice{lineAt<CopyToDevice>(p, 8).from, 1, false, "coil_cpu_det_f32"});
    p.buffers[1].shape = {sym("N")};
    expectError(p, "line 9 (CopyToDevice): CopyToDevice writes 'w', a constant");
  }
  {
    WrapperProgram p = lowered(); // the host copy is used before it gets storage
    std::swap(p.lines[4], p.lines[5]);
    expectError(p, "line 4 (CopyToHost): 'g_host' is used before it gets storage");
  }
  {
    WrapperProgram p = lowered(); // two allocating copies into one buffer
    ASSERT_TRUE(lineAt<CopyToDevice>(p, 15).allocate);
    p.lines.insert(p.lines.begin() + 16, p.lines[15]);
    expectError(p, "line 16 (CopyToDevice): 'nz' gets storage twice");
  }
}

TEST(VerifyHostCopies, HostMemoryRules) {
  {
    WrapperProgram p = lowered(); // host memory released by Free
    p.lines[9] = Free{lineAt<HostFree>(p, 9).buffer};
    expectError(p, "line 9 (Free): Free takes 'g_host', a host buffer");
  }
  {
    WrapperProgram p = lowered(); // a device buffer released by HostFree
    lineAt<HostFree>(p, 9).buffer = 2;
    expectError(p, "line 9 (HostFree): 'g' is not a host buffer");
  }
  {
    WrapperProgram p = lowered(); // a host call on a device buffer next to host ones
    lineAt<ExternKernelOut>(p, 7).args[0].buffer = 2;
    expectError(p, "line 7 (ExternKernelOut): extern 'coil_cpu_det_f32' runs on the host and "
                   "mixes host and device buffers (a copy is missing)");
  }
  {
    WrapperProgram p = lowered(); // a device call on a host buffer
    lineAt<ExternKernelOut>(p, 2).args[0].buffer = lineAt<CopyToHost>(p, 5).to;
    expectError(p, "line 2 (ExternKernelOut): extern 'coil_cuda_gemm_f32' runs on the device but "
                   "takes a host buffer");
  }
  {
    WrapperProgram p = lowered(); // host lines in a CPU program
    p.device = "cpu";
    p.lines.erase(p.lines.begin() + 2); // the device GEMM
    expectError(p, "buffer 'g_host' is in host memory in a cpu program");
    for (Buffer &b : p.buffers) b.memory = BufferMemory::kProgram;
    expectError(p, "line 2 (Synchronize): a host fallback line in a cpu program");
  }
  {
    WrapperProgram p = lowered(); // a host buffer in the arena
    p.buffers[size_t(lineAt<CopyToHost>(p, 5).to)].arenaOffset = SymInt(0);
    expectError(p, "host buffer 'g_host' must be an intermediate outside the arena");
  }
}

TEST(VerifyHostCopies, ExternCallsMatchTheTable) {
  {
    Mixed m; // too few arguments
    std::get<ExternKernelOut>(m.b.p.lines[3]).args.pop_back();
    expectError(m.b.p, "line 3 (ExternKernelOut): extern 'coil_cpu_det_f32' takes arguments of "
                       "kinds BOII (B buffer, O output, I size, D float, S symbol), the call "
                       "passes BOI");
  }
  {
    Mixed m; // a CPU function placed on the device
    m.b.p.device = "cuda";
    std::get<ExternKernelOut>(m.b.p.lines[3]).place = ExternPlace::kDevice;
    expectError(m.b.p, "extern 'coil_cpu_det_f32' is a CPU function placed on the device");
  }
  {
    Mixed m; // a CUDA twin placed on the host
    m.b.p.device = "cuda";
    std::get<ExternKernelOut>(m.b.p.lines[2]).function = "coil_cuda_gemm_f32";
    expectError(m.b.p, "extern 'coil_cuda_gemm_f32' is a CUDA function placed on the host");
  }
  {
    Mixed m; // an allocating extern on an ExternKernelOut line
    auto &a = std::get<ExternKernelAlloc>(m.b.p.lines[4]);
    m.b.p.lines[4] = ExternKernelOut{a.function, {exIn(m.g), exOut(m.d), exSize(4)}, {}};
    expectError(m.b.p, "line 4 (ExternKernelOut): extern 'coil_cpu_nonzero_f32' allocates its "
                       "outputs (an ExternKernelAlloc line)");
  }
}

} // namespace
} // namespace coil::wrapper::testing
