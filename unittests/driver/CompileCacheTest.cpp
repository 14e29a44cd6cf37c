// The compile cache (src/driver/CompileCache.h) and the toolchain's use of it (issue 15, defect
// 8): entries verified before use (a truncated or altered entry is a miss and is removed, never
// "cached"), stored atomically, keyed by SHA-256, bounded in size (least recently used first),
// COIL_CACHE_DIR / COIL_CACHE_MAX.
#include "driver/CompileCache.h"

#include "../wrapper/WrapperTestUtil.h"
#include "driver/Toolchain.h"

#include <chrono>
#include <cstdlib>
#include <dlfcn.h>
#include <filesystem>
#include <thread>

namespace coil {
namespace {

using wrapper::testing::readFile;
using wrapper::testing::TempDir;
using wrapper::testing::writeFile;
namespace fs = std::filesystem;

/// Sets an environment variable for the scope.
struct ScopedEnv {
  ScopedEnv(const char *name, const char *value) : name(name) {
    if (const char *old = std::getenv(name)) saved = old, had = true;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (had)
      setenv(name, saved.c_str(), 1);
    else
      unsetenv(name);
  }
  const char *name;
  std::string saved;
  bool had = false;
};

std::vector<std::string> entries(const std::string &dir) {
  std::vector<std::string> out;
  for (auto &e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(CompileCache, StoresVerifiesAndRemovesDamagedEntries) {
  TempDir dir;
  CompileCache cache(dir.path + "/cache", 1 << 20);
  EXPECT_EQ(cache.load("a.so"), std::nullopt);
  cache.store("a.so", "payload of a");
  EXPECT_EQ(cache.load("a.so"), std::optional<std::string>("payload of a"));
  EXPECT_EQ(entries(cache.dir()), std::vector<std::string>{"a.so"}); // no temporary left
  // fetch writes the payload, not the header.
  ASSERT_TRUE(cache.fetch("a.so", dir.path + "/out.so"));
  EXPECT_EQ(readFile(dir.path + "/out.so"), "payload of a");
  // Truncated, one byte changed, header damaged: each a miss, and the entry is gone.
  std::string full = readFile(cache.dir() + "/a.so");
  std::vector<std::string> damaged = {full.substr(0, full.size() - 1), full, "",
                                      "coil-cache 1 abc 3\nabc"};
  damaged[1][damaged[1].size() - 3] ^= 1;
  for (const std::string &d : damaged) {
    writeFile(cache.dir() + "/a.so", d);
    EXPECT_EQ(cache.load("a.so"), std::nullopt);
    EXPECT_FALSE(fs::exists(cache.dir() + "/a.so"));
    EXPECT_FALSE(cache.fetch("a.so", dir.path + "/out2.so"));
    EXPECT_FALSE(fs::exists(dir.path + "/out2.so"));
  }
  // A disabled cache keeps nothing.
  CompileCache off;
  off.store("b.so", "x");
  EXPECT_EQ(off.load("b.so"), std::nullopt);
}

TEST(CompileCache, TrimsLeastRecentlyUsedEntriesFirst) {
  TempDir dir;
  std::string payload(1000, 'p');
  CompileCache cache(dir.path, 3500); // three entries with their headers fit, four do not
  auto age = [&](const std::string &name, int seconds) {
    fs::last_write_time(dir.path + "/" + name,
                        fs::file_time_type::clock::now() - std::chrono::seconds(seconds));
  };
  cache.store("old.so", payload);
  cache.store("mid.so", payload);
  cache.store("new.so", payload);
  age("old.so", 300);
  age("mid.so", 200);
  age("new.so", 100);
  ASSERT_TRUE(cache.load("old.so")); // a hit makes it the most recently used
  cache.store("fresh.so", payload);  // over the bound: the least recently used one goes
  EXPECT_EQ(entries(dir.path), (std::vector<std::string>{"fresh.so", "new.so", "old.so"}));
  // Stale temporaries of writers that died are removed; recent ones are left alone.
  writeFile(dir.path + "/x.so.tmp-1-0", "partial");
  writeFile(dir.path + "/y.so.tmp-2-0", "partial");
  age("x.so.tmp-1-0", 7200);
  cache.trim();
  EXPECT_FALSE(fs::exists(dir.path + "/x.so.tmp-1-0"));
  EXPECT_TRUE(fs::exists(dir.path + "/y.so.tmp-2-0"));
  CompileCache none(dir.path, 0);
  none.trim();
  EXPECT_EQ(entries(dir.path), (std::vector<std::string>{"y.so.tmp-2-0"}));
}

TEST(CompileCache, Environment) {
  EXPECT_EQ(*parseCacheSize("0"), 0u);
  EXPECT_EQ(*parseCacheSize("1234"), 1234u);
  EXPECT_EQ(*parseCacheSize("500M"), 500u << 20);
  EXPECT_EQ(*parseCacheSize("2g"), uint64_t(2) << 30);
  EXPECT_EQ(*parseCacheSize("7K"), 7u << 10);
  for (const char *bad : {"", "G", "-1", "1.5G", "12T", "99999999999999999999"}) {
    auto r = parseCacheSize(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message().find("COIL_CACHE_MAX must be a size in bytes"),
              std::string::npos);
  }
  {
    ScopedEnv d("COIL_CACHE_DIR", "/some/where"), m("COIL_CACHE_MAX", "64M");
    auto c = CompileCache::fromEnvironment();
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->dir(), "/some/where");
    EXPECT_EQ(c->maxBytes(), uint64_t(64) << 20);
  }
  {
    ScopedEnv d("COIL_CACHE_DIR", "off"), m("COIL_CACHE_MAX", nullptr);
    auto c = CompileCache::fromEnvironment();
    ASSERT_TRUE(c.ok());
    EXPECT_FALSE(c->enabled());
    EXPECT_EQ(c->maxBytes(), CompileCache::kDefaultMaxBytes);
  }
  {
    ScopedEnv d("COIL_CACHE_DIR", nullptr), x("XDG_CACHE_HOME", "/xdg"), m("COIL_CACHE_MAX", "");
    EXPECT_EQ(CompileCache::fromEnvironment()->dir(), "/xdg/coil");
  }
  ScopedEnv m("COIL_CACHE_MAX", "lots");
  EXPECT_FALSE(CompileCache::fromEnvironment().ok());
}

TEST(CompileCache, ToolchainNeverHandsBackADamagedBuild) {
  // Issue 15: a truncated cached model.so was reported "(cached)" and the package then failed
  // to load. The build now verifies the entry: a damaged one is rebuilt, and the result loads.
  TempDir dir;
  ScopedEnv d("COIL_CACHE_DIR", (dir.path + "/cache").c_str()), m("COIL_CACHE_MAX", nullptr);
  std::vector<SourceFile> src = {
      {"src/f.cpp", "extern \"C\" int coil_cache_test_value() { return 1234; }\n"}};
  ToolchainOptions to;
  auto first = buildSharedObject(dir.path + "/a", src, "f.so", to);
  ASSERT_TRUE(first.ok()) << first.error().render();
  EXPECT_FALSE(first->cacheHit);
  EXPECT_EQ(first->key.size(), 64u); // SHA-256
  auto again = buildSharedObject(dir.path + "/b", src, "f.so", to);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->cacheHit);
  EXPECT_EQ(again->key, first->key);
  EXPECT_EQ(readFile(dir.path + "/b/f.so"), readFile(dir.path + "/a/f.so"));
  // Truncate the entry: the next build is not a hit, and its f.so is whole.
  std::string entry = dir.path + "/cache/" + first->key + ".so";
  std::string bytes = readFile(entry);
  writeFile(entry, bytes.substr(0, bytes.size() / 2));
  auto rebuilt = buildSharedObject(dir.path + "/c", src, "f.so", to);
  ASSERT_TRUE(rebuilt.ok());
  EXPECT_FALSE(rebuilt->cacheHit);
  void *lib = dlopen((dir.path + "/c/f.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  auto fn = reinterpret_cast<int (*)()>(dlsym(lib, "coil_cache_test_value"));
  ASSERT_NE(fn, nullptr);
  EXPECT_EQ(fn(), 1234);
  dlclose(lib);
  EXPECT_EQ(readFile(entry), bytes); // stored again, whole
  // Another source is another key.
  std::vector<SourceFile> other = {
      {"src/f.cpp", "extern \"C\" int coil_cache_test_value() { return 4321; }\n"}};
  auto o = buildSharedObject(dir.path + "/d", other, "f.so", to);
  ASSERT_TRUE(o.ok());
  EXPECT_FALSE(o->cacheHit);
  EXPECT_NE(o->key, first->key);
  // A malformed COIL_CACHE_MAX is a user error of the build.
  ScopedEnv bad("COIL_CACHE_MAX", "big");
  auto e = buildSharedObject(dir.path + "/e", src, "f.so", to);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().kind(), ErrorKind::User);
}

TEST(CompileCache, ConcurrentStoresOfOneKeyLeaveOneWholeEntry) {
  TempDir dir;
  CompileCache cache(dir.path, 1 << 24);
  std::string payload(200000, 'q');
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        cache.store("k.so", payload);
        auto got = cache.load("k.so");
        EXPECT_TRUE(!got || *got == payload); // never a partial entry
      }
    });
  for (auto &t : threads) t.join();
  EXPECT_EQ(cache.load("k.so"), std::optional<std::string>(payload));
  EXPECT_EQ(entries(dir.path), std::vector<std::string>{"k.so"});
}

} // namespace
} // namespace coil
