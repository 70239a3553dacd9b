// Text for a command whose data is built as JSON (control/json.hpp), so
// the text and the --json form of one command come from one value:
// an object prints "key  value" per line (nested objects as key.sub),
// an array of objects as a table with a header row, a scalar as itself.
#pragma once

#include <string>

#include "control/json.hpp"

namespace agq::control {

std::string json_as_text(const Json& j);

}  // namespace agq::control
