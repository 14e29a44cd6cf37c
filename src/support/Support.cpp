// Implementation of the small support types: Error, SourceLoc, Diagnostics, CheckFailure.
#include "support/Check.h"
#include "support/Diagnostics.h"
#include "support/Error.h"

namespace coil {

std::string SourceLoc::str() const {
  std::string s = file;
  if (line > 0) {
    s += ":" + std::to_string(line);
    if (column > 0) s += ":" + std::to_string(column);
  }
  if (!node.empty() || !op.empty()) {
    if (!s.empty()) s += ": ";
    if (!node.empty()) s += "node '" + node + "'";
    if (!op.empty()) s += (node.empty() ? "(" : " (") + op + ")";
  }
  return s;
}

Error Error::withDefaultLoc(const SourceLoc &loc) const {
  Error e = *this;
  if (e.loc_.file.empty()) e.loc_.file = loc.file;
  if (e.loc_.node.empty()) e.loc_.node = loc.node;
  if (e.loc_.op.empty()) e.loc_.op = loc.op;
  if (e.loc_.line == 0) {
    e.loc_.line = loc.line;
    e.loc_.column = loc.column;
  }
  return e;
}

std::string Error::render() const {
  const char *prefix = kind_ == ErrorKind::User       ? "error: "
                       : kind_ == ErrorKind::Internal ? "internal error: "
                                                      : "runtime error: ";
  std::string where = loc_.str();
  return prefix + (where.empty() ? message_ : where + ": " + message_);
}

int Error::exitCode() const {
  switch (kind_) {
  case ErrorKind::User:
    return 1;
  case ErrorKind::Internal:
    return 2;
  case ErrorKind::Runtime:
    return 3;
  }
  return 2;
}

Error Diagnostics::combined() const {
  COIL_CHECK(!errors_.empty()) << "Diagnostics::combined() with no errors";
  // The first error keeps its location (render() prints it); later ones carry their own.
  std::string text = errors_[0].message();
  for (size_t i = 1; i < errors_.size(); ++i)
    text += "\n" + errors_[i].render();
  return Error(errors_[0].kind(), text, errors_[0].loc());
}

void Diagnostics::print(std::ostream &os) const {
  for (const Error &e : errors_) os << e.render() << "\n";
}

namespace detail {
CheckFailure::CheckFailure(const char *file, int line, const char *cond) {
  os_ << file << ":" << line << ": check failed: " << cond << ": ";
}
CheckFailure::~CheckFailure() noexcept(false) {
  throw InternalError{os_.str()};
}
} // namespace detail

} // namespace coil
