// .npy parsing/serialization and .npz archives through libzip.
#include "io/Npz.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <zip.h>

namespace coil {

namespace {

struct Descr {
  const char *text;
  DType dtype;
};
constexpr Descr kDescrs[] = {
    {"<f8", DType::F64},  {"<f4", DType::F32}, {"<f2", DType::F16}, {"<V2", DType::BF16},
    {"<i8", DType::I64},  {"<i4", DType::I32}, {"<i2", DType::I16}, {"|i1", DType::I8},
    {"<u8", DType::U64},  {"<u4", DType::U32}, {"<u2", DType::U16}, {"|u1", DType::U8},
    {"|b1", DType::Bool}, {"<i1", DType::I8},  {"<u1", DType::U8},  {"<b1", DType::Bool},
    {"|V2", DType::BF16},
};

/// Value of `'key': ...` in the header dict, up to the next top-level ',' or '}'.
std::string headerField(const std::string &h, const std::string &key) {
  size_t k = h.find("'" + key + "'");
  if (k == std::string::npos) return {};
  size_t p = h.find(':', k);
  if (p == std::string::npos) return {};
  ++p;
  while (p < h.size() && h[p] == ' ') ++p;
  int depth = 0;
  size_t e = p;
  for (; e < h.size(); ++e) {
    char c = h[e];
    if (c == '(' || c == '[')
      ++depth;
    else if (c == ')' || c == ']')
      --depth;
    else if ((c == ',' || c == '}') && depth == 0)
      break;
  }
  return h.substr(p, e - p);
}

} // namespace

Expected<Tensor> parseNpy(const std::string &b, const std::string &what) {
  auto bad = [&](const std::string &why) {
    return Error::user(what + ": not a valid .npy array: " + why);
  };
  if (b.size() < 10 || b.compare(0, 6, "\x93NUMPY") != 0)
    return bad("missing the \\x93NUMPY magic");
  int major = static_cast<unsigned char>(b[6]);
  size_t hlen, hstart;
  if (major == 1) {
    hlen = size_t(static_cast<unsigned char>(b[8])) | size_t(static_cast<unsigned char>(b[9])) << 8;
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (b.size() < 12) return bad("truncated header");
    hlen = 0;
    for (int i = 0; i < 4; ++i) hlen |= size_t(static_cast<unsigned char>(b[8 + i])) << (8 * i);
    hstart = 12;
  } else {
    return bad("unsupported format version " + std::to_string(major));
  }
  if (hstart + hlen > b.size()) return bad("truncated header");
  std::string h = b.substr(hstart, hlen);
  std::string descr = headerField(h, "descr");
  if (descr.size() < 2 || (descr.front() != '\'' && descr.front() != '"'))
    return bad("missing 'descr'");
  descr = descr.substr(1, descr.size() - 2);
  const Descr *d = nullptr;
  for (const Descr &x : kDescrs)
    if (descr == x.text) d = &x;
  if (!d)
    return Error::user(what + ": unsupported array dtype '" + descr +
                       "' (coil reads f64 f32 f16 i64 i32 i16 i8 u64 u32 u16 u8 bool)");
  std::string fortran = headerField(h, "fortran_order");
  if (fortran != "True" && fortran != "False") return bad("missing 'fortran_order'");
  std::string shapeText = headerField(h, "shape");
  if (shapeText.size() < 2 || shapeText.front() != '(' || shapeText.back() != ')')
    return bad("missing 'shape'");
  Shape shape;
  {
    std::string inner = shapeText.substr(1, shapeText.size() - 2);
    std::stringstream ss(inner);
    std::string item;
    while (std::getline(ss, item, ',')) {
      size_t s = item.find_first_not_of(' ');
      if (s == std::string::npos) continue;
      item = item.substr(s);
      while (!item.empty() && (item.back() == ' ' || item.back() == 'L')) item.pop_back();
      if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos ||
          item.size() > 15)
        return bad("bad shape " + shapeText);
      shape.push_back(std::stoll(item));
    }
  }
  size_t dataStart = hstart + hlen;
  // Guard against overflow in the element count before comparing sizes. Dims are bounded
  // together, zeros left out (strides and Tensor's own check multiply the others even when one
  // of them is 0), by the bound of every tensor (ir/Tensor.h).
  long double elems = 1, extent = 1;
  for (int64_t x : shape) {
    elems *= (long double)x;
    extent *= (long double)std::max<int64_t>(x, 1);
  }
  if (extent > (long double)kMaxTensorElements)
    return bad("shape " + shapeStr(shape) + " is too large (more than 2^59 elements)");
  if (elems * dtypeSize(d->dtype) > (long double)(b.size() - dataStart))
    return bad("data is shorter than the shape " + shapeStr(shape) + " needs");
  size_t nbytes = size_t(numelOf(shape)) * dtypeSize(d->dtype);
  if (fortran == "False") return Tensor::fromBytes(d->dtype, shape, b.data() + dataStart, nbytes);
  // Fortran order: element (i0..in) lives at sum(i_k * fstride_k), fstride ascending.
  Tensor t(d->dtype, shape);
  size_t es = dtypeSize(d->dtype);
  std::vector<int64_t> fstride(shape.size(), 1);
  for (size_t k = 1; k < shape.size(); ++k) fstride[k] = fstride[k - 1] * shape[k - 1];
  std::vector<int64_t> idx;
  int64_t n = numelOf(shape);
  for (int64_t f = 0; f < n; ++f) {
    idx.assign(shape.size(), 0);
    int64_t rem = f;
    for (int64_t k = int64_t(shape.size()) - 1; k >= 0; --k) {
      idx[size_t(k)] = rem % shape[size_t(k)];
      rem /= shape[size_t(k)];
    }
    int64_t off = 0;
    for (size_t k = 0; k < shape.size(); ++k) off += idx[k] * fstride[k];
    std::memcpy(static_cast<char *>(t.data()) + size_t(f) * es,
                b.data() + dataStart + size_t(off) * es, es);
  }
  return t;
}

