// The one JSON library of the control plane (nlohmann-json, Debian's
// nlohmann-json3-dev): agqctl --json, the rte_telemetry commands and the
// job description workers read are all written and parsed with it.
// ordered_json keeps keys in the order the code writes them, so the output
// reads like the text form and diffs stay stable.
#pragma once

#include <nlohmann/json.hpp>

namespace agq::control {

using Json = nlohmann::ordered_json;

}  // namespace agq::control
