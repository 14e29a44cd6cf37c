// Model loading by file type, and input matching.
#include "driver/LoadModel.h"

#include "ir/Parser.h"
#include "ir/Verifier.h"
#include "onnx/onnx.pb.h"
#include "support/Sha256.h"

#include <fstream>
#include <set>
#include <sstream>

namespace coil {

namespace {
bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
} // namespace

Expected<LoadedModel> loadModel(const std::string &path, const ImportOptions &opts) {
  LoadedModel m;
  if (endsWith(path, ".onnx")) {
    COIL_TRY(m.graph, importOnnxFile(path, opts, &m.stats));
    m.fromOnnx = true;
  } else if (endsWith(path, ".coil")) {
    COIL_TRY(m.graph, parseGraphFile(path));
    for (const auto &[name, range] : opts.symbolRanges) m.graph.symbols[name] = range;
  } else {
    std::ifstream probe(path);
    if (!probe) return Error::user("cannot open '" + path + "'");
    return Error::user(path + ": unknown model type (expected a .onnx or .coil file)");
  }
  for (const auto &[name, range] : opts.symbolRanges)
    if (!m.graph.symbols.count(name))
      return Error::user(path + ": --dynamic names symbol '" + name +
                         "', which the model does not have");
  return m;
}

Expected<std::string> modelDigest(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Error::user("cannot open '" + path + "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  std::string bytes = ss.str();
  Sha256 h;
  h.update("coil-model 1\n" + sha256Hex(bytes) + "\n");
  onnx::ModelProto model;
  if (endsWith(path, ".onnx") && model.ParseFromString(bytes)) {
    std::set<std::string> files;
    auto note = [&](const onnx::TensorProto &t) {
      if (t.data_location() != onnx::TensorProto::EXTERNAL) return;
      for (const auto &kv : t.external_data())
        if (kv.key() == "location") files.insert(kv.value());
    };
    for (const auto &t : model.graph().initializer()) note(t);
    for (const auto &n : model.graph().node())
      for (const auto &a : n.attribute())
        if (a.has_t()) note(a.t());
    size_t slash = path.find_last_of('/');
    std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
    for (const std::string &file : files) {
      std::ifstream ef(dir + "/" + file, std::ios::binary);
      std::ostringstream es;
      if (ef) es << ef.rdbuf();
      h.update(file + "\n" + (ef ? sha256Hex(es.str()) : std::string("missing")) + "\n");
    }
  }
  return h.hex();
}

Expected<ImportOptions> parseSymbolRanges(const std::vector<std::string> &texts) {
  ImportOptions o;
  for (const std::string &d : texts) {
    size_t eq = d.find('='), colon = d.find(':', eq == std::string::npos ? 0 : eq);
    auto bad = [&] {
      return Error::user("--dynamic expects NAME=MIN:MAX with 0 <= MIN <= MAX, got '" + d + "'");
    };
    if (eq == std::string::npos || colon == std::string::npos || eq == 0) return bad();
    try {
      size_t p1 = 0, p2 = 0;
      std::string lo = d.substr(eq + 1, colon - eq - 1), hi = d.substr(colon + 1);
      int64_t mn = std::stoll(lo, &p1), mx = std::stoll(hi, &p2);
      if (p1 != lo.size() || p2 != hi.size() || mn < 0 || mn > mx) return bad();
      o.symbolRanges[d.substr(0, eq)] = SymRange{mn, mx};
    } catch (...) {
      return bad();
    }
  }
  return o;
}

Expected<std::vector<Tensor>> matchInputs(const Graph &g,
                                          const std::vector<std::pair<std::string, Tensor>> &arrays,
                                          const std::string &file) {
  std::vector<Tensor> out(g.inputs.size());
  std::vector<bool> seen(g.inputs.size(), false);
  std::string names;
  for (ValueId in : g.inputs) names += (names.empty() ? "" : ", ") + g.value(in).name;
  for (const auto &[key, t] : arrays) {
    size_t k = 0;
    while (k < g.inputs.size() && g.value(g.inputs[k]).name != key) ++k;
    if (k == g.inputs.size())
      return Error::user(file + ": array '" + key +
                         "' is not an input of the model (inputs: " + names + ")");
    out[k] = t;
    seen[k] = true;
  }
  for (size_t k = 0; k < g.inputs.size(); ++k)
    if (!seen[k])
      return Error::user(file + ": missing input '" + g.value(g.inputs[k]).name +
                         "' (inputs: " + names + ")");
  return out;
}

} // namespace coil
