// Placeholder translation unit; the transport servers arrive with issue #7.
namespace gpustream::transport {
const char* version() noexcept { return "0.1.0"; }
}  // namespace gpustream::transport
