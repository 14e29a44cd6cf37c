#include "wrapper/Package.h"

#include "support/JsonQuote.h"
#include "support/Sha256.h"
#include "wrapper/CppBackend.h"
#include "wrapper/DebugInstrument.h"
#include "wrapper/GraphExport.h"
#include "wrapper/PyBackend.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace coil::wrapper {

namespace {

std::string q(std::string_view s) {
  return jsonQuote(s);
}

void tensorList(std::ostringstream &os, const WrapperProgram &p, const std::vector<BufferId> &ids) {
  os << "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    const Buffer &b = p.buffers[ids[i]];
    os << (i ? ",\n    " : "\n    ") << "{\"name\": " << q(b.ioName.empty() ? b.name : b.ioName)
       << ", \"dtype\": " << q(dtypeName(b.dtype)) << ", \"shape\": [";
    for (size_t d = 0; d < b.shape.size(); ++d) os << (d ? ", " : "") << q(b.shape[d].str());
    os << "]}";
  }
  os << (ids.empty() ? "]" : "\n  ]");
}

void intList(std::ostringstream &os, const std::vector<int64_t> &v) {
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "]";
}

} // namespace

std::vector<ConstantEntry> layoutWeights(const std::vector<ConstantBlob> &constants,
                                         int64_t *totalBytes) {
  std::vector<ConstantEntry> out;
  int64_t off = 0;
  for (const ConstantBlob &c : constants) {
    off = (off + kWeightAlignment - 1) / kWeightAlignment * kWeightAlignment;
    out.push_back({c.name, c.dtype, c.shape, off, int64_t(c.size)});
    off += int64_t(c.size);
  }
  if (totalBytes) *totalBytes = off;
  return out;
}

Status writeWeights(const std::string &path, const std::vector<ConstantBlob> &constants) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return Error::runtime("cannot create '" + path + "'");
  static const char zeros[kWeightAlignment] = {};
  std::vector<ConstantEntry> layout = layoutWeights(constants);
  int64_t pos = 0;
  for (size_t i = 0; i < constants.size(); ++i) {
    f.write(zeros, std::streamsize(layout[i].offset - pos));
    if (constants[i].size)
      f.write(static_cast<const char *>(constants[i].data), std::streamsize(constants[i].size));
    pos = layout[i].offset + layout[i].bytes;
  }
  f.flush();
  if (!f) return Error::runtime("cannot write '" + path + "'");
  return okStatus();
}

Status checkConstants(const WrapperProgram &p, const std::vector<ConstantBlob> &constants) {
  if (constants.size() != p.constants.size())
    return Error::internal("package: the program has " + std::to_string(p.constants.size()) +
                           " constants, got " + std::to_string(constants.size()) + " values");
  for (size_t i = 0; i < constants.size(); ++i) {
    const Buffer &b = p.buffers[p.constants[i]];
    const ConstantBlob &c = constants[i];
    std::string where = "package: constant " + std::to_string(i) + " '" + b.name + "'";
    if (c.name != b.name) return Error::internal(where + " has the value of '" + c.name + "'");
    if (c.dtype != b.dtype)
      return Error::internal(where + " is " + std::string(dtypeName(b.dtype)) + ", its value " +
                             std::string(dtypeName(c.dtype)));
    if (c.shape.size() != b.shape.size())
      return Error::internal(where + " has rank " + std::to_string(b.shape.size()) +
                             ", its value rank " + std::to_string(c.shape.size()));
    int64_t numel = 1;
    for (size_t d = 0; d < c.shape.size(); ++d) {
      if (b.shape[d] != SymInt(c.shape[d]))
        return Error::internal(where + " dim " + std::to_string(d) + " is " + b.shape[d].str() +
                               ", its value has " + std::to_string(c.shape[d]));
      numel *= c.shape[d];
    }
    if (uint64_t(numel) * dtypeSize(c.dtype) != c.size || (c.size && !c.data))
      return Error::internal(where + " needs " + std::to_string(numel * dtypeSize(c.dtype)) +
                             " bytes, its value has " + std::to_string(c.size));
  }
  return okStatus();
}

