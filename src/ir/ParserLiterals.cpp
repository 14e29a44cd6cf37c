// The `.coil` text parser's literals: numbers, attribute values, tensor literals, types and
// size expressions (grammar in Printer.h).
#include "ir/ParserInternal.h"

#include <charconv>
#include <cstring>

namespace coil::textfmt {

bool Parser::atNumber() const {
  const Token &t = cur().kind == Tok::Punct && cur().text == "-" ? ahead(1) : cur();
  return t.kind == Tok::Int || t.kind == Tok::Float ||
         (t.kind == Tok::Ident && (t.text == "inf" || t.text == "nan"));
}

/// ['-'] (INT | FLOAT | 'inf' | 'nan'): the joined text, and whether it is a float.
Status Parser::parseNumberText(std::string &text, bool &isFloat, const std::string &context) {
  text.clear();
  if (isPunct("-")) {
    text = "-";
    bump();
  }
  const Token &t = cur();
  if (!(t.kind == Tok::Int || t.kind == Tok::Float ||
        (t.kind == Tok::Ident && (t.text == "inf" || t.text == "nan"))))
    return expected("a number", context);
  isFloat = t.kind != Tok::Int;
  text += t.text;
  bump();
  return okStatus();
}

Expected<int64_t> Parser::parseInt64(const std::string &context) {
  Token start = cur();
  std::string text;
  bool isFloat = false;
  COIL_TRY_STATUS(parseNumberText(text, isFloat, context));
  int64_t v = 0;
  std::string err = parseElement(DType::I64, text, isFloat, &v);
  if (!err.empty()) return errorAt(start, err);
  return v;
}

Expected<double> Parser::parseDouble(const std::string &context) {
  Token start = cur();
  std::string text;
  bool isFloat = false;
  COIL_TRY_STATUS(parseNumberText(text, isFloat, context));
  double v = 0;
  std::string err = parseElement(DType::F64, text, true, &v);
  if (!err.empty()) return errorAt(start, err);
  return v;
}

Expected<AttrValue> Parser::parseAttrValue() {
  Token start = cur();
  if (cur().kind == Tok::String) {
    std::string s = cur().str;
    bump();
    return AttrValue(std::move(s));
  }
  if (atNumber()) {
    std::string text;
    bool isFloat = false;
    COIL_TRY_STATUS(parseNumberText(text, isFloat, "as an attribute value"));
    if (isFloat) {
      double d = 0;
      std::string err = parseElement(DType::F64, text, true, &d);
      if (!err.empty()) return errorAt(start, err);
      return AttrValue(d);
    }
    int64_t v = 0;
    std::string err = parseElement(DType::I64, text, false, &v);
    if (!err.empty()) return errorAt(start, err);
    return AttrValue(v);
  }
  if (isKeyword("tensor")) {
    bump();
    COIL_TRY(Tensor t, parseTensorLiteral());
    return AttrValue(std::move(t));
  }
  if (isKeyword("syms")) {
    bump();
    COIL_TRY(std::vector<SymInt> l, parseSymList("after 'syms'"));
    return AttrValue(std::move(l));
  }
  if (isKeyword("ints")) {
    bump();
    std::vector<int64_t> l;
    COIL_TRY_STATUS(parseList("after 'ints'", [&]() -> Status {
      COIL_TRY(int64_t v, parseInt64("in an ints list"));
      l.push_back(v);
      return okStatus();
    }));
    return AttrValue(std::move(l));
  }
  if (isKeyword("floats")) {
    bump();
    std::vector<double> l;
    COIL_TRY_STATUS(parseList("after 'floats'", [&]() -> Status {
      COIL_TRY(double v, parseDouble("in a floats list"));
      l.push_back(v);
      return okStatus();
    }));
    return AttrValue(std::move(l));
  }
  if (isKeyword("strings")) {
    bump();
    std::vector<std::string> l;
    COIL_TRY_STATUS(parseList("after 'strings'", [&]() -> Status {
      COIL_TRY(std::string s, expectString("in a strings list"));
      l.push_back(std::move(s));
      return okStatus();
    }));
    return AttrValue(std::move(l));
  }
  if (isPunct("[")) {
    if (ahead(1).kind == Tok::Punct && ahead(1).text == "]")
      return errorAt(start, "an empty list needs its kind: ints[], floats[], strings[] or "
                            "syms[]");
    if (ahead(1).kind == Tok::String) {
      std::vector<std::string> l;
      COIL_TRY_STATUS(parseList("", [&]() -> Status {
        COIL_TRY(std::string s, expectString("in a list of strings"));
        l.push_back(std::move(s));
        return okStatus();
      }));
      return AttrValue(std::move(l));
    }
    // Numbers: a list holding any float is a floats list, else an ints list.
    std::vector<std::pair<std::string, bool>> items;
    std::vector<Token> starts;
    bool anyFloat = false;
    COIL_TRY_STATUS(parseList("", [&]() -> Status {
      std::string text;
      bool isFloat = false;
      starts.push_back(cur());
      COIL_TRY_STATUS(parseNumberText(text, isFloat, "in a list"));
      anyFloat |= isFloat;
      items.emplace_back(std::move(text), isFloat);
      return okStatus();
    }));
    if (anyFloat) {
      std::vector<double> l(items.size());
      for (size_t i = 0; i < items.size(); ++i) {
        std::string err = parseElement(DType::F64, items[i].first, true, &l[i]);
        if (!err.empty()) return errorAt(starts[i], err);
      }
      return AttrValue(std::move(l));
    }
    std::vector<int64_t> l(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      std::string err = parseElement(DType::I64, items[i].first, false, &l[i]);
      if (!err.empty()) return errorAt(starts[i], err);
    }
    return AttrValue(std::move(l));
  }
  return expected("an attribute value (number, string, list, 'tensor' or 'syms')");
}

// tensor-literal := type ('[' element (',' element)* ']' | 'hex' STRING)
Expected<Tensor> Parser::parseTensorLiteral() {
  Token typeTok = cur();
  COIL_TRY(TensorType type, parseType());
  auto shape = type.concreteShape();
  if (!shape) return errorAt(typeTok, "a constant must have a concrete shape, got " + type.str());
  // numel * element size, guarding against overflow (constants are at most 2^40 bytes).
  const uint64_t kMaxBytes = uint64_t(1) << 40;
  uint64_t numel = 1;
  for (int64_t d : *shape) {
    if (d != 0 && numel > kMaxBytes / uint64_t(d))
      return errorAt(typeTok, "constant of type " + type.str() + " is too large");
    numel *= uint64_t(d);
  }
  size_t esize = dtypeSize(type.dtype);
  if (numel * esize > kMaxBytes)
    return errorAt(typeTok, "constant of type " + type.str() + " is too large");
  std::vector<uint8_t> bytes;
  if (isKeyword("hex")) {
    bump();
    Token strTok = cur();
    COIL_TRY(std::string hex, expectString("after 'hex'"));
    if (hex.size() != 2 * numel * esize)
      return errorAt(strTok, "hex data of " + type.str() + " must have " +
                                 std::to_string(2 * numel * esize) + " hex digits, got " +
                                 std::to_string(hex.size()));
    bytes.resize(hex.size() / 2);
    static const auto digit = [](char h) {
      return h >= '0' && h <= '9'   ? h - '0'
             : h >= 'a' && h <= 'f' ? h - 'a' + 10
             : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                    : -1;
    };
    for (size_t i = 0; i < bytes.size(); ++i) {
      int hi = digit(hex[2 * i]), lo = digit(hex[2 * i + 1]);
      if (hi < 0 || lo < 0)
        return errorAt(strTok, "hex data holds a character that is not a hex digit at "
                               "offset " +
                                   std::to_string(hi < 0 ? 2 * i : 2 * i + 1));
      bytes[i] = uint8_t(hi * 16 + lo);
    }
  } else if (isPunct("[")) {
    Token listTok = cur();
    uint64_t count = 0;
    COIL_TRY_STATUS(parseList("", [&]() -> Status {
      Token start = cur();
      std::string text;
      bool isFloat = false;
      if (isKeyword("true") || isKeyword("false")) {
        text = std::string(cur().text);
        bump();
      } else {
        COIL_TRY_STATUS(parseNumberText(text, isFloat, "as a tensor element"));
      }
      if (++count > numel)
        return errorAt(start, "constant of type " + type.str() + " needs " + std::to_string(numel) +
                                  " elements, got more");
      bytes.resize(bytes.size() + esize);
      std::string err =
          parseElement(type.dtype, text, isFloat, bytes.data() + bytes.size() - esize);
      if (!err.empty()) return errorAt(start, err);
      return okStatus();
    }));
    if (count != numel)
      return errorAt(listTok, "constant of type " + type.str() + " needs " + std::to_string(numel) +
                                  " elements, got " + std::to_string(count));
  } else {
    return expected("'[' or 'hex'", "after the constant's type");
  }
  return Tensor::fromBytes(type.dtype, *shape, bytes.data(), bytes.size());
}

// type := DTYPE '[' (symint (',' symint)*)? ']'
Expected<TensorType> Parser::parseType() {
  if (cur().kind != Tok::Ident) return expected("a type such as 'f32[N, 3]'");
  auto dt = parseDType(cur().text);
  if (!dt) return errorAt(cur(), "unknown dtype '" + std::string(cur().text) + "'");
  bump();
  TensorType t;
  t.dtype = *dt;
  Token listTok = cur();
  COIL_TRY(t.shape, parseSymList("after the dtype"));
  for (const SymInt &d : t.shape)
    if (d.isConstant() && d.constant() < 0)
      return errorAt(listTok, "dimension " + std::to_string(d.constant()) + " of type " + t.str() +
                                  " is negative");
  return t;
}

Expected<std::vector<SymInt>> Parser::parseSymList(const std::string &context) {
  std::vector<SymInt> l;
  COIL_TRY_STATUS(parseList(context, [&]() -> Status {
    COIL_TRY(SymInt e, parseSize());
    l.push_back(std::move(e));
    return okStatus();
  }));
  return l;
}

// --- size expressions (the rules are support/TextScanner.h's)

// `N %4` lexes as N and the value name %4: read it as N % 4 (likewise `N %M`).
Expected<bool> Parser::gluedOperand(SymInt &operand) {
  const Token &t = cur();
  bool glued = t.kind == Tok::ValueName && t.text.size() > 1 && t.text[1] != '"' &&
               (isIdentifier(t.str) || t.str.find_first_not_of("0123456789") == std::string::npos);
  if (!glued) return false;
  if (isIdentifier(t.str)) {
    operand = SymInt::symbol(t.str);
  } else {
    int64_t v = 0;
    std::string err = parseElement(DType::I64, t.str, false, &v);
    if (!err.empty()) return errorAt(t, err);
    operand = v;
  }
  bump();
  return true;
}

} // namespace coil::textfmt
