// gpustream/detail/json_patch.hpp — a patch of a snapshot's gpustream/1 document applied to the
// snapshot itself (the fleet bus's deltas, transport/src/fleet/fleet_codec.cpp).
//
// The patch form is the bus's (gpustream/transport/fleet_codec.hpp): an object whose keys are
// the changed keys (array indexes as decimal strings), each value `[v]` (the new value), `null`
// (the key removed) or a nested patch. patch_snapshot(s, p) gives what reading the patched
// document would give, without the document: only what the patch names is read (with the
// reader's rules: types, enumeration names, required keys, the schema's `unless` and `refuse`),
// the rest of `s` is left as it is.
//
// Exact when the document the patch was made against is `s` as the writer writes it (the JSON
// text of `append_json(s)`): a key is taken to be in the document when the writer writes it.
// A caller whose base document may be anything else (another producer's keys, a different but
// valid spelling) must check that first (the bus decoder compares the texts).
//
// Thread safety: reentrant.
#pragma once

#include <boost/json/object.hpp>

#include "gpustream/model.hpp"

namespace gpustream::detail {

/// Applies `patch` to `s` in place. Throws JsonError (naming the place) when the patch does not
/// fit the document or the result is not a valid snapshot; `s` is then left part-patched (patch
/// a copy when the original must survive a refusal).
void patch_snapshot(GpuSnapshot& s, const boost::json::object& patch);

}  // namespace gpustream::detail