std::string metadataJson(const WrapperProgram &p, const std::vector<ConstantEntry> &constants,
                         int64_t weightsBytes, const PackageOptions &options) {
  std::ostringstream os;
  os << "{\n  \"format\": \"coil-package\",\n  \"format_version\": " << kPackageFormatVersion
     << ",\n  \"model_abi_version\": " << kModelAbiVersion
     << ",\n  \"coil_version\": " << q(options.coilVersion) << ",\n  \"name\": " << q(p.name)
     << ",\n  \"device\": " << q(options.device)
     << ",\n  \"library\": \"model.so\",\n  \"weights\": \"weights.bin\",\n  \"weights_bytes\": "
     << weightsBytes;
  if (!options.cpuTarget.empty()) {
    os << ",\n  \"cpu_target\": " << q(options.cpuTarget) << ",\n  \"cpu_features\": [";
    for (size_t i = 0; i < options.cpuFeatures.size(); ++i)
      os << (i ? ", " : "") << q(options.cpuFeatures[i]);
    os << "]";
    if (!options.cpuClones.empty()) {
      os << ",\n  \"cpu_clones\": [";
      for (size_t i = 0; i < options.cpuClones.size(); ++i)
        os << (i ? ", " : "") << q(options.cpuClones[i]);
      os << "]";
    }
  }
  os << ",\n  \"compile_options\": {";
  for (size_t i = 0; i < options.compileOptions.size(); ++i)
    os << (i ? ", " : "") << q(options.compileOptions[i].first) << ": "
       << q(options.compileOptions[i].second);
  os << "},\n  \"symbols\": [";
  size_t k = 0;
  for (const auto &[name, r] : p.symbols)
    os << (k++ ? ",\n    " : "\n    ") << "{\"name\": " << q(name) << ", \"min\": " << r.min
       << ", \"max\": " << r.max << "}";
  os << (p.symbols.empty() ? "]" : "\n  ]") << ",\n  \"bindings\": [";
  k = 0;
  for (const Line &l : p.lines)
    if (const auto *b = std::get_if<BindSymbol>(&l))
      os << (k++ ? ",\n    " : "\n    ") << "{\"symbol\": " << q(b->symbol)
         << ", \"input\": " << p.buffers[b->buffer].index << ", \"dim\": " << b->dim << "}";
  os << (k ? "\n  ]" : "]") << ",\n  \"inputs\": ";
  tensorList(os, p, p.inputs);
  os << ",\n  \"outputs\": ";
  tensorList(os, p, p.outputs);
  os << ",\n  \"constants\": [";
  for (size_t i = 0; i < constants.size(); ++i) {
    const ConstantEntry &c = constants[i];
    os << (i ? ",\n    " : "\n    ") << "{\"name\": " << q(c.name)
       << ", \"dtype\": " << q(dtypeName(c.dtype)) << ", \"shape\": ";
    intList(os, c.shape);
    os << ", \"offset\": " << c.offset << ", \"bytes\": " << c.bytes << "}";
  }
  os << (constants.empty() ? "]" : "\n  ]") << ",\n  \"arena_bytes\": " << q(p.arenaBytes.str())
     << ",\n  \"kernels\": [";
  // The configs each kernel is called with, in call order.
  std::vector<std::vector<int64_t>> chosen(p.kernels.size());
  for (const Line &l : p.lines)
    if (const auto *c = std::get_if<KernelCall>(&l)) chosen[c->kernel].push_back(c->config);
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    const KernelInfo &kn = p.kernels[i];
    os << (i ? ",\n    " : "\n    ") << "{\"name\": " << q(kn.name)
       << ", \"source\": " << q(kn.sourceFile) << ",\n     \"params\": [";
    for (size_t j = 0; j < kn.params.size(); ++j) {
      const KernelParam &pr = kn.params[j];
      os << (j ? ", " : "") << "{\"name\": " << q(pr.name)
         << ", \"kind\": " << (pr.kind == KernelParam::Kind::Buffer ? "\"buffer\"" : "\"size\"");
      if (pr.kind == KernelParam::Kind::Buffer)
        os << ", \"dtype\": " << q(dtypeName(pr.dtype))
           << ", \"written\": " << (pr.written ? "true" : "false");
      os << "}";
    }
    os << "],\n     \"configs\": [";
    for (size_t j = 0; j < kn.configs.size(); ++j) {
      os << (j ? ", " : "") << "{\"name\": " << q(kn.configs[j].name) << ", \"values\": {";
      for (size_t v = 0; v < kn.configs[j].values.size(); ++v)
        os << (v ? ", " : "") << q(kn.configs[j].values[v].first) << ": "
           << kn.configs[j].values[v].second;
      os << "}}";
    }
    os << "],\n     \"chosen_configs\": ";
    intList(os, chosen[i]);
    os << ", \"iteration_space\": [";
    for (size_t d = 0; d < kn.iterationSpace.size(); ++d)
      os << (d ? ", " : "") << q(kn.iterationSpace[d].str());
    os << "], \"origins\": [";
    for (size_t d = 0; d < kn.origins.size(); ++d) os << (d ? ", " : "") << kn.origins[d];
    os << "]}";
  }
  os << (p.kernels.empty() ? "]" : "\n  ]") << ",\n  \"externs\": [";
  std::vector<std::string> externs;
  for (const Line &l : p.lines) {
    std::string fn;
    if (const auto *e = std::get_if<ExternKernelOut>(&l)) fn = e->function;
    if (const auto *e = std::get_if<ExternKernelAlloc>(&l)) fn = e->function;
    if (!fn.empty() && std::find(externs.begin(), externs.end(), fn) == externs.end())
      externs.push_back(fn);
  }
  for (size_t i = 0; i < externs.size(); ++i) os << (i ? ", " : "") << q(externs[i]);
  // The debug printer's launches, by launch id (src/wrapper/DebugInstrument.h).
  os << "],\n  \"launches\": [";
  std::vector<LaunchInfo> table = launchTable(p);
  std::vector<std::string> launches = debugLaunchNames(p);
  for (size_t i = 0; i < launches.size(); ++i) {
    auto it = std::find_if(table.begin(), table.end(),
                           [&](const LaunchInfo &li) { return li.name == launches[i]; });
    os << (i ? ",\n    " : "\n    ") << "{\"name\": " << q(launches[i]) << ", \"kind\": "
       << (it == table.end() ? "\"other\""
           : it->isExtern    ? "\"extern\""
                             : "\"kernel\"")
       << ", \"function\": " << q(it == table.end() ? launches[i] : it->base) << "}";
  }
  os << (launches.empty() ? "]" : "\n  ]");
  if (options.tuning) {
    const TuningRecord &t = *options.tuning;
    os << ",\n  \"tuning\": {\"method\": " << q(t.method) << ", \"device\": " << q(t.device)
       << ", \"note\": " << q(t.note) << ", \"calls\": [";
    for (size_t i = 0; i < t.calls.size(); ++i) {
      const TuningRecord::Call &c = t.calls[i];
      os << (i ? ",\n    " : "\n    ") << "{\"kernel\": " << q(c.kernel)
         << ", \"bucket_size\": " << q(c.bucketSize) << ", \"buckets\": [";
      for (size_t b = 0; b < c.buckets.size(); ++b) {
        const TuningRecord::Bucket &bk = c.buckets[b];
        os << (b ? ",\n      " : "\n      ") << "{\"up_to\": " << bk.upTo << ", \"at\": " << bk.at
           << ", \"config\": " << bk.config << ", \"times_us\": [";
        for (size_t k = 0; k < bk.timesUs.size(); ++k) {
          char buf[32];
          std::snprintf(buf, sizeof buf, "%.3f", bk.timesUs[k]);
          os << (k ? ", " : "") << buf;
        }
        os << "]}";
      }
      os << (c.buckets.empty() ? "]}" : "\n    ]}");
    }
    os << (t.calls.empty() ? "]}" : "\n  ]}");
  }
  if (options.cuda) {
    const CudaPackageInfo &cu = *options.cuda;
    os << ",\n  \"cuda\": {\"fatbin\": " << q(cu.fatbin) << ", \"archs\": [";
    for (size_t i = 0; i < cu.archs.size(); ++i) os << (i ? ", " : "") << q(cu.archs[i]);
    os << "], \"host_fallback\": " << (cu.hostFallback ? "true" : "false")
       << ", \"workspace_bytes\": " << cu.workspaceBytes << ",\n    \"functions\": [";
    for (size_t i = 0; i < cu.functions.size(); ++i)
      os << (i ? ",\n      " : "\n      ") << q(cu.functions[i]);
    os << (cu.functions.empty() ? "]}" : "\n    ]}");
  }
  os << "\n}\n";
  return os.str();
}