std::string serializeNpy(const Tensor &t) {
  const char *descr = "<f4";
  for (const Descr &x : kDescrs)
    if (x.dtype == t.dtype()) {
      descr = x.text;
      break;
    }
  std::string shape = "(";
  for (int64_t d : t.shape()) shape += std::to_string(d) + ", ";
  if (t.rank() > 1)
    shape.resize(shape.size() - 2);
  else if (t.rank() == 1)
    shape.resize(shape.size() - 1); // "(3,)"
  shape += ")";
  std::string h =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + h.size() + 1;
  h.append((64 - total % 64) % 64, ' ');
  h += '\n';
  std::string out = "\x93NUMPY";
  out += char(1);
  out += char(0);
  out += char(h.size() & 0xff);
  out += char((h.size() >> 8) & 0xff);
  out += h;
  out.append(static_cast<const char *>(t.data()), t.nbytes());
  return out;
}

namespace {

/// Every `.npy` entry of an open archive, in archive order; `path` names it in errors.
Expected<NamedTensors> readEntries(zip_t *z, const std::string &path) {
  NamedTensors out;
  zip_int64_t n = zip_get_num_entries(z, 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t st;
    if (zip_stat_index(z, zip_uint64_t(i), 0, &st) != 0)
      return Error::user(path + ": cannot read archive entry " + std::to_string(i));
    std::string name = st.name;
    if (name.size() < 4 || name.compare(name.size() - 4, 4, ".npy") != 0)
      return Error::user(path + ": entry '" + name + "' is not a .npy array");
    if (st.size > (zip_uint64_t(1) << 40))
      return Error::user(path + ": entry '" + name + "' is too large");
    zip_file_t *f = zip_fopen_index(z, zip_uint64_t(i), 0);
    if (!f) return Error::user(path + ": cannot read entry '" + name + "': " + zip_strerror(z));
    // The size in the archive's directory is only a claim (a 2 KB archive can declare 3 GB):
    // memory grows with the bytes that actually arrive, in chunks, and the total must match it.
    std::string bytes;
    bytes.reserve(size_t(std::min<zip_uint64_t>(st.size, zip_uint64_t(1) << 24)));
    zip_uint64_t total = 0;
    bool failed = false;
    while (total <= st.size) {
      size_t chunk = size_t(std::min<zip_uint64_t>(st.size - total + 1, zip_uint64_t(1) << 24));
      bytes.resize(size_t(total) + chunk);
      zip_int64_t got = zip_fread(f, bytes.data() + total, chunk);
      if (got < 0) {
        failed = true;
        break;
      }
      if (got == 0) break;
      total += zip_uint64_t(got);
    }
    zip_fclose(f);
    bytes.resize(size_t(std::min(total, st.size + 1)));
    if (failed || total != st.size)
      return Error::user(path + ": entry '" + name + "' is truncated or corrupt (" +
                         std::to_string(total) + " bytes, its header says " +
                         std::to_string(st.size) + ")");
    COIL_TRY(Tensor t, parseNpy(bytes, path + ": '" + name + "'"));
    out.emplace_back(name.substr(0, name.size() - 4), std::move(t));
  }
  return out;
}

} // namespace

