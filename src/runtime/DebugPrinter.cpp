#include "runtime/DebugPrinter.h"

#include "runtime/Json.h"
#include "runtime/Metadata.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <coil/cuda_abi.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace coil::runtime {

namespace {

std::mutex g_readerMu;
DeviceReader g_reader;

DeviceReader deviceReader() {
  std::lock_guard<std::mutex> lock(g_readerMu);
  return g_reader;
}

std::string cudaResultText(const DeviceReader &r, int result) {
  const char *name = nullptr;
  if (r.errorName && r.errorName(result, &name) == 0 && name) return name;
  return "CUresult " + std::to_string(result);
}

std::string lower(std::string s) {
  for (char &c : s) c = char(std::tolower((unsigned char)c));
  return s;
}

std::string trim(const std::string &s) {
  size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

/// Element i of `data` as a double (integers exactly up to 2^53).
double elementAsDouble(DType t, const void *data, int64_t i) {
  const char *p = static_cast<const char *>(data);
  switch (t) {
  case DType::F64:
    return reinterpret_cast<const double *>(p)[i];
  case DType::F32:
    return reinterpret_cast<const float *>(p)[i];
  case DType::F16:
    return halfToFloat(reinterpret_cast<const uint16_t *>(p)[i]);
  case DType::BF16:
    return bf16ToFloat(reinterpret_cast<const uint16_t *>(p)[i]);
  case DType::I64:
    return double(reinterpret_cast<const int64_t *>(p)[i]);
  case DType::I32:
    return reinterpret_cast<const int32_t *>(p)[i];
  case DType::I16:
    return reinterpret_cast<const int16_t *>(p)[i];
  case DType::I8:
    return reinterpret_cast<const int8_t *>(p)[i];
  case DType::U64:
    return double(reinterpret_cast<const uint64_t *>(p)[i]);
  case DType::U32:
    return reinterpret_cast<const uint32_t *>(p)[i];
  case DType::U16:
    return reinterpret_cast<const uint16_t *>(p)[i];
  case DType::U8:
    return reinterpret_cast<const uint8_t *>(p)[i];
  case DType::Bool:
    return reinterpret_cast<const uint8_t *>(p)[i] ? 1 : 0;
  }
  return 0;
}

bool isFloatType(DType t) {
  return t == DType::F64 || t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

/// Element i as text in its own type: floats with enough digits to tell values apart, integers
/// exactly, bools as true/false.
std::string elementText(DType t, const void *data, int64_t i) {
  char buf[64];
  const char *p = static_cast<const char *>(data);
  switch (t) {
  case DType::F64:
    std::snprintf(buf, sizeof buf, "%.17g", reinterpret_cast<const double *>(p)[i]);
    break;
  case DType::F32:
    std::snprintf(buf, sizeof buf, "%.9g", double(reinterpret_cast<const float *>(p)[i]));
    break;
  case DType::F16:
  case DType::BF16:
    std::snprintf(buf, sizeof buf, "%.5g", elementAsDouble(t, data, i));
    break;
  case DType::I64:
    std::snprintf(buf, sizeof buf, "%" PRId64, reinterpret_cast<const int64_t *>(p)[i]);
    break;
  case DType::U64:
    std::snprintf(buf, sizeof buf, "%" PRIu64, reinterpret_cast<const uint64_t *>(p)[i]);
    break;
  case DType::Bool:
    return reinterpret_cast<const uint8_t *>(p)[i] ? "true" : "false";
  default:
    std::snprintf(buf, sizeof buf, "%.0f", elementAsDouble(t, data, i));
    break;
  }
  return buf;
}

/// A double that always reads as floating point ("1.0", never "1").
std::string floatText(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (std::isfinite(v) && s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

std::string listText(const int64_t *v, int64_t n) {
  std::string s = "[";
  for (int64_t i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

const char *npyDescr(DType t) {
  switch (t) {
  case DType::F64:
    return "<f8";
  case DType::F32:
    return "<f4";
  case DType::F16:
    return "<f2";
  case DType::BF16:
    return "<u2"; // bit patterns: numpy has no bfloat16
  case DType::I64:
    return "<i8";
  case DType::I32:
    return "<i4";
  case DType::I16:
    return "<i2";
  case DType::I8:
    return "|i1";
  case DType::U64:
    return "<u8";
  case DType::U32:
    return "<u4";
  case DType::U16:
    return "<u2";
  case DType::U8:
    return "|u1";
  case DType::Bool:
    return "|b1";
  }
  return "|u1";
}

/// A .npy file (format 1.0) of a contiguous row-major array.
bool writeNpy(const std::string &path, DType t, const int64_t *shape, int64_t rank,
              const void *data, size_t bytes) {
  std::string dict =
      std::string("{'descr': '") + npyDescr(t) + "', 'fortran_order': False, " + "'shape': (";
  for (int64_t d = 0; d < rank; ++d)
    dict += std::to_string(shape[d]) + (rank == 1 ? "," : d + 1 < rank ? ", " : "");
  dict += "), }";
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return false;
  const char magic[8] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
  f.write(magic, 8);
  uint16_t len = uint16_t(dict.size());
  const char lenBytes[2] = {char(len & 0xff), char(len >> 8)};
  f.write(lenBytes, 2);
  f << dict;
  if (bytes) f.write(static_cast<const char *>(data), std::streamsize(bytes));
  f.flush();
  return bool(f);
}

/// A file name part: letters, digits, '_', '-' and '.' kept, anything else '_'.
std::string fileSafe(const std::string &s) {
  std::string r;
  for (char c : s)
    r += (std::isalnum((unsigned char)c) || c == '_' || c == '-' || c == '.') ? c : '_';
  return r.empty() ? "_" : r;
}

/// A tensor of the printer: where its bytes are, on the host.
struct HostTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  size_t bytes = 0;
  const void *data = nullptr; ///< host data (points into `copy` for device tensors)
  std::vector<char> copy;
  std::string problem; ///< why the data cannot be read (empty: it can)
};

HostTensor hostTensor(DType t, const int64_t *shape, int64_t rank, const void *data, bool onDevice,
                      void *deviceCtx) {
  HostTensor h;
  h.dtype = t;
  h.shape.assign(shape, shape + rank);
  h.numel = 1;
  for (int64_t d : h.shape) h.numel *= d;
  h.bytes = size_t(h.numel) * dtypeSize(t);
  if (h.bytes == 0) return h;
  if (!data) {
    h.problem = "no storage";
    return h;
  }
  if (!onDevice) {
    h.data = data;
    return h;
  }
  DeviceReader r = deviceReader();
  if (!r.streamSynchronize || !r.memcpyDtoH) {
    h.problem = "device memory, and no device reader is registered";
    return h;
  }
  void *stream = deviceCtx ? static_cast<const coil_cuda_ctx *>(deviceCtx)->stream : nullptr;
  if (int rc = r.streamSynchronize(stream); rc != 0) {
    h.problem = "cannot read device memory: cuStreamSynchronize: " + cudaResultText(r, rc);
    return h;
  }
  h.copy.resize(h.bytes);
  if (int rc = r.memcpyDtoH(h.copy.data(), uint64_t(uintptr_t(data)), h.bytes); rc != 0) {
    h.problem = "cannot read device memory: cuMemcpyDtoH: " + cudaResultText(r, rc);
    h.copy.clear();
    return h;
  }
  h.data = h.copy.data();
  return h;
}

/// The print mode's description of one tensor.
std::string describe(const std::string &title, const HostTensor &t, bool onDevice) {
  std::string s = "  " + title + ": " + std::string(dtypeName(t.dtype)) + " shape " +
                  listText(t.shape.data(), int64_t(t.shape.size()));
  std::vector<int64_t> strides(t.shape.size());
  int64_t st = 1;
  for (size_t d = t.shape.size(); d-- > 0;) strides[d] = st, st *= t.shape[d];
  s += " strides " + listText(strides.data(), int64_t(strides.size()));
  s += std::string(" device ") + (onDevice ? "cuda" : "cpu") + " numel " + std::to_string(t.numel) +
       "\n";
  if (!t.problem.empty()) return s + "    (" + t.problem + ")\n";
  if (t.numel == 0) return s + "    (empty)\n";
  double mn = INFINITY, mx = -INFINITY, sum = 0;
  int64_t nans = 0, infs = 0, finite = 0;
  for (int64_t i = 0; i < t.numel; ++i) {
    double v = elementAsDouble(t.dtype, t.data, i);
    if (std::isnan(v)) {
      ++nans;
      continue;
    }
    if (std::isinf(v)) ++infs;
    mn = std::min(mn, v);
    mx = std::max(mx, v);
    sum += v;
    ++finite;
  }
  char buf[256];
  bool fl = isFloatType(t.dtype);
  auto num = [&](double v) {
    char b[64];
    if (fl || !std::isfinite(v))
      std::snprintf(b, sizeof b, "%.9g", v);
    else
      std::snprintf(b, sizeof b, "%.0f", v);
    return std::string(b);
  };
  if (finite == 0) {
    s += "    min nan max nan mean nan";
  } else {
    std::snprintf(buf, sizeof buf, "    min %s max %s mean %.9g", num(mn).c_str(), num(mx).c_str(),
                  sum / double(finite));
    s += buf;
  }
  s += " nan " + std::to_string(nans) + " inf " + std::to_string(infs) + "\n";
  if (t.numel <= 64) {
    s += "    values [";
    for (int64_t i = 0; i < t.numel; ++i) s += (i ? ", " : "") + elementText(t.dtype, t.data, i);
    s += "]\n";
  }
  return s;
}

} // namespace

void setDebugDeviceReader(DeviceReader reader) {
  std::lock_guard<std::mutex> lock(g_readerMu);
  g_reader = reader;
}

Status readDebugValue(const coil_debug_launch &launch, const coil_debug_value &value, void *dst,
                      size_t bytes) {
  if (value.kind != COIL_DEBUG_TENSOR)
    return Error::user("coil_debug_read_value: value '" +
                       std::string(value.name ? value.name : "?") + "' is not a tensor");
  if (bytes == 0) return okStatus();
  if (!value.data || !dst)
    return Error::user("coil_debug_read_value: value '" +
                       std::string(value.name ? value.name : "?") +
                       "' has no data, or dst is null");
  if (!value.on_device) {
    std::memcpy(dst, value.data, bytes);
    return okStatus();
  }
  DeviceReader r = deviceReader();
  if (!r.streamSynchronize || !r.memcpyDtoH)
    return Error::runtime("coil_debug_read_value: device memory, and no device reader is "
                          "registered (the CUDA runtime is not loaded)");
  void *stream =
      launch.device_ctx ? static_cast<const coil_cuda_ctx *>(launch.device_ctx)->stream : nullptr;
  if (int rc = r.streamSynchronize(stream); rc != 0)
    return Error::runtime("coil_debug_read_value: cuStreamSynchronize: " + cudaResultText(r, rc));
  if (int rc = r.memcpyDtoH(dst, uint64_t(uintptr_t(value.data)), bytes); rc != 0)
    return Error::runtime("coil_debug_read_value: cuMemcpyDtoH: " + cudaResultText(r, rc));
  return okStatus();
}

Expected<std::vector<LaunchSig>> parseLaunches(std::string_view text) {
  COIL_TRY(json::Value root, json::parse(text));
  std::vector<LaunchSig> out;
  const json::Value *l = root.isObject() ? root.get("launches") : nullptr;
  if (!l) return out;
  if (!l->isArray()) return Error::user("metadata.json: 'launches' must be an array");
  for (size_t i = 0; i < l->items.size(); ++i) {
    const json::Value &e = l->items[i];
    std::string where = "metadata.json: 'launches[" + std::to_string(i) + "]";
    if (!e.isObject()) return Error::user(where + "' must be an object");
    LaunchSig s;
    for (auto [key, field] : {std::pair{"name", &s.name}, std::pair{"kind", &s.kind},
                              std::pair{"function", &s.function}}) {
      const json::Value *v = e.get(key);
      if (!v || !v->isString()) return Error::user(where + "." + key + "' must be a string");
      *field = v->text;
    }
    if (s.name.empty()) return Error::user(where + ".name' must not be empty");
    out.push_back(std::move(s));
  }
  return out;
}

Expected<DebugConfig> debugConfig(const char *printer, const char *kernels, const char *dir,
                                  const std::vector<LaunchSig> &launches,
                                  const std::string &model) {
  DebugConfig c;
  std::string mode = lower(trim(printer ? printer : ""));
  if (mode.empty() || mode == "0" || mode == "off") return c;
  if (mode == "1" || mode == "save")
    c.mode = DebugMode::Save;
  else if (mode == "2" || mode == "print")
    c.mode = DebugMode::Print;
  else if (mode == "3" || mode == "names")
    c.mode = DebugMode::Names;
  else
    return Error::user("COIL_DEBUG_PRINTER must be 0 or off, 1 or save, 2 or print, 3 or names; "
                       "got '" +
                       std::string(printer) + "'");
  c.enabled.assign(launches.size(), kernels && *kernels ? 0 : 1);
  if (kernels && *kernels) {
    std::string list = kernels;
    size_t pos = 0;
    while (pos <= list.size()) {
      size_t comma = list.find(',', pos);
      if (comma == std::string::npos) comma = list.size();
      std::string given = trim(list.substr(pos, comma - pos)), name = lower(given);
      pos = comma + 1;
      if (name.empty()) continue;
      bool found = false;
      for (size_t i = 0; i < launches.size(); ++i)
        if (lower(launches[i].name) == name || lower(launches[i].function) == name)
          c.enabled[i] = 1, found = true;
      if (found) continue;
      std::string valid, functions;
      for (const LaunchSig &l : launches) {
        valid += (valid.empty() ? "" : ", ") + l.name;
        if (l.function != l.name && functions.find(l.function) == std::string::npos)
          functions += (functions.empty() ? "" : ", ") + l.function;
      }
      return Error::user(
          "COIL_DEBUG_KERNELS names '" + given + "', which is not a launch of model '" + model +
          "'; valid names: " +
          (valid.empty() ? "(none: the package has no debug instrumentation)" : valid) +
          (functions.empty() ? ""
                             : " (or an extern function for all its "
                               "launches: " +
                                   functions + ")"));
    }
  }
  if (c.mode == DebugMode::Save) {
    c.dir = dir && *dir ? dir : "coil-debug";
    std::error_code ec;
    std::filesystem::create_directories(c.dir, ec);
    if (ec || !std::filesystem::is_directory(c.dir))
      return Error::user("COIL_DEBUG_DIR '" + c.dir + "' is not a directory that can be created: " +
                         (ec ? ec.message() : "a file of that name exists"));
  }
  return c;
}

Expected<std::unique_ptr<DebugPrinter>>
DebugPrinter::fromEnvironment(const std::vector<LaunchSig> &launches, const std::string &model) {
  COIL_TRY(DebugConfig c,
           debugConfig(std::getenv("COIL_DEBUG_PRINTER"), std::getenv("COIL_DEBUG_KERNELS"),
                       std::getenv("COIL_DEBUG_DIR"), launches, model));
  if (c.mode == DebugMode::Off) return std::unique_ptr<DebugPrinter>();
  return std::make_unique<DebugPrinter>(std::move(c), launches);
}

DebugPrinter::DebugPrinter(DebugConfig config, std::vector<LaunchSig> launches)
    : config_(std::move(config)), launches_(std::move(launches)) {
  config_.enabled.resize(launches_.size(), 1);
  hooks_.abi_version = COIL_DEBUG_ABI_VERSION;
  hooks_.num_launches = uint32_t(launches_.size());
  hooks_.enabled = config_.enabled.data();
  hooks_.ctx = this;
  hooks_.report = &DebugPrinter::reportHook;
}

int32_t DebugPrinter::reportHook(void *ctx, const coil_debug_launch *launch) {
  try {
    return static_cast<DebugPrinter *>(ctx)->report(*launch);
  } catch (const std::exception &e) {
    if (launch->error && launch->error_size)
      std::snprintf(launch->error, launch->error_size, "debug printer: %s", e.what());
    return 1;
  }
}

int32_t DebugPrinter::report(const coil_debug_launch &l) {
  std::lock_guard<std::mutex> lock(mu_);
  const char *when = l.when == COIL_DEBUG_AFTER ? "after" : "before";
  std::string head = std::string("[") + when + "_launch: " + l.name + "]\n";
  if (config_.mode == DebugMode::Names) {
    std::fputs(head.c_str(), stderr);
    std::fflush(stderr);
    return 0;
  }
  std::string out = head;
  for (int32_t i = 0; i < l.num_values; ++i) {
    const coil_debug_value &v = l.values[i];
    std::string name = v.name ? v.name : "?";
    if (v.kind == COIL_DEBUG_SIZE) {
      if (config_.mode == DebugMode::Print)
        out += "  " + name + ": i64 = " + std::to_string(v.size) + "\n";
      continue;
    }
    if (v.kind == COIL_DEBUG_FLOAT) {
      if (config_.mode == DebugMode::Print)
        out += "  " + name + ": f64 = " + floatText(v.number) + "\n";
      continue;
    }
    if (v.dtype < 0 || v.dtype > int32_t(DType::Bool) || v.rank < 0 || v.rank > COIL_MAX_RANK) {
      out += "  " + name + ": (malformed debug value)\n";
      continue;
    }
    DType t = DType(v.dtype);
    HostTensor h = hostTensor(t, v.shape, v.rank, v.data, v.on_device != 0, l.device_ctx);
    if (config_.mode == DebugMode::Print) {
      std::string title = name;
      if (v.buffer && name != v.buffer) title += " (buffer " + std::string(v.buffer) + ")";
      if (v.written) title += " [written]";
      out += describe(title, h, v.on_device != 0);
      continue;
    }
    // save
    if (!h.problem.empty()) {
      out += "  " + name + ": not saved (" + h.problem + ")\n";
      continue;
    }
    std::string path =
        (std::filesystem::path(config_.dir) /
         (std::string(when) + "_" + fileSafe(l.name) + "_" + fileSafe(name) + ".npy"))
            .string();
    if (!writeNpy(path, t, h.shape.data(), int64_t(h.shape.size()), h.data, h.bytes)) {
      if (l.error && l.error_size)
        std::snprintf(l.error, l.error_size, "debug printer: cannot write '%s'", path.c_str());
      return 1;
    }
    if (t == DType::BF16 && !bf16Noted_) {
      bf16Noted_ = true;
      out += "  note: bf16 tensors are saved as uint16 bit patterns (numpy has no bfloat16; "
             "(x.astype(np.uint32) << 16).view(np.float32) gives the values)\n";
    }
  }
  if (config_.mode == DebugMode::Save && out == head) return 0; // saved, nothing to tell
  std::fputs(out.c_str(), stderr);
  std::fflush(stderr);
  return 0;
}

Status DebugPrinter::reportInputs(const std::vector<std::string> &names, const coil_tensor *inputs,
                                  int64_t n, bool onDevice, void *deviceCtx) {
  if (config_.mode != DebugMode::Print && config_.mode != DebugMode::Save) return okStatus();
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (int64_t i = 0; i < n; ++i) {
    const coil_tensor &t = inputs[i];
    std::string name = i < int64_t(names.size()) ? names[size_t(i)] : "input" + std::to_string(i);
    HostTensor h = hostTensor(DType(int(t.dtype)), t.shape, t.rank, t.data, onDevice, deviceCtx);
    if (config_.mode == DebugMode::Print) {
      out += "[model input: " + name + "]\n" + describe(name, h, onDevice);
      continue;
    }
    if (!h.problem.empty()) continue;
    std::string path =
        (std::filesystem::path(config_.dir) / ("input_" + fileSafe(name) + ".npy")).string();
    if (!writeNpy(path, h.dtype, h.shape.data(), int64_t(h.shape.size()), h.data, h.bytes))
      return Error::runtime("debug printer: cannot write '" + path + "'");
  }
  std::fputs(out.c_str(), stderr);
  std::fflush(stderr);
  return okStatus();
}

} // namespace coil::runtime
