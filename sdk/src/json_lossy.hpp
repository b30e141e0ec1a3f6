// Private to the SDK: what both JSON encoders (json_value.cpp's document and json_write.cpp's
// direct writer) do with a value JSON cannot carry. One place, so both encoders write the same
// thing and log it once between them.
#pragma once

#include <string_view>

#include "gpustream/model.hpp"

namespace gpustream::detail {

/// Logs, once per kind of loss, that a value was written in a JSON-safe form.
void note_lossy(std::string_view what, std::string_view where);

/// What a Reading is written as: a present non-finite value becomes absent ("unsupported").
Reading writable(const Reading& r, std::string_view where);

}  // namespace gpustream::detail