Expected<NamedTensors> readNpz(const std::string &path) {
  int err = 0;
  zip_t *z = zip_open(path.c_str(), ZIP_RDONLY, &err);
  if (!z) {
    std::ifstream probe(path);
    if (!probe) return Error::user(path + ": cannot open the .npz file");
    return Error::user(path + ": not a valid .npz (zip) archive");
  }
  std::unique_ptr<zip_t, int (*)(zip_t *)> guard(z, zip_close);
  return readEntries(z, path);
}

Expected<NamedTensors> readNpzBytes(std::string_view bytes, const std::string &what) {
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t *src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &error);
  if (!src) {
    zip_error_fini(&error);
    return Error::runtime(what + ": cannot read the .npz image");
  }
  zip_t *z = zip_open_from_source(src, ZIP_RDONLY, &error);
  zip_error_fini(&error);
  if (!z) {
    zip_source_free(src);
    return Error::user(what + ": not a valid .npz (zip) archive");
  }
  std::unique_ptr<zip_t, int (*)(zip_t *)> guard(z, zip_close);
  return readEntries(z, what);
}

Status writeNpz(const std::string &path, const NamedTensors &arrays) {
  int err = 0;
  zip_t *z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  if (!z) return Error::runtime(path + ": cannot create the .npz file");
  std::vector<std::string> images; // must outlive zip_close
  images.reserve(arrays.size());
  for (const auto &[name, t] : arrays) {
    images.push_back(serializeNpy(t));
    zip_source_t *src = zip_source_buffer(z, images.back().data(), images.back().size(), 0);
    if (!src) {
      zip_discard(z);
      return Error::runtime(path + ": cannot add '" + name + "'");
    }
    zip_int64_t idx =
        zip_file_add(z, (name + ".npy").c_str(), src, ZIP_FL_ENC_UTF_8 | ZIP_FL_OVERWRITE);
    if (idx < 0) {
      zip_source_free(src);
      zip_discard(z);
      return Error::runtime(path + ": cannot add '" + name + "'");
    }
    zip_set_file_compression(z, zip_uint64_t(idx), ZIP_CM_STORE, 0);
    zip_file_set_mtime(z, zip_uint64_t(idx), 0, 0); // deterministic archives
  }
  if (zip_close(z) != 0) {
    std::string msg = zip_strerror(z);
    zip_discard(z);
    return Error::runtime(path + ": cannot write the .npz file: " + msg);
  }
  return okStatus();
}

Expected<Tensor> readNpy(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Error::user(path + ": cannot open the .npy file");
  std::stringstream ss;
  ss << f.rdbuf();
  return parseNpy(ss.str(), path);
}

Status writeNpy(const std::string &path, const Tensor &t) {
  std::ofstream f(path, std::ios::binary);
  if (!f) return Error::runtime(path + ": cannot create the .npy file");
  std::string img = serializeNpy(t);
  f.write(img.data(), std::streamsize(img.size()));
  if (!f) return Error::runtime(path + ": cannot write the .npy file");
  return okStatus();
}

} // namespace coil
