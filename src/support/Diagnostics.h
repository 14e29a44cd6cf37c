/// \file A sink that collects every user error of a run, so one run reports them all.
#pragma once

#include "support/Error.h"

#include <ostream>
#include <vector>

namespace coil {

class Diagnostics {
public:
  void report(Error e) { errors_.push_back(std::move(e)); }
  bool hasErrors() const { return !errors_.empty(); }
  const std::vector<Error> &errors() const { return errors_; }
  /// One Error carrying every collected message, one per line (the first error's kind).
  Error combined() const;
  void print(std::ostream &os) const;

private:
  std::vector<Error> errors_;
};

} // namespace coil
