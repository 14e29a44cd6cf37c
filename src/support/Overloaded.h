/// \file `Overloaded{lambdas...}`: one visitor from several lambdas, for std::visit over the
/// variants of the IRs (Wrapper IR lines, Loop IR node kinds).
#pragma once

namespace coil {

template <class... Fs> struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs> Overloaded(Fs...) -> Overloaded<Fs...>;

} // namespace coil
