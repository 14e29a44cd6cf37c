// Tests of .npy/.npz reading and writing.
#include "io/Npz.h"

#include <cstdio>
#include <filesystem>
#include <gtest/gtest.h>

using namespace coil;

namespace {
std::string tmpPath(const std::string &name) {
  return (std::filesystem::temp_directory_path() / ("coil_npz_test_" + name)).string();
}
} // namespace

TEST(Npz, RoundTripsEveryDType) {
  NamedTensors arrays;
#define COIL_ADD(E, N, T, S)                                                                       \
  arrays.emplace_back(N, Tensor::fromDoubles(DType::E, {2, 3}, {1, 0, 3, 1, 5, 0}));
  COIL_FOR_EACH_DTYPE(COIL_ADD)
#undef COIL_ADD
  arrays.emplace_back("scalar", Tensor::scalar(DType::F32, 2.5));
  arrays.emplace_back("empty", Tensor(DType::I64, {0, 4}));
  arrays.emplace_back("a/b:c", Tensor::fromInts(DType::I32, {3}, {-1, 2, -3}));
  std::string p = tmpPath("all.npz");
  ASSERT_TRUE(writeNpz(p, arrays).ok());
  auto back = readNpz(p);
  ASSERT_TRUE(back.ok()) << back.error().render();
  ASSERT_EQ(back->size(), arrays.size());
  for (size_t i = 0; i < arrays.size(); ++i) {
    EXPECT_EQ((*back)[i].first, arrays[i].first);
    EXPECT_TRUE((*back)[i].second.identical(arrays[i].second)) << arrays[i].first;
  }
  std::remove(p.c_str());
}

TEST(Npz, ReadsFortranOrder) {
  // 2x3 array [[0,1,2],[3,4,5]] stored column-major: 0 3 1 4 2 5.
  std::string h = "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }";
  h.append(64 - (10 + h.size() + 1) % 64, ' ');
  h += '\n';
  std::string img = std::string("\x93NUMPY\x01\x00", 8);
  img += char(h.size() & 0xff);
  img += char(h.size() >> 8);
  img += h;
  int32_t col[] = {0, 3, 1, 4, 2, 5};
  img.append(reinterpret_cast<const char *>(col), sizeof col);
  auto t = parseNpy(img, "f.npy");
  ASSERT_TRUE(t.ok()) << t.error().render();
  EXPECT_EQ(t->toInts(), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
}

TEST(Npz, RejectsShapesWhoseDimsOverflow) {
  // Found by the npz fuzz target: an empty array (one dim 0) whose other dims multiply past
  // int64 passed the size check (0 bytes) and overflowed the element count after it.
  for (const char *shape : {"(999999999999999, 99999, 0)", "(0, 4294967296, 4294967296)",
                            "(1048576, 1048576, 1048576, 0)"}) {
    std::string h = std::string("{'descr': '<f4', 'fortran_order': False, 'shape': ") + shape +
                    ", }";
    h.append(64 - (10 + h.size() + 1) % 64, ' ');
    h += '\n';
    std::string img = std::string("\x93NUMPY\x01\x00", 8);
    img += char(h.size() & 0xff);
    img += char(h.size() >> 8);
    img += h;
    auto t = parseNpy(img, "e.npy");
    ASSERT_FALSE(t.ok()) << shape;
    EXPECT_NE(t.error().message().find("more than 2^59 elements"), std::string::npos)
        << t.error().message();
  }
}

TEST(Npz, RejectsBadImages) {
  EXPECT_FALSE(parseNpy("", "x").ok());
  EXPECT_FALSE(parseNpy("\x93NUMPY\x01\x00\xff\xff", "x").ok());
  Tensor t = Tensor::fromDoubles(DType::F32, {4}, {1, 2, 3, 4});
  std::string img = serializeNpy(t);
  auto truncated = parseNpy(img.substr(0, img.size() - 3), "x.npy");
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.error().message().find("shorter"), std::string::npos);
  std::string bad = img;
  bad.replace(bad.find("<f4"), 3, "<c8");
  auto unsupported = parseNpy(bad, "x.npy");
  ASSERT_FALSE(unsupported.ok());
  EXPECT_NE(unsupported.error().message().find("unsupported array dtype '<c8'"), std::string::npos);
  auto missing = readNpz(tmpPath("does-not-exist.npz"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("cannot open"), std::string::npos);
}

TEST(Npz, ReadsArchivesInMemoryAndChecksDeclaredSizes) {
  NamedTensors arrays;
  arrays.emplace_back("x", Tensor::fromDoubles(DType::F32, {2, 3}, {1, -2, 3, 4.5, 0, 6}));
  arrays.emplace_back("i", Tensor::fromInts(DType::I64, {2}, {7, -8}));
  std::string p = tmpPath("mem.npz");
  ASSERT_TRUE(writeNpz(p, arrays).ok());
  std::string bytes;
  {
    FILE *f = std::fopen(p.c_str(), "rb");
    ASSERT_NE(f, nullptr);
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) bytes.append(buf, n);
    std::fclose(f);
  }
  std::remove(p.c_str());
  auto back = readNpzBytes(bytes, "mem.npz");
  ASSERT_TRUE(back.ok()) << back.error().render();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_TRUE((*back)[0].second.identical(arrays[0].second));
  EXPECT_TRUE((*back)[1].second.identical(arrays[1].second));

  // The first entry's size claimed as 4 GB in the local header and in the central directory
  // (an uncompressed archive as writeNpz writes it): rejected from the bytes that are there,
  // not after allocating the claim.
  std::string bomb = bytes;
  auto claim = [&](const std::string &sig, size_t off) {
    size_t at = bomb.find(sig);
    ASSERT_NE(at, std::string::npos);
    for (int k = 0; k < 4; ++k) bomb[at + off + k] = char(k == 3 ? 0xf0 : 0);
  };
  claim(std::string("PK\x03\x04", 4), 22);
  claim(std::string("PK\x01\x02", 4), 24);
  auto r = readNpzBytes(bomb, "bomb.npz");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::User);
  EXPECT_NE(r.error().message().find("its header says 4026531840"), std::string::npos)
      << r.error().message();
  EXPECT_FALSE(readNpzBytes("PK not a zip", "junk.npz").ok());
}
