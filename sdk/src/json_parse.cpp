// Text to boost::json::value with exact doubles.
//
// Boost 1.81's parser computes doubles with a fast method that can be an ulp off, which would
// break "decoding our own output gives an equal snapshot". This is the same SAX parser with a
// handler that re-reads each floating-point number from its text with std::from_chars (correctly
// rounded). Everything else is what boost::json::parser does.
#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/error.hpp>
#include <boost/json/monotonic_resource.hpp>
#include <boost/json/value_stack.hpp>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "gpustream/detail/json_parse.hpp"
#include "gpustream/json.hpp"

namespace gpustream {
namespace {

namespace json = boost::json;
using boost::system::error_code;

class ExactHandler {
 public:
  static constexpr std::size_t max_object_size = json::object::max_size();
  static constexpr std::size_t max_array_size = json::array::max_size();
  static constexpr std::size_t max_key_size = json::string::max_size();
  static constexpr std::size_t max_string_size = json::string::max_size();

  json::value_stack& stack() noexcept { return st_; }

  bool on_document_begin(error_code&) { return true; }
  bool on_document_end(error_code&) { return true; }
  bool on_object_begin(error_code&) { return true; }
  bool on_object_end(std::size_t n, error_code&) {
    st_.push_object(n);
    return true;
  }
  bool on_array_begin(error_code&) { return true; }
  bool on_array_end(std::size_t n, error_code&) {
    st_.push_array(n);
    return true;
  }
  bool on_key_part(json::string_view s, std::size_t, error_code&) {
    st_.push_chars(s);
    return true;
  }
  bool on_key(json::string_view s, std::size_t, error_code&) {
    st_.push_key(s);
    return true;
  }
  bool on_string_part(json::string_view s, std::size_t, error_code&) {
    st_.push_chars(s);
    return true;
  }
  bool on_string(json::string_view s, std::size_t, error_code&) {
    st_.push_string(s);
    return true;
  }
  bool on_number_part(json::string_view s, error_code&) {
    number_.append(s.data(), s.size());
    return true;
  }
  bool on_int64(std::int64_t i, json::string_view, error_code&) {
    number_.clear();
    st_.push_int64(i);
    return true;
  }
  bool on_uint64(std::uint64_t u, json::string_view, error_code&) {
    number_.clear();
    st_.push_uint64(u);
    return true;
  }
  bool on_double(double d, json::string_view s, error_code& ec) {
    std::string_view text(s.data(), s.size());
    if (!number_.empty()) {
      number_.append(s.data(), s.size());
      text = number_;
    }
    double exact = 0;
    const auto r = std::from_chars(text.data(), text.data() + text.size(), exact);
    // On underflow from_chars leaves `exact` alone; Boost's value (0 or subnormal) is right.
    if (r.ec == std::errc{} && r.ptr == text.data() + text.size()) d = exact;
    number_.clear();
    if (!std::isfinite(d)) {
      ec = json::error::exponent_overflow;
      return false;
    }
    st_.push_double(d);
    return true;
  }
  bool on_bool(bool b, error_code&) {
    st_.push_bool(b);
    return true;
  }
  bool on_null(error_code&) {
    st_.push_null();
    return true;
  }
  bool on_comment_part(json::string_view, error_code&) { return true; }
  bool on_comment(json::string_view, error_code&) { return true; }

 private:
  json::value_stack st_;
  std::string number_;  // a number split across write_some calls (not with one buffer)
};

/// A printable piece of `text` around byte `at`, for error messages.
std::string excerpt(std::string_view text, std::size_t at) {
  constexpr std::size_t kBefore = 40, kAfter = 12;
  const std::size_t from = at > kBefore ? at - kBefore : 0;
  std::string out = to_valid_utf8(text.substr(from, at - from + kAfter));
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  return out;
}

}  // namespace

namespace detail {

json::value parse_json_bounded(std::string_view text, json::storage_ptr sp, std::size_t max_depth,
                               error_code& ec, std::size_t& consumed) {
  json::parse_options opts;
  opts.max_depth = max_depth;
  json::basic_parser<ExactHandler> p{opts};
  p.handler().stack().reset(std::move(sp));
  ec = {};
  consumed = p.write_some(false, text.data(), text.size(), ec);
  if (!ec && consumed < text.size()) ec = json::error::extra_data;
  if (ec) return nullptr;
  return p.handler().stack().release();
}

}  // namespace detail

json::value parse_json(std::string_view text, json::storage_ptr sp) {
  error_code ec;
  std::size_t n = 0;
  json::value v =
      detail::parse_json_bounded(text, std::move(sp), json::parse_options{}.max_depth, ec, n);
  if (ec) {
    throw JsonError("invalid JSON at byte " + std::to_string(n) + " of " +
                    std::to_string(text.size()) + " (near `" + excerpt(text, n) +
                    "`): " + ec.message());
  }
  return v;
}

GpuSnapshot snapshot_from_json_string(std::string_view text) {
  // The document is temporary: a monotonic arena makes building it cheap.
  unsigned char first_block[16384];
  json::monotonic_resource arena(first_block, sizeof first_block);
  const json::value doc = parse_json(text, &arena);
  return snapshot_from_json(doc);
}

}  // namespace gpustream
