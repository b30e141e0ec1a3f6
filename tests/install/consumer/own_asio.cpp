// The consumer's own Asio code, written against Asio's full API (io_service, deprecated but
// still part of Boost 1.81). Linking gpustream must not change its meaning: gpustream compiles
// its own Asio with BOOST_ASIO_SEPARATE_COMPILATION and BOOST_ASIO_NO_DEPRECATED, but does not
// impose either on the targets that link it.
#include <boost/asio/io_service.hpp>
#include <boost/asio/post.hpp>

#if defined(BOOST_ASIO_NO_DEPRECATED) || defined(BOOST_ASIO_SEPARATE_COMPILATION)
#error "gpustream's targets leaked their private Asio configuration into a consumer"
#endif

int run_own_asio() {
  boost::asio::io_service io;
  int ran = 0;
  boost::asio::post(io, [&] { ++ran; });
  io.run();
  return ran;
}
