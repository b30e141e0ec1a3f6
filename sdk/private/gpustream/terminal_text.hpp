// Private to the project: the one gate between strings from outside (a tool, a driver, a
// recording, the bus, a server) and an operator's terminal. Every such string the CLI prints in a
// human format goes through terminal_safe() (one field) or terminal_safe_text() (a multi-line
// report), and so does every line the SDK's own stderr logger writes (sdk/src/log.cpp). JSON
// output does not: the JSON writer escapes it (docs/cli.md, "Terminal output").
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gpustream {

/// `s` made harmless for a terminal, as one field on one line:
/// - a C0 control byte (0x00–0x1F: ESC, BEL, CR, LF, TAB, BS, ...) and DEL (0x7F) become
///   `\xHH` (lowercase hex: ESC is `\x1b`);
/// - a C1 control (U+0080–U+009F, which some terminals take as CSI and the like) and the
///   characters that move or reorder text without showing (U+061C, U+200E, U+200F, U+2028,
///   U+2029, U+202A–U+202E, U+2066–U+2069) become `\uHHHH`;
/// - a byte that is not part of well-formed UTF-8 (a raw 0x9B, a cut sequence) becomes `\xHH`.
/// Everything else — printable ASCII and valid printable UTF-8 ("Radeon™", CJK) — is kept as
/// it is, so a normal string comes back byte for byte. A backslash is kept: `\x1b` in the
/// output may be those four characters or an escaped ESC; it is never an ESC. Thread-safe.
std::string terminal_safe(std::string_view s);

/// False when terminal_safe(s) == s (nothing to escape), without allocating.
bool is_terminal_safe(std::string_view s) noexcept;

/// The same for a multi-line text (a report): as terminal_safe(), but a line feed (LF) is kept.
std::string terminal_safe_text(std::string_view s);

/// The columns `s` takes on a terminal: one per code point, two for the East Asian wide and
/// full-width ones (the ranges fmt also counts as two when it pads). Precondition: `s` is what
/// terminal_safe() returns (valid UTF-8 without controls).
std::size_t display_columns(std::string_view s);

/// `s` cut to at most `columns` columns: when it is wider, as much of it as fits in
/// `columns - 1` columns (whole characters) and "~". Precondition as display_columns().
std::string fit_columns(std::string_view s, std::size_t columns);

}  // namespace gpustream
