// The kernel table of one ISA, from the bodies instantiated with that ISA's traits (in its own .cpp).
#pragma once

#include "kernel_body.hpp"
#include "optimizer_body.hpp"

namespace phub::agg::detail {

template <class Tr>
constexpr Kernels make_kernels(Isa isa, const char* name) {
  using B = Body<Tr>;
  return Kernels{isa, name, &B::init, &B::accumulate, &B::tall, &B::scale, &B::narrow, &OptimizerBody<Tr>::optimize};
}

}  // namespace phub::agg::detail
