// ONNX TensorProto decoding (see OnnxTensor.h): raw data, the typed fields and external data.
#include "frontend/onnx/OnnxTensor.h"

#include "frontend/onnx/ImporterInternal.h"

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace coil {

namespace importer {

std::optional<DType> onnxDType(int32_t t) {
  switch (t) {
  case onnx::TensorProto::FLOAT:
    return DType::F32;
  case onnx::TensorProto::DOUBLE:
    return DType::F64;
  case onnx::TensorProto::FLOAT16:
    return DType::F16;
  case onnx::TensorProto::BFLOAT16:
    return DType::BF16;
  case onnx::TensorProto::INT64:
    return DType::I64;
  case onnx::TensorProto::INT32:
    return DType::I32;
  case onnx::TensorProto::INT16:
    return DType::I16;
  case onnx::TensorProto::INT8:
    return DType::I8;
  case onnx::TensorProto::UINT64:
    return DType::U64;
  case onnx::TensorProto::UINT32:
    return DType::U32;
  case onnx::TensorProto::UINT16:
    return DType::U16;
  case onnx::TensorProto::UINT8:
    return DType::U8;
  case onnx::TensorProto::BOOL:
    return DType::Bool;
  default:
    return std::nullopt;
  }
}

namespace {

std::string onnxDTypeName(int32_t t) {
  if (onnx::TensorProto::DataType_IsValid(t)) {
    std::string n = onnx::TensorProto::DataType_Name(onnx::TensorProto::DataType(t));
    std::transform(n.begin(), n.end(), n.begin(), [](char c) { return char(std::tolower(c)); });
    return n;
  }
  return "type " + std::to_string(t);
}

} // namespace
} // namespace importer

using namespace importer;

// --- TensorProto decoding

Expected<DType> dtypeFromOnnx(int32_t elemType, const std::string &tensorName) {
  auto dt = onnxDType(elemType);
  if (!dt)
    return Error::user("tensor '" + tensorName + "' has unsupported element type " +
                       onnxDTypeName(elemType));
  return *dt;
}

Expected<Tensor> tensorFromProto(const onnx::TensorProto &tp, const std::string &baseDir) {
  const std::string name = tp.name();
  COIL_TRY(DType dt, dtypeFromOnnx(tp.data_type(), name));
  Shape shape;
  int64_t numel = 1;
  for (int64_t d : tp.dims()) {
    if (d < 0) return Error::user("tensor '" + name + "' has negative dim " + std::to_string(d));
    if (d > 0 && numel > (int64_t(1) << 40) / d)
      return Error::user("tensor '" + name + "' is too large");
    numel *= d;
    shape.push_back(d);
  }
  if (tp.has_segment())
    return Error::user("tensor '" + name + "' is segmented, which is not supported");
  size_t nbytes = size_t(numel) * dtypeSize(dt);
  auto sizeError = [&](const std::string &field, int64_t got) {
    return Error::user("tensor '" + name + "' of shape " + shapeStr(shape) + " has " +
                       std::to_string(got) + " elements in " + field + ", expected " +
                       std::to_string(numel));
  };
  if (tp.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string location;
    int64_t offset = 0, length = -1;
    for (const auto &kv : tp.external_data()) {
      if (kv.key() == "location") {
        location = kv.value();
      } else if (kv.key() == "offset" || kv.key() == "length") {
        char *end = nullptr;
        errno = 0;
        long long v = std::strtoll(kv.value().c_str(), &end, 10);
        if (kv.value().empty() || *end != '\0' || v < 0 || errno == ERANGE)
          return Error::user("tensor '" + name + "' has a bad external data " + kv.key() + " '" +
                             kv.value() + "'");
        (kv.key() == "offset" ? offset : length) = v;
      }
    }
    if (location.empty())
      return Error::user("tensor '" + name + "' has external data without a location");
    bool escapes = location[0] == '/' || location == ".." || location.rfind("../", 0) == 0 ||
                   location.find("/../") != std::string::npos ||
                   (location.size() >= 3 && location.compare(location.size() - 3, 3, "/..") == 0);
    if (escapes)
      return Error::user("tensor '" + name + "' has external data location '" + location +
                         "' outside the model's folder");
    std::string file = baseDir + "/" + location;
    // The text is inside the folder; the file it names must be too, after symbolic links.
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::path real = fs::canonical(file, ec);
    if (ec)
      return Error::user("external data file '" + file + "' of tensor '" + name +
                         "' cannot be opened: " + ec.message());
    fs::path folder = fs::canonical(baseDir, ec);
    if (ec)
      return Error::user("the folder '" + baseDir + "' of tensor '" + name +
                         "' cannot be resolved: " + ec.message());
    auto rel = real.lexically_relative(folder);
    if (rel.empty() || *rel.begin() == "..")
      return Error::user("tensor '" + name + "' has external data location '" + location +
                         "', which resolves (through symbolic links) to '" + real.string() +
                         "', outside the model's folder '" + folder.string() + "'");
    if (!fs::is_regular_file(real, ec))
      return Error::user("external data file '" + file + "' of tensor '" + name +
                         "' is not a regular file");
    std::ifstream f(real, std::ios::binary);
    if (!f)
      return Error::user("external data file '" + file + "' of tensor '" + name +
                         "' cannot be opened");
    f.seekg(0, std::ios::end);
    int64_t fileSize = int64_t(f.tellg());
    if (offset > fileSize)
      return Error::user("external data of tensor '" + name + "' starts at offset " +
                         std::to_string(offset) + ", past the end of '" + file + "' (" +
                         std::to_string(fileSize) + " bytes)");
    if (length < 0) length = fileSize - offset;
    if (length != int64_t(nbytes))
      return Error::user("tensor '" + name + "' needs " + std::to_string(nbytes) +
                         " bytes of external data, got length " + std::to_string(length));
    if (length > fileSize - offset) // offset <= fileSize: no overflow
      return Error::user("external data of tensor '" + name + "' (offset " +
                         std::to_string(offset) + ", length " + std::to_string(length) +
                         ") runs past the end of '" + file + "' (" + std::to_string(fileSize) +
                         " bytes)");
    Tensor t(dt, shape);
    f.seekg(offset);
    f.read(static_cast<char *>(t.data()), std::streamsize(nbytes));
    if (!f) return Error::runtime("cannot read external data file '" + file + "'");
    return t;
  }
  if (tp.has_raw_data()) {
    if (tp.raw_data().size() != nbytes)
      return Error::user("tensor '" + name + "' of shape " + shapeStr(shape) + " and type " +
                         std::string(dtypeName(dt)) + " needs " + std::to_string(nbytes) +
                         " bytes of raw_data, got " + std::to_string(tp.raw_data().size()));
    return Tensor::fromBytes(dt, shape, tp.raw_data().data(), nbytes);
  }
  // Typed fields: the count is checked before the tensor is allocated, so a declared shape
  // without its data costs nothing.
  auto typedCount = [&]() -> std::pair<const char *, int64_t> {
    switch (dt) {
    case DType::F32:
      return {"float_data", tp.float_data_size()};
    case DType::F64:
      return {"double_data", tp.double_data_size()};
    case DType::I64:
      return {"int64_data", tp.int64_data_size()};
    case DType::U32:
    case DType::U64:
      return {"uint64_data", tp.uint64_data_size()};
    default: // f16 bf16 i32 i16 i8 u16 u8 bool
      return {"int32_data", tp.int32_data_size()};
    }
  };
  auto [field, count] = typedCount();
  if (count != numel) return sizeError(field, count);
  Tensor t(dt, shape);
  switch (dt) {
  case DType::F32:
    for (int64_t i = 0; i < numel; ++i) t.dataAs<float>()[i] = tp.float_data(int(i));
    break;
  case DType::F64:
    for (int64_t i = 0; i < numel; ++i) t.dataAs<double>()[i] = tp.double_data(int(i));
    break;
  case DType::I64:
    for (int64_t i = 0; i < numel; ++i) t.dataAs<int64_t>()[i] = tp.int64_data(int(i));
    break;
  case DType::U32:
  case DType::U64:
    for (int64_t i = 0; i < numel; ++i) t.setInt(i, int64_t(tp.uint64_data(int(i))));
    break;
  case DType::F16:
  case DType::BF16:
    for (int64_t i = 0; i < numel; ++i) // the 16 bits of each value
      t.dataAs<uint16_t>()[i] = uint16_t(tp.int32_data(int(i)) & 0xffff);
    break;
  default: // i32 i16 i8 u16 u8 bool
    for (int64_t i = 0; i < numel; ++i)
      t.setInt(i, dt == DType::Bool ? int64_t(tp.int32_data(int(i)) != 0)
                                    : int64_t(tp.int32_data(int(i))));
    break;
  }
  return t;
}

Expected<Tensor> readTensorProtoFile(const std::string &path) {
  COIL_TRY(std::string bytes, readFileBytes(path, "tensor file"));
  onnx::TensorProto tp;
  if (!tp.ParseFromString(bytes))
    return Error::user("'" + path + "' is not a serialized onnx TensorProto", SourceLoc{path});
  auto t = tensorFromProto(tp, dirOf(path));
  if (!t.ok()) return t.error().withDefaultLoc(SourceLoc{path});
  return t;
}

} // namespace coil
