// The one translation unit that compiles Asio's SSL support (BOOST_ASIO_SEPARATE_COMPILATION:
// the rest of Asio is compiled in sdk/src/asio_impl.cpp; its SSL part needs OpenSSL, which only
// the transport links).
#include <boost/asio/ssl/impl/src.hpp>