Status writePackage(const std::string &dir, const WrapperProgram &p,
                    const std::vector<ConstantBlob> &constants, const PackageOptions &options) {
  COIL_TRY_STATUS(checkConstants(p, constants));
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(fs::path(dir) / "src", ec);
  if (ec) return Error::runtime("cannot create '" + dir + "/src': " + ec.message());
  int64_t total = 0;
  std::vector<ConstantEntry> layout = layoutWeights(constants, &total);
  COIL_TRY_STATUS(writeWeights((fs::path(dir) / "weights.bin").string(), constants));
  auto writeText = [](const fs::path &path, const std::string &text) -> Status {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << text;
    f.flush();
    if (!f) return Error::runtime("cannot write '" + path.string() + "'");
    return okStatus();
  };
  std::string body = metadataJson(p, layout, total, options);
  // model.so names its metadata (see Package.h); metadata.json is sealed after the build.
  std::string wrapperCpp = emitCppWrapper(p) + metadataMarkerSource(sha256Hex(body));
  fs::remove(fs::path(dir) / "model.so", ec); // a stale one would not match the new metadata
  COIL_TRY_STATUS(writeText(fs::path(dir) / "metadata.json", body));
  COIL_TRY_STATUS(writeText(fs::path(dir) / "src" / "wrapper.cpp", wrapperCpp));
  // The other backends of the same program: Python twin, JSON and Graphviz exports.
  COIL_TRY_STATUS(writeText(fs::path(dir) / "src" / "wrapper.py", emitPyWrapper(p)));
  COIL_TRY_STATUS(writeText(fs::path(dir) / "src" / "wrapper.json", emitWrapperJson(p)));
  COIL_TRY_STATUS(writeText(fs::path(dir) / "src" / "wrapper.dot", emitWrapperDot(p)));
  return okStatus();
}

