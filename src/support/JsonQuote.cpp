#include "support/JsonQuote.h"

#include <cstdio>

namespace coil {

std::string jsonQuote(std::string_view s) {
  std::string r = "\"";
  for (char c : s) {
    switch (c) {
    case '"':
      r += "\\\"";
      break;
    case '\\':
      r += "\\\\";
      break;
    case '\n':
      r += "\\n";
      break;
    case '\r':
      r += "\\r";
      break;
    case '\t':
      r += "\\t";
      break;
    default:
      if ((unsigned char)c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", (unsigned)(unsigned char)c);
        r += buf;
      } else {
        r += c;
      }
    }
  }
  return r + "\"";
}

} // namespace coil
