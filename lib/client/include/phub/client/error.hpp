// Errors of the client library: a phub_status code and a message, returned through Expected.
#pragma once

#include <string>
#include <utility>

#include "phub/base/expected.hpp"
#include "phub/client.h"

namespace phub::client {

struct Error {
  phub_status code = PHUB_OK;
  std::string message;
};

template <class T>
using Result = Expected<T, Error>;

[[nodiscard]] inline Unexpected<Error> fail(phub_status code, std::string message) {
  return unexpected(Error{code, std::move(message)});
}

}  // namespace phub::client