std::string metadataMarkerSource(const std::string &bodySha256) {
  return "\n// The SHA-256 of metadata.json's body: the runtime finds it in model.so before "
         "loading\n"
         "// it and checks that it names this package's metadata (src/wrapper/Package.h).\n"
         "extern \"C\" __attribute__((visibility(\"default\"), used)) const char\n"
         "    coil_model_metadata_sha256[] = \"" +
         std::string(kMetadataMarker) + bodySha256 + "\";\n";
}

std::vector<std::string> sealedFiles(const PackageOptions &options) {
  std::vector<std::string> files = {"weights.bin", "model.so", "src/wrapper.py"};
  if (options.cuda) files.push_back(options.cuda->fatbin);
  return files;
}

Status sealPackage(const std::string &dir, const std::vector<std::string> &files) {
  namespace fs = std::filesystem;
  fs::path metaPath = fs::path(dir) / "metadata.json";
  auto readAll = [](const fs::path &path, std::string &out) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return false;
    std::ostringstream ss;
    ss << f.rdbuf();
    out = ss.str();
    return !f.bad();
  };
  std::string body;
  if (!readAll(metaPath, body)) return Error::runtime("cannot read '" + metaPath.string() + "'");
  if (body.find(kIntegritySeparator) != std::string::npos)
    return Error::internal("package: '" + metaPath.string() + "' is already sealed");
  if (body.size() < 3 || body.compare(body.size() - 3, 3, "\n}\n") != 0)
    return Error::internal("package: '" + metaPath.string() + "' does not end with \"\\n}\\n\"");
  std::ostringstream os;
  os << body.substr(0, body.size() - 3) << kIntegritySeparator
     << "{\"algorithm\": \"sha256\", \"model_abi_version\": " << kModelAbiVersion
     << ",\n    \"metadata\": " << q(sha256Hex(body)) << ",\n    \"files\": {";
  for (size_t i = 0; i < files.size(); ++i) {
    std::string bytes;
    if (!readAll(fs::path(dir) / files[i], bytes))
      return Error::runtime("cannot read '" + (fs::path(dir) / files[i]).string() +
                            "' to seal the package");
    os << (i ? ",\n      " : "\n      ") << q(files[i]) << ": " << q(sha256Hex(bytes));
  }
  os << (files.empty() ? "}}" : "\n    }}") << "\n}\n";
  std::string tmp = metaPath.string() + ".seal" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << os.str();
    f.flush();
    if (!f) return Error::runtime("cannot write '" + tmp + "'");
  }
  std::error_code ec;
  fs::rename(tmp, metaPath, ec);
  if (ec) return Error::runtime("cannot replace '" + metaPath.string() + "': " + ec.message());
  return okStatus();
}

} // namespace coil::wrapper
